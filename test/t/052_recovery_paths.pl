# Recovery paths no other test executes with an outcome to check.
#
# (a) An owner's replay through a damaged owner index reads the log itself
#     (logread.c: walk_damaged sets rescan; scan_landing finds the landings).
#     The worker's recovery after a restart reads the log after the
#     snapshot directly (recovery.c: replay_log), never the owner index; the
#     per-owner walk, with its fallback, is what lake.recover() and
#     lake.release_owner() replay through. So: owner q shares its cycles
#     with p1 and p2, has landings past the snapshot in a closed block and in
#     the tail, its lifecycle is broken by hand and its owner-index entry is
#     damaged; after a restart q is quarantined at its prefix while p1 and p2
#     recover to what the log says; with the lifecycle back,
#     lake.release_owner('q') applies the rest of q's landings through the
#     fallback, to the state the log says, with a WARNING that names the
#     damage and lake.rebuild_owner_index(); lake.recover() then applies
#     nothing, after another restart too. The reader is refused (XX001)
#     until lake.rebuild_owner_index().
# (b) A damaged owner list (lake_data.cycle.owners) is rebuilt from the
#     cycle's landings (logread.c: owner_list_landing, through
#     log_scan_owner_lists): by lake.rebuild_owner_index() (the index comes
#     out byte for byte as the seals wrote it) and by the seal that closes
#     the list's block (the reader's XX001 on the tail goes away, no
#     warning, every trajectory whole). The damaged cycles hold two landings
#     of q around one of p1, and two of them (64, 120) are q's last in their
#     blocks, so the rebuilt first positions and counts reach the entries.
# (c) The worker's epoch cannot pass 2^31-1 (recovery.c): with the writer
#     row's epoch at INT32_MAX, the worker reports 'recovery failing', casts
#     get 55000 naming the epoch, and once the row is repaired the worker's
#     retry (each second, no restart) recovers and casts work again.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

# Only lake.seal() (and cast_durable) seal: the test decides every cycle.
my $node = lake_node('recovery_paths',
	conf => "restart_after_crash = on\nlake.cycle_interval = '1h'\nlake.checkpoint_cycles = 100000\n");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.define_lifecycle('abc', 'A', '{{A,B},{B,C},{C,A}}');
SELECT lake.create_owner('q', 'abc');
SELECT lake.create_owner('p1');
SELECT lake.create_owner('p2');
});
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"), 'the worker serves');

my @owners = qw(q p1 p2);
my %initial = (q => 'A', p1 => 'Planning', p2 => 'Planning');
my %m = map { $_ => { phase => $initial{$_}, lap => 0 } } @owners;
my $cycles = 0;

# The SQL of one step (or a no-step cast) of owner o, updating %m.
sub step
{
	my ($o, $nostep) = @_;
	my $s = $m{$o};
	return "SELECT lake.cast('$o', NULL, NULL, 'c$cycles');" if $nostep;
	my $to =
	    $o eq 'q'
	  ? { A => 'B', B => 'C', C => 'A' }->{ $s->{phase} }
	  : kanban_next($o, $s->{phase}, $s->{lap});
	my $sql = "SELECT lake.cast('$o', '$s->{phase}', '$to', 'c$cycles');";
	$s->{phase} = $to;
	$s->{lap}++ if $to eq $initial{$o};
	return $sql;
}

# Seal cycles up to number $upto, each with: a step of q (on every fifth
# cycle and on cycle 64 a no-step cast of q, a step of p1, then the step of
# q: two landings of q around one of p1), a step of p1 (not every seventh),
# a no-step cast of p2 every third; cycles 121..130 only a no-step cast of
# p2. So cycles 64 and 120 are q's last in their blocks (1..64, 65..128):
# the last position of q's index entry is taken from their owner lists.
sub seal_upto
{
	my ($upto) = @_;
	my @sql;
	while ($cycles < $upto)
	{
		$cycles++;
		my $k = $cycles;
		if ($k >= 121 && $k <= 130)
		{
			push @sql, step('p2', 1);    # 120 is q's and p1's last cycle in the block 65..128
		}
		elsif ($k % 5 == 0 || $k == 64)
		{
			push @sql, step('q', 1), step('p1'), step('q');
		}
		else
		{
			push @sql, step('q');
			push @sql, step('p1') if $k % 7 != 0;
		}
		push @sql, step('p2', 1) if $k % 3 == 0;
		push @sql, 'SELECT lake.seal();';
	}
	$node->safe_psql('postgres', join("\n", @sql));
	is($node->safe_psql('postgres', 'SELECT max(cycle) FROM lake_data.cycle'), $upto, "sealed through cycle $upto");
}

# owner -> "phase|lap|position" as the log (lake.log(), read directly, no
# index) leaves it; dies on a gap.
sub log_states
{
	my %s = map { $_ => "$initial{$_}|0|0" } @owners;
	my %pos;
	for my $l (@{ read_log($node) })
	{
		my $o = $l->{owner};
		die "$o: position $l->{position} follows " . ($pos{$o} // 0) . "\n"
		  unless $l->{position} == ($pos{$o} // 0) + 1;
		$pos{$o} = $l->{position};
		my ($phase) = split /\|/, $s{$o};
		$phase = $l->{to} if $l->{to} ne '';
		$s{$o} = "$phase|$l->{lap}|$l->{position}";
	}
	return \%s;
}

sub live
{
	my ($o) = @_;
	return $node->safe_psql('postgres', "SELECT phase, lap, position FROM lake.owner_state('$o')");
}

# The trajectory, as "position:cycle:payload" in order, against the log's.
sub trajectory_is_log
{
	my ($o, $what) = @_;
	# Not safe_psql: a refusal is a failed check, and the test goes on.
	my ($rc, $got, $err) = $node->psql('postgres',
		"SELECT string_agg(position || ':' || cycle || ':' || coalesce(convert_from(payload, 'UTF8'), ''), ',' ORDER BY position) "
		  . "FROM lake.trajectory('$o')");
	$got .= $err;
	my $want = join(',',
		map { "$_->{position}:$_->{cycle}:$_->{payload}" }
		sort { $a->{position} <=> $b->{position} } grep { $_->{owner} eq $o } @{ read_log($node) });
	is($got, $want, "$what: ${o}'s trajectory is its landings in the log");
}

sub recovers_nothing
{
	my ($what) = @_;
	is($node->safe_psql('postgres', 'SELECT sum(applied), count(*) FILTER (WHERE quarantined) FROM lake.recover()'),
		'0|0', "$what: lake.recover() applies nothing, quarantines nobody");
}

my $owner_id = sub {
	$node->safe_psql('postgres', "SELECT id FROM lake_data.owner WHERE name = '$_[0]'");
};
my $index_sql =
    "SELECT count(*) || ' ' || md5(string_agg(owner_id || ':' || first_cycle || ':' || encode(entry, 'hex'), ',' "
  . "ORDER BY owner_id, first_cycle)) FROM lake_data.owner_block";

# ----------------------------------------------------------------------
# (a) The replay through a damaged owner index reads the log itself.
# ----------------------------------------------------------------------
seal_upto(2);    # q: A>B, B>C: in C at position 2
my $snap = $node->safe_psql('postgres', 'SELECT lake.checkpoint()');
is($snap, 2, 'a snapshot of cycle 2: q in C at position 2');
seal_upto(75);    # the first block (cycles 1..64) closes; 65..75 are its tail
my $q_id = $owner_id->('q');
is($node->safe_psql('postgres', "SELECT string_agg(first_cycle::text, ',') FROM lake_data.owner_block WHERE owner_id = $q_id"),
	'1', "q's owner-index entry is the closed block's (cycles 1..64)");
my $want = log_states();
my $q_last = (split /\|/, $want->{q})[2];
cmp_ok($q_last, '>', 80, "q has $q_last landings, all but two past the snapshot");
is_deeply({ map { ($_ => live($_)) } @owners }, $want, 'before any damage, the live states are what the log says');

# q's index entry is damaged (it no longer decodes), and kanban-like abc
# loses C -> A, q's landing 3 (cycle 3, past the snapshot).
$node->safe_psql('postgres', "UPDATE lake_data.owner_block SET entry = '\\x00' WHERE owner_id = $q_id");
my $abc = $node->safe_psql('postgres', "SELECT phases, edges FROM lake_data.lifecycle WHERE name = 'abc'");
$node->safe_psql('postgres',
	"UPDATE lake_data.lifecycle SET phases = '{A,B,C}', edges = '{{A,B},{B,C}}' WHERE name = 'abc'");
ok(restart_recovered($node), 'restart: the worker recovers');
is($node->safe_psql('postgres', 'SELECT recovery_snapshot, recovery_quarantined FROM lake.stats()'),
	"$snap|1", 'recovery started from the snapshot of cycle 2 and quarantined one owner');
{
	my ($phase, $lap, $pos, $q, $reason) =
	  split /\|/, $node->safe_psql('postgres', "SELECT phase, lap, position, quarantined, reason FROM lake.owner_state('q')");
	is("$phase|$lap|$pos|$q", 'C|0|2|t', 'q is quarantined at its prefix: C, lap 0, position 2');
	like($reason, qr/landing 3 moves C -> A/, "the reason names its landing 3 ($reason)");
}
is_deeply({ p1 => live('p1'), p2 => live('p2') }, { p1 => $want->{p1}, p2 => $want->{p2} },
	'p1 and p2, which share q\'s cycles, recover to what the log says');
is($node->safe_psql('postgres', 'SELECT sum(applied), string_agg(owner, \',\') FILTER (WHERE quarantined) FROM lake.recover()'),
	'0|q', 'lake.recover() applies nothing; q stays quarantined');

# The lifecycle back, the release replays q through its damaged index.
my ($phases, $edges) = split /\|/, $abc;
$node->safe_psql('postgres', "UPDATE lake_data.lifecycle SET phases = '$phases', edges = '$edges' WHERE name = 'abc'");
{
	my ($rc, $out, $err) = $node->psql('postgres', "SELECT lake.release_owner('q')");
	is($rc, 0, 'lake.release_owner(q) succeeds with its index entry damaged') or diag($err);
	my $applied = $q_last - 2;
	like($err, qr/owner "q" released at position $q_last \($applied landings applied\)/,
		"it applied the $applied landings after position 2, read from the log itself");
	like($err, qr/WARNING:  the owner index of owner id $q_id is damaged at cycle 1\n.*read from the log itself.*\nHINT:  lake.rebuild_owner_index\(\)/s,
		'and says the index is damaged, once, and what rebuilds it');
	is(() = $err =~ /WARNING:  the owner index/g, 1, 'once for the call');
}
is(live('q'), $want->{q}, "q's live state is what the log says ($want->{q})");
is($node->safe_psql('postgres', "SELECT quarantined, reason IS NULL FROM lake.owner_state('q')"), 'f|t', 'q is live again');
is_deeply({ p1 => live('p1'), p2 => live('p2') }, { p1 => $want->{p1}, p2 => $want->{p2} }, 'p1 and p2 unchanged');
recovers_nothing('after the release');
is($node->safe_psql('postgres', "SELECT count(*) FROM lake_data.owner WHERE name = 'q' AND quarantine_position IS NULL"),
	'1', 'the durable quarantine is cleared');

# q casts on; with the entry still damaged, a restart recovers all three.
seal_upto(78);
$want = log_states();
ok(restart_recovered($node), 'another restart, the entry still damaged');
is_deeply({ map { ($_ => live($_)) } @owners }, $want, 'every live state is what the log says');
recovers_nothing('after that restart');

# A reader is refused; the rebuild puts the entry back.
{
	my ($state, $msg) = sql_error($node, "SELECT count(*) FROM lake.trajectory('q')");
	is($state, 'XX001', 'lake.trajectory(q) is refused while its index entry is damaged');
	like($msg, qr/the owner index of owner id $q_id is damaged at cycle 1/, "... naming the block ($msg)");
}
my $rows = $node->safe_psql('postgres', 'SELECT lake.rebuild_owner_index()');
is($rows, 3, 'lake.rebuild_owner_index() writes the first block\'s three rows');
trajectory_is_log($_, 'after the rebuild') for @owners;

# ----------------------------------------------------------------------
# (b) A damaged owner list is rebuilt from its cycle's landings.
# ----------------------------------------------------------------------
# Cycle 10 is in the middle of q's first block, cycle 64 is its last (and
# the block's): the entry's last position comes from cycle 64's list.
for my $c (10, 64)
{
	is( $node->safe_psql('postgres',
			"SELECT string_agg(owner, ',' ORDER BY seq) FROM lake.log($c - 1) WHERE cycle = $c"),
		'q,p1,q', "cycle $c holds two landings of q around one of p1");
}
my $written = $node->safe_psql('postgres', $index_sql);
$node->safe_psql('postgres', "UPDATE lake_data.cycle SET owners = '\\x00' WHERE cycle IN (10, 64)");
is($node->safe_psql('postgres', 'SELECT lake.rebuild_owner_index()'), $rows,
	'with the owner lists of cycles 10 and 64 damaged, the rebuild writes as many rows');
is($node->safe_psql('postgres', $index_sql), $written, 'and the index it writes is the one the seals wrote');
trajectory_is_log($_, 'after the rebuild over damaged owner lists') for @owners;

# In the open block 65..128: cycle 70 in its middle, cycle 120 the last of
# q and p1 before the block closes (cycles 121..128 hold only p2). The
# reader refuses the damaged lists until the seal that closes the block
# rebuilds them from the landings.
seal_upto(120);
for my $c ([ 70, 'q,p1,q' ], [ 120, 'q,p1,q,p2' ])
{
	is( $node->safe_psql('postgres',
			"SELECT string_agg(owner, ',' ORDER BY seq) FROM lake.log($c->[0] - 1) WHERE cycle = $c->[0]"),
		$c->[1], "cycle $c->[0], in the open block, holds $c->[1]");
}
$node->safe_psql('postgres', "UPDATE lake_data.cycle SET owners = '\\x00' WHERE cycle IN (70, 120)");
{
	my ($state, $msg) = sql_error($node, "SELECT count(*) FROM lake.trajectory('p1')");
	is($state, 'XX001', 'a trajectory through the open block is refused over its damaged owner lists');
	like($msg, qr/is damaged at cycle 70/, "... naming cycle 70 ($msg)");
}
my $offset = -s $node->logfile;
seal_upto(130);    # cycle 128 closes the block 65..128
is( $node->safe_psql('postgres', 'SELECT string_agg(o.name, \',\' ORDER BY o.name) FROM lake_data.owner_block b '
		  . 'JOIN lake_data.owner o ON o.id = b.owner_id WHERE b.first_cycle = 65'),
	'p1,p2,q', 'the seal of cycle 128 closed the block 65..128: one row per owner');
unlike(slurp_file($node->logfile, $offset), qr/could be read for the owner index/,
	'without a warning that an owner list could not be read');
trajectory_is_log($_, 'past the block closed over damaged owner lists') for @owners;
$written = $node->safe_psql('postgres', $index_sql);
is($node->safe_psql('postgres', 'SELECT lake.rebuild_owner_index()'), 6, 'a rebuild writes both blocks');
is($node->safe_psql('postgres', $index_sql), $written, 'as the seals wrote them');
$want = log_states();
is_deeply({ map { ($_ => live($_)) } @owners }, $want, 'the live states are what the log says');

# ----------------------------------------------------------------------
# (c) The writer epoch at its limit.
# ----------------------------------------------------------------------
my $epoch = $node->safe_psql('postgres', 'SELECT epoch FROM lake_data.writer');
$offset = -s $node->logfile;
$node->safe_psql('postgres', 'UPDATE lake_data.writer SET epoch = 2147483647');
$node->stop('immediate');
$node->start;
ok($node->poll_query_until('postgres', "SELECT worker_state = 'recovery failing' FROM lake.stats()"),
	"with the writer epoch at 2147483647, the worker's state is 'recovery failing'");
{
	my ($rc, $out, $err) = $node->psql('postgres', "SELECT lake.cast('p2', NULL, NULL)",
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/ERROR:  55000: /, 'a cast is refused with 55000') or diag($err);
	like($err, qr/DETAIL:  The last recovery failed: the writer epoch cannot advance past 2147483647\./,
		'its detail names the epoch');
}
like(slurp_file($node->logfile, $offset), qr/the writer epoch cannot advance past 2147483647/,
	'the server log has the reason');
is($node->safe_psql('postgres', 'SELECT epoch FROM lake_data.writer'), '2147483647', 'the failed recovery left the row as it was');
$node->safe_psql('postgres', "UPDATE lake_data.writer SET epoch = $epoch");
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' AND epoch > $epoch FROM lake.stats()"),
	'with the row repaired, the worker\'s retry recovers without a restart');
is_deeply({ map { ($_ => live($_)) } @owners }, $want, 'to the states the log says');
is($node->safe_psql('postgres', "SELECT (lake.cast_durable('p2', NULL, NULL)).position"),
	(split /\|/, $want->{p2})[2] + 1, 'casts are accepted and sealed again');
recovers_nothing('after the epoch repair');

$node->stop;
done_testing();
