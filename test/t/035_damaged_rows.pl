# Damage outside the checksummed records (SPEC §5: a damaged record is
# XX001 or a quarantine, never a crash or different data).
# - A tuple header that lost a bit of its column count reads the trailing
#   columns as NULL. Read from a cycle row, that crashed the worker's
#   recovery, and the server restarted it in a loop; from a version row,
#   lake.read crashed its backend. Now the cycle's owner is quarantined and
#   the read is XX001.
# - A cycle record or the newest snapshot whose TOAST rows are damaged made
#   the whole recovery fail, every second, with every owner unavailable.
#   Now the cycle's owners are quarantined, and the snapshot is passed over
#   for the whole log, as a flipped bit in either already was.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('damaged', conf => "lake.checkpoint_cycles = 1000000\n");
$node->start;

sub psql { return $node->safe_psql('postgres', $_[0]); }

my $serving = "SELECT worker_state = 'serving' FROM lake.stats()";

# Stops the server, runs 'edit' on its files, starts it: returns where the
# server log stood before the start.
sub damaged_restart
{
	my ($edit) = @_;
	psql('CHECKPOINT');
	$node->stop;
	$edit->();
	my $from = -s $node->logfile;
	$node->start;
	return $from;
}

# The file of a table's TOAST relation, which must hold a value.
sub toast_file
{
	my ($table) = @_;
	my $of = "FROM pg_class WHERE oid = '$table'::regclass";
	is(psql("SELECT pg_relation_size(reltoastrelid) > 0 $of"), 't', "$table stores a value out of line");
	return $node->data_dir . '/' . psql("SELECT pg_relation_filepath(reltoastrelid) $of");
}

sub state_of
{
	my ($o) = @_;
	return psql("SELECT coalesce(quarantine_reason, 'live') FROM lake_data.owner WHERE name = '$o'");
}

psql('CREATE EXTENSION lake; CREATE EXTENSION pageinspect');
psql("SELECT lake.create_owner('a'), lake.create_owner('b'), lake.create_dataset('k')");
psql("SELECT lake.cast_durable('a', 'Planning', 'CognitiveWork', '\\x01')");
psql("SELECT lake.cast_durable('b', 'Planning', 'CognitiveWork', '\\x02')");
psql("SELECT lake.append('k', 't', 'op', '\\x0102'::bytea)");
my $cycle_a = psql("SELECT cycle FROM lake.trajectory('a')");

# 1. Column counts: the cycle row's 14 to 12 (data and encoding read as
# NULL), the version row's 7 to 6 (its digest).
my ($cfile, $coff) = tuple_at($node, 'lake_data.cycle', "cycle = $cycle_a");
my ($vfile, $voff) = tuple_at($node, 'lake_data.version', "operation_id = 'op'");
my $log_from = damaged_restart(sub { poke($cfile, $coff + 18, chr(12)); poke($vfile, $voff + 18, chr(6)); });
ok($node->poll_query_until('postgres', $serving), 'the worker recovers over a cycle row that reads NULL columns');
like(state_of('a'), qr/cycle $cycle_a is damaged: its record reads as NULL/,
	'the owner with a landing in it is quarantined');
is(state_of('b'), 'live', 'the other owner is not');
is(psql("SELECT phase || '/' || position FROM lake.owner_state('b')"), 'CognitiveWork/1',
	'and has its landing');
my ($state, $msg) = sql_error($node, "SELECT lake.read('k', 1)");
is("$state $msg", 'XX001 a row of lake_data.version is damaged',
	'a read of a version row that reads a NULL digest is XX001');
unlike(slurp_file($node->logfile, $log_from), qr/terminated by signal/, 'no process crashed');

# 2. A cycle record stored out of line (an incompressible 16 kB payload),
# its first TOAST page gone.
psql("SELECT lake.create_owner('t1'), lake.create_owner('t2')");
psql("SELECT lake.cast_durable('t1', 'Planning', 'CognitiveWork', "
	  . "(SELECT decode(string_agg(md5(i::text), ''), 'hex') FROM generate_series(1, 1000) i))");
psql("SELECT lake.cast_durable('t2', 'Planning', 'CognitiveWork')");
my $cycle_t1 = psql("SELECT cycle FROM lake.trajectory('t1')");
my $ctoast = toast_file('lake_data.cycle');
damaged_restart(sub { poke($ctoast, 0, "\0" x 8192); });
ok($node->poll_query_until('postgres', $serving), 'the worker recovers over a cycle record whose TOAST rows are gone');
like(state_of('t1'), qr/cycle $cycle_t1 is damaged: its stored bytes are unreadable/,
	'its owner is quarantined, the reason named');
is(state_of('t2'), 'live', 'an owner of another cycle is not');
is(psql("SELECT phase || '/' || position FROM lake.owner_state('t2')"), 'CognitiveWork/1',
	'and has its landing');
($state) = sql_error($node, "SELECT count(*) FROM lake.log(0)");
is($state, 'XX001', 'a read of the log through it is XX001');

# 3. The newest snapshot, stored out of line (3,000 owners), its first
# TOAST page gone: the whole log is replayed instead.
psql("SELECT count(lake.create_owner('n' || i)) FROM generate_series(1, 3000) i");
psql("SELECT count(lake.cast('n' || i, 'Planning', 'CognitiveWork')) FROM generate_series(1, 3000) i");
psql('SELECT lake.seal()');
my $snap = psql('SELECT lake.checkpoint()');
my $stoast = toast_file('lake_data.snapshot');
my $want = psql("SELECT string_agg(s.phase || s.position, ',' ORDER BY i) FROM generate_series(1, 3000) i, "
	  . "lake.owner_state('n' || i) s");
$log_from = damaged_restart(sub { poke($stoast, 0, "\0" x 8192); });
ok($node->poll_query_until('postgres', $serving), 'the worker recovers over a snapshot whose TOAST rows are gone');
like(slurp_file($node->logfile, $log_from),
	qr/the snapshot of cycle $snap is damaged; replaying the whole log/, 'replaying the whole log');
is( psql("SELECT string_agg(s.phase || s.position, ',' ORDER BY i) FROM generate_series(1, 3000) i, "
		  . "lake.owner_state('n' || i) s"),
	$want, 'every owner recovered from the log');
is(psql('SELECT recovery_snapshot FROM lake.stats()'), '0', 'from no snapshot');

# 4. A cycle row overwritten with the row before it, key kept: its owner
# list named the other cycle's owners and was believed, so the owner whose
# landing was lost came back live, short of it. The list is bound to its
# cycle now: damaged too, so recovery cannot know whose landings the cycle
# held, and quarantines every owner.
psql("SELECT lake.create_owner('r1'), lake.create_owner('r2')");
my $c1 = psql("SELECT (lake.cast_durable('r1', 'Planning', 'CognitiveWork', '\x11')).cycle");
my $c2 = psql("SELECT (lake.cast_durable('r2', 'Planning', 'CognitiveWork', '\x22')).cycle");
is($c2, $c1 + 1, 'two cycles in a row');
psql("UPDATE lake_data.cycle t SET epoch = s.epoch, first_seq = s.first_seq, last_seq = s.last_seq, "
	  . "casts = s.casts, bytes = s.bytes, stored_bytes = s.stored_bytes, sealed_at = s.sealed_at, "
	  . "lsn = s.lsn, owners = s.owners, data = s.data "
	  . "FROM lake_data.cycle s WHERE s.cycle = $c1 AND t.cycle = $c2");
$log_from = -s $node->logfile;
restart_recovered($node) or die 'the worker did not recover';
like(state_of('r2'), qr/^cycle $c2 is damaged, and so is its owner list/,
	'the owner whose landing it held is quarantined');
like(slurp_file($node->logfile, $log_from),
	qr/WARNING:  lake recovery: cycle $c2 is damaged\n.*DETAIL:  .*; so is its owner list/,
	'the damaged cycle is in the log');

# 5. The newest cycle row's index state altered (indexed_through 64 to
# 0): the next seal closed a block over every cycle again and collided with
# the index's rows (23505), every seal after it too, and nothing became
# durable. It is derived again from the row before, with a WARNING.
psql("SELECT count(lake.create_owner('x' || i)) FROM generate_series(1, 70) i");
psql(join("\n", map { "SELECT lake.cast_durable('x$_', 'Planning', 'CognitiveWork');" } 1 .. 70));
my $head = psql('SELECT max(cycle) FROM lake_data.cycle');
my $index = psql("SELECT indexed_through || '/' || tail_owners FROM lake_data.cycle WHERE cycle = $head");
like($index, qr{^[1-9]\d*/[1-9]\d*$}, "a block closed before the head ($index)");
psql("UPDATE lake_data.cycle SET indexed_through = 0 WHERE cycle = $head");
$log_from = -s $node->logfile;
psql("SELECT lake.create_owner('y')");
is( psql("SET statement_timeout = '60s'; "
		  . "SELECT (lake.cast_durable('y', 'Planning', 'CognitiveWork')).cycle"),
	$head + 1, 'the next seal goes on');
my ($it, $tail) = split m{/}, $index;
is(psql("SELECT indexed_through || '/' || tail_owners FROM lake_data.cycle WHERE cycle = $head + 1"),
	"$it/" . ($tail + 1), 'from the state the head had');
like(slurp_file($node->logfile, $log_from),
	qr/the owner index state in the row of the sealed head, cycle $head, is damaged/, 'said in the log');
is(psql("SELECT count(*) FROM generate_series(1, 70) i, lake.trajectory('x' || i)"), '70',
	'every trajectory reads through the index');

# 6. A version row's operation id altered in the heap ('x' to 'y', one
# bit), its index entry kept: the operation's look-up took the row for
# another operation under the same key, said the operation had no version,
# and wrote it again. A row under an operation's key that does not hash to
# it is damaged.
psql("SELECT lake.create_dataset('h')");
psql("SELECT lake.append('h', 'acme', 'op-x1', '\\x01'::bytea)");
my ($hfile, $hoff) = tuple_at($node, 'lake_data.version', "operation_id = 'op-x1'");
damaged_restart(
	sub {
		open(my $fh, '<', $hfile) or die "open $hfile: $!";
		binmode $fh;
		seek($fh, $hoff, 0) or die;
		read($fh, my $tuple, 8192 - $hoff % 8192) or die;
		close $fh;
		my $at = index($tuple, 'op-x1');
		die 'operation id not found in the tuple' if $at < 0;
		poke($hfile, $hoff + $at + 3, 'y');
	});
($state, $msg) = sql_error($node, "SELECT lake.append('h', 'acme', 'op-x1', '\\x01'::bytea)");
like("$state $msg", qr/^XX001 version 1 of dataset \d+ is damaged$/,
	'a retry of the operation is XX001');
is(psql("SELECT count(*) FROM lake_data.version v JOIN lake_data.dataset d ON d.id = v.dataset_id WHERE d.name = 'h'"),
	'1', 'and writes no second version');

# 7. A compression dictionary (stored out of line) whose TOAST rows are
# gone: a read of a version compressed with it was PostgreSQL's own XX001;
# it is the version's lineage, LK005 naming the dictionary, as damaged
# dictionary bytes already were.
psql(q{CREATE FUNCTION dj(n int) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
  SELECT convert_to(format('{"op":"op-%s","event":"order.updated","order":%s,"trace":"%s"}',
                           n, n * 7919 % 1000000, md5(n::text)), 'UTF8') $$});
psql("SELECT lake.create_dataset('dj')");
psql("SELECT count(lake.append('dj', 't', 'op-' || n, dj(n))) FROM generate_series(1, 200) n");
my $dict = psql("SELECT lake.train_dictionary('dj')");
my $dv = psql("SELECT lake.append('dj', 't', 'op-201', dj(201))");
my $dtoast = toast_file('lake_data.dictionary');
damaged_restart(sub { poke($dtoast, 0, "\0" x 8192); });
($state, $msg) = sql_error($node, "SELECT lake.read('dj', $dv)");
is("$state $msg", "LK005 version $dv of dataset \"dj\" is incomplete",
	'a read of a version compressed with it is LK005');
my ($ret, $out, $err) = $node->psql('postgres', "SELECT lake.read('dj', $dv)");
like($err, qr/DETAIL:  .*compression dictionary $dict is unreadable/, '... naming the dictionary');

# 8. A stage row's operation id altered in the heap ('x' to 'y' in every
# version of the row), its unique key kept: the commit recorded the
# version under the other operation, and the upload's own operation could
# then be appended again. The row must still be found by its key.
psql("SELECT lake.create_dataset('sg')");
my $sg = psql("SELECT lake.begin_append('sg', 'acme', 'up-x1')");
psql("SELECT lake.append_chunk($sg, 0, '\\x0a0b'::bytea)");
my $sfile = $node->data_dir . '/' . psql("SELECT pg_relation_filepath('lake_data.stage')");
damaged_restart(
	sub {
		open(my $fh, '<', $sfile) or die "open $sfile: $!";
		binmode $fh;
		local $/;
		my $heap = <$fh>;
		close $fh;
		my $n = 0;
		while ($heap =~ /up-x1/g) { poke($sfile, pos($heap) - 2, 'y'); $n++; }
		die 'operation id not found in lake_data.stage' if $n == 0;
	});
# Resuming it, sending a chunk or committing it rewrote the row, indexed
# under the damaged id; each is XX001 now, and the stage can be aborted.
for my $call ("SELECT lake.begin_append('sg', 'acme', 'up-x1')",
	"SELECT lake.append_chunk($sg, 1, '\\x0c'::bytea)",
	"SELECT lake.commit_append($sg)")
{
	($state, $msg) = sql_error($node, $call);
	is("$state $msg", "XX001 stage $sg is damaged", "$call is XX001");
}
is(psql("SELECT count(*) FROM lake_data.version v JOIN lake_data.dataset d ON d.id = v.dataset_id WHERE d.name = 'sg'"),
	'0', 'and no version is recorded');
psql("SELECT lake.abort_append($sg)");
is(psql("SELECT lake.append('sg', 'acme', 'up-x1', '\\x0a0b'::bytea)"), '1',
	'aborted, its operation appends once');

# 9. A chunk row whose column count lost a bit (its data reads NULL): a
# re-sent chunk compared with it crashed the backend (a statement's row,
# read through SPI). Every NOT NULL column read that way is XX001.
my $sc = psql("SELECT lake.begin_append('sg', 'acme', 'up-z')");
psql("SELECT lake.append_chunk($sc, 0, '\\x0c0d'::bytea)");
my ($kfile, $koff) = tuple_at($node, 'lake_data.chunk', "blob = $sc AND chunk_no = 0");
$log_from = damaged_restart(sub { poke($kfile, $koff + 18, chr(3)); });
($state, $msg) = sql_error($node, "SELECT lake.append_chunk($sc, 0, '\\x0c0d'::bytea)");
is("$state $msg", 'XX001 a row of lake\'s tables is damaged', 'a re-sent chunk over it is XX001');
unlike(slurp_file($node->logfile, $log_from), qr/terminated by signal/, 'no process crashed');

# 10. One of lake's own columns dropped by hand (the last of
# lake_data.version, its digest): rows written since read it as NULL, and a
# read crashed the backend. A table without one of lake's columns is
# refused, naming it (55000, as the tables of an earlier build are).
psql('ALTER TABLE lake_data.version DROP COLUMN digest');
psql('UPDATE lake_data.version SET committed_at = committed_at');
($state, $msg) = sql_error($node, "SELECT lake.read('k', 1)");
is("$state $msg", '55000 lake_data.version lacks column "digest" (bytea), which this build of lake needs',
	'a read is refused');

$node->stop;

# 11. A NOT NULL constraint dropped by hand, then a NULL stored in the
# newest snapshot's data: the worker's recovery read it and crashed, and
# the server restarted it every few seconds. A table that lost one of
# lake's NOT NULL constraints is refused as altered (XX001, naming the
# column): here the snapshot is passed over, as a damaged one is, and the
# owners are recovered from the whole log. (A node of its own: the one
# above has damaged cycles on purpose.)
my $nn = lake_node('not_null', conf => "lake.checkpoint_cycles = 1000000\n");
$nn->start;
$nn->safe_psql('postgres', "CREATE EXTENSION lake; SELECT lake.create_owner('nn1')");
$nn->safe_psql('postgres', "SELECT lake.cast_durable('nn1', 'Planning', 'CognitiveWork')");
$nn->safe_psql('postgres', 'SELECT lake.checkpoint()');
$nn->safe_psql('postgres', 'ALTER TABLE lake_data.snapshot ALTER COLUMN data DROP NOT NULL');
$nn->safe_psql('postgres', 'UPDATE lake_data.snapshot SET data = NULL');
$log_from = -s $nn->logfile;
$nn->restart;
ok($nn->poll_query_until('postgres', $serving), 'the worker recovers over a snapshot table without its NOT NULL');
like(slurp_file($nn->logfile, $log_from), qr/lost the NOT NULL constraint lake made it with/,
	'the log names the lost constraint');
is($nn->safe_psql('postgres', "SELECT phase || position FROM lake.owner_state('nn1')"), 'CognitiveWork1',
	'the owner is recovered from the whole log');
unlike(slurp_file($nn->logfile, $log_from), qr/terminated by signal/, 'no process crashed');
$nn->safe_psql('postgres', 'DELETE FROM lake_data.snapshot WHERE data IS NULL');
$nn->safe_psql('postgres', 'ALTER TABLE lake_data.snapshot ALTER COLUMN data SET NOT NULL');
like($nn->safe_psql('postgres', 'SELECT lake.checkpoint()'), qr/^\d+$/, 'the constraint back, a checkpoint is taken');
$nn->stop;
done_testing();
