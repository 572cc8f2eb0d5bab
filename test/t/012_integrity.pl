# Checksummed records at recovery (SPEC §4).
# - Snapshot: one bit flipped in every byte of the newest snapshot, in turn
#   (the bit moves through 0..7 along the record). Each time recovery must
#   refuse the snapshot, replay the whole log (recovery_snapshot 0) and
#   bring every owner back with its phase, lap and position — never start
#   an owner from altered bytes. Repaired, recovery starts from it again.
# - Cycle: one bit flipped in every byte of a sealed cycle record, in turn,
#   with no snapshot covering it. Each time the owner with landings in it
#   is quarantined at its prefix with the cycle named, the other owner
#   recovers, and once repaired release_owner applies the cycle again.
# - The cycle's owner list: damaged alone, the landings still replay and
#   trajectories through the cycle are XX001; damaged with the landings,
#   recovery quarantines every owner (it cannot know whose landings they
#   were) and, repaired, each is released.
#
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('integrity', conf => "lake.checkpoint_cycles = 1000\n");
$node->start;

sub psql { return $node->safe_psql('postgres', $_[0]); }

sub restart { restart_recovered($node) or die 'the worker did not recover'; }

my @owners = qw(s1 s2 s3);
sub states
{
	return psql("SELECT string_agg(format('%s %s %s %s', o, s.phase, s.lap, s.position), ', ' ORDER BY o) "
		  . "FROM unnest('{@{[ join(',', @owners) ]}}'::text[]) o, lake.owner_state(o) s");
}

psql("CREATE EXTENSION lake; SELECT count(lake.create_owner(o)) FROM unnest('{s1,s2,s3}'::text[]) o");
# Before the snapshot: s1 round a whole lap, s2 two steps, s3 one.
for my $c (
	"'s1', 'Planning', 'CognitiveWork'",    "'s1', 'CognitiveWork', 'Evaluation'",
	"'s1', 'Evaluation', 'Prune'",          "'s1', 'Prune', 'Planning'",
	"'s1', 'Planning', 'CognitiveWork'",    "'s2', 'Planning', 'CognitiveWork'",
	"'s2', 'CognitiveWork', 'Evaluation'",  "'s3', 'Planning', 'CognitiveWork'")
{
	psql("SELECT lake.cast($c, convert_to('100 EUR', 'UTF8'))");
}
psql('SELECT lake.seal()');
my $snap = psql('SELECT lake.checkpoint()');
# After it: the tail.
psql("SELECT lake.cast('s2', 'Evaluation', 'Commit')");
psql('SELECT lake.seal()');
my $want = states();
like($want, qr/^s1 CognitiveWork 1 5, s2 Commit 0 3, s3 CognitiveWork 0 1$/, "states before: $want");

restart();
is(psql('SELECT recovery_snapshot FROM lake.stats()'), $snap, 'recovery starts from the snapshot');
is(states(), $want, 'and restores every owner');

my $good = psql("SELECT encode(data, 'hex') FROM lake_data.snapshot WHERE cycle = $snap");
my $good_bytes = psql("SELECT bytes FROM lake_data.snapshot WHERE cycle = $snap");
my $len  = length($good) / 2;
my @wrong;
for my $i (0 .. $len - 1)
{
	my $bit = 8 * $i + $i % 8;
	psql("UPDATE lake_data.snapshot SET data = set_bit(data, $bit, 1 - get_bit(data, $bit)) WHERE cycle = $snap");
	restart();
	my $from = psql('SELECT recovery_snapshot FROM lake.stats()');
	my $got  = states();
	push @wrong, "byte $i bit @{[ $i % 8 ]}: snapshot $from, $got"
	  if $from ne '0' || $got ne $want;
	psql("UPDATE lake_data.snapshot SET data = decode('$good', 'hex') WHERE cycle = $snap");
}
ok($len > 20, "the snapshot has $len bytes");
is_deeply(\@wrong, [],
	'every flipped snapshot is refused: the whole log replays to the same states');
restart();
is(psql('SELECT recovery_snapshot FROM lake.stats()'), $snap, 'repaired, recovery starts from it again');
is(states(), $want, 'with the same states');

# A snapshot whose checksum holds but whose record does not decode (a
# writer's bug, not the disk's): the first images are well formed, the
# record has a byte too many. None of it may be applied: the whole log
# replays. First the same record without that byte, which recovery uses.
sub crc32c
{
	my $crc = 0xffffffff;
	for my $b (unpack 'C*', $_[0])
	{
		$crc ^= $b;
		$crc = ($crc & 1) ? (($crc >> 1) ^ 0x82F63B78) : ($crc >> 1) for 1 .. 8;
	}
	return $crc ^ 0xffffffff;
}
# ('S', version 2, the count, the cycle the snapshot covers, then the images.)
my $raw = 'S' . pack('C V Q<', 2, 3, $snap);
for (['s1', 5, 1, 'CognitiveWork'], ['s2', 2, 0, 'Evaluation'], ['s3', 1, 0, 'CognitiveWork'])
{
	my ($o, $pos, $lap, $phase) = @$_;
	my $id = psql("SELECT id FROM lake_data.owner WHERE name = '$o'");
	$raw .= pack('V Q< Q< v', $id, $pos, $lap, length $phase) . $phase;
}
for my $case ([ $raw, $snap, 'a well-formed raw snapshot is used' ],
	[ "$raw\0", 0, 'one with a byte too many is refused whole' ])
{
	my ($rec, $from, $what) = @$case;
	my $hex = unpack('H*', 'R' . pack('V', crc32c($rec)) . $rec);
	psql("UPDATE lake_data.snapshot SET data = '\\x$hex', bytes = @{[ length $rec ]} WHERE cycle = $snap");
	restart();
	is(psql('SELECT recovery_snapshot FROM lake.stats()') . ' ' . states(), "$from $want", $what);
}
psql("UPDATE lake_data.snapshot SET data = decode('$good', 'hex'), bytes = $good_bytes WHERE cycle = $snap");

# A damaged cycle: c1's landing alone in it, c2 in a later cycle.
push @owners, qw(c1 c2);
psql("SELECT lake.create_owner(o) FROM unnest('{c1,c2}'::text[]) o");
my $bad = psql("SELECT (lake.cast_durable('c1', 'Planning', 'CognitiveWork', convert_to('100 EUR', 'UTF8'))).cycle");
psql("SELECT lake.cast_durable('c2', 'Planning', 'CognitiveWork')");
psql('DELETE FROM lake_data.snapshot');
$want = states();
# Recovery learns whose landings the damaged cycle held from its owner list,
# as it does for any cycle; here one in the owner index's unindexed tail.
is(psql("SELECT $bad > indexed_through FROM lake_data.cycle ORDER BY cycle DESC LIMIT 1"),
	't', 'the damaged cycle is after the last closed block of the owner index');
my $cycle = psql("SELECT encode(data, 'hex') FROM lake_data.cycle WHERE cycle = $bad");
$len   = length($cycle) / 2;
@wrong = ();
my $reasons = 0;
for my $i (0 .. $len - 1)
{
	my $bit = 8 * $i + $i % 8;
	psql("UPDATE lake_data.cycle SET data = set_bit(data, $bit, 1 - get_bit(data, $bit)) WHERE cycle = $bad");
	restart();
	my $got = psql("SELECT string_agg(format('%s %s %s', o, s.position, s.quarantined), ', ' ORDER BY o) "
		  . "FROM unnest('{c1,c2}'::text[]) o, lake.owner_state(o) s");
	push @wrong, "byte $i: $got" if $got ne 'c1 0 t, c2 1 f';
	$reasons++ if psql("SELECT reason FROM lake.owner_state('c1')") =~ /^cycle $bad is damaged: /;
	psql("UPDATE lake_data.cycle SET data = decode('$cycle', 'hex') WHERE cycle = $bad");
	# A release writes a snapshot, which would cover the cycle next time.
	psql("SELECT lake.release_owner('c1'); DELETE FROM lake_data.snapshot");
}
is_deeply(\@wrong, [], "every flipped cycle ($len bytes) quarantines its owner at its prefix; the other recovers");
is($reasons, $len, 'each time naming the damaged cycle');
is(states(), $want, 'repaired and released, every owner is where its log leaves it');

# The cycle's owner list (lake_data.cycle.owners), kept beside its landings
# with its own checksum. One bit flipped in each of its bytes, in turn, the
# landings intact: the landings still replay (recovery does not need the
# list), but a trajectory reading the cycle — it is in the unindexed tail —
# cannot tell whose landings it holds and is refused, for every owner.
my $list = psql("SELECT encode(owners, 'hex') FROM lake_data.cycle WHERE cycle = $bad");
my $listlen = length($list) / 2;
@wrong = ();
for my $i (0 .. $listlen - 1)
{
	my $bit = 8 * $i + $i % 8;
	psql("UPDATE lake_data.cycle SET owners = set_bit(owners, $bit, 1 - get_bit(owners, $bit)) WHERE cycle = $bad");
	for my $o (qw(c1 c2))
	{
		my ($state, $msg) = sql_error($node, "SELECT count(*) FROM lake.trajectory('$o')");
		push @wrong, "byte $i, $o: $state $msg" unless $state eq 'XX001' && $msg =~ /at cycle $bad/;
	}
	psql("UPDATE lake_data.cycle SET owners = decode('$list', 'hex') WHERE cycle = $bad");
}
is_deeply(\@wrong, [], "every flipped byte of the owner list ($listlen bytes) makes each trajectory through it XX001");
restart();
is(states(), $want, 'the landings replay whatever the owner list holds');

# Landings and owner list both damaged: whose landings the cycle holds is
# unknown, so recovery quarantines every owner rather than guess (fail
# closed); repaired, each is released to where its log leaves it.
psql("UPDATE lake_data.cycle SET data = set_bit(data, 9, 1 - get_bit(data, 9)), "
	  . "owners = set_bit(owners, 9, 1 - get_bit(owners, 9)) WHERE cycle = $bad");
restart();
is(psql("SELECT string_agg(format('%s %s', o, s.quarantined), ', ' ORDER BY o) "
		  . "FROM unnest('{@{[ join(',', @owners) ]}}'::text[]) o, lake.owner_state(o) s"),
	join(', ', map { "$_ t" } sort @owners), 'every owner is quarantined');
like(psql("SELECT reason FROM lake.owner_state('c2')"),
	qr/^cycle $bad is damaged, and so is its owner list: /, '... saying the cycle and its owner list are damaged');
psql("UPDATE lake_data.cycle SET data = decode('$cycle', 'hex'), owners = decode('$list', 'hex') WHERE cycle = $bad");
psql("SELECT lake.release_owner(o) FROM unnest('{@{[ join(',', @owners) ]}}'::text[]) o");
is(states(), $want, 'repaired and released, every owner is where its log leaves it');

# Damage below lake's records: a version's chunk rows in lake_data.chunk are
# stored out of line (TOAST), and a TOAST page zeroed is their rows gone.
# PostgreSQL's own XX001 for it is, for a version, damage to its lineage:
# a read, a same-content replay and a different-content retry are all LK005
# (SPEC §3), never LK001 or a version number.
psql("SELECT lake.create_dataset('toasted')");
my $payload = "(SELECT decode(string_agg(lpad(to_hex((i * 2654435761) % 4294967296), 8, '0'), ''), 'hex') "
  . "FROM generate_series(1, 800000) i)";
my $toasted = psql("SELECT lake.append('toasted', 't', 'big', $payload)");
is(psql("SELECT nchunks FROM lake_data.version_blob WHERE version = $toasted "
		  . "AND dataset_id = (SELECT id FROM lake_data.dataset WHERE name = 'toasted')"),
	'4', 'a 3.2 MB incompressible payload: chunk 0 in its row, three in lake_data.chunk');
my $toast = psql("SELECT pg_relation_filepath(reltoastrelid) FROM pg_class WHERE oid = 'lake_data.chunk'::regclass");
$node->stop;
open(my $fh, '+<', $node->data_dir . "/$toast") or die "open $toast: $!";
binmode $fh;
seek($fh, 8192, 0) or die;
print $fh ("\0" x 8192);
close $fh;
$node->start;
for my $case ([ "SELECT length(lake.read('toasted', $toasted))", 'a read' ],
	[ "SELECT lake.append('toasted', 't', 'big', $payload)", 'a same-content replay' ],
	[ "SELECT lake.append('toasted', 't', 'big', 'other'::bytea)", 'a different-content retry' ])
{
	my ($state, $msg) = sql_error($node, $case->[0]);
	is("$state $msg", "LK005 a stored chunk of version $toasted is unreadable",
		"$case->[1] over a version whose TOAST rows are gone is LK005");
}

done_testing();
