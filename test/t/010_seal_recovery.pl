# Recovery and sealing serialize (issue 10 item 7, and the release race).
# - A lake.seal() in flight (an admin's DO block that has cut the ring and
#   still holds the sealing lock) when the worker restarts: the new
#   worker's recovery waits for the sealing lock before it resets the ring
#   and the owners, and reads with a snapshot taken after it. The sealed
#   cycle is replayed: no negative casts_pending, the owner's position is
#   its landings, and casts go on.
# - A quarantined owner released (lake.release_owner) while the worker's
#   re-recovery, started by the very lifecycle fix that makes the release
#   possible, runs at the same moment: whichever goes first, the owner ends
#   released, at its whole log, in the live state and durably.
# - The seal of what is pending before a recovery fails: the recovery waits
#   for it instead of emptying the ring of acknowledged casts.
# - A cast held (outside the cycle lock) through a whole recovery finds its
#   owner's entry anew.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('sealrace', conf => "lake.cycle_interval = '1h'\n");
$node->start;
$node->safe_psql('postgres', "CREATE EXTENSION lake; SELECT lake.create_owner('w');");

sub worker_pid
{
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'lake worker'");
}

# --- a seal in flight across a worker restart --------------------------------
my @moves = (['Planning', 'CognitiveWork'], ['CognitiveWork', 'Evaluation'],
	['Evaluation', 'Commit'], ['Commit', 'Planning'], ['Planning', 'CognitiveWork']);
$node->safe_psql('postgres',
	join("\n", map { "SELECT lake.cast('w', '$_->[0]', '$_->[1]', '\\x01'::bytea);" } @moves));
is($node->safe_psql('postgres', 'SELECT casts_pending FROM lake.stats()'),
	'5', 'five casts are pending');

my $gate = $node->background_psql('postgres');
$gate->query_safe('SELECT pg_advisory_lock(7001)');
my $admin = $node->background_psql('postgres', on_error_stop => 0);
my $admin_pid = $admin->query_safe('SELECT pg_backend_pid()');
$admin->query_until(qr/sealing/,
	"\\echo sealing\nDO \$\$ BEGIN PERFORM lake.seal(); PERFORM pg_advisory_lock(7001); END \$\$;\n\\echo sealed\n");
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_locks WHERE pid = $admin_pid AND locktype = 'advisory' AND NOT granted"),
	'the admin has sealed and holds the sealing lock, waiting on the gate');
is($node->safe_psql('postgres', 'SELECT casts_pending FROM lake.stats()'),
	'5', 'the cut casts stay pending until the seal commits');

# The worker waits at most lock_timeout (500 ms) for a lock and retries
# every second: its seal of what is pending, then its recovery, each give
# up at least once while the admin holds on.
my $old = worker_pid();
my $old_epoch = epoch();
my $log_off = -s $node->logfile;
$node->safe_psql('postgres', "SELECT pg_terminate_backend($old)");
ok(lock_timeouts_logged($node, $log_off, 3), 'the new worker gave up waiting for the sealing lock three times');
is($node->safe_psql('postgres', "SELECT count(*) FROM lake_data.cycle"),
	'0', 'nothing is sealed yet (the admin has not committed)');

$gate->query_safe('SELECT pg_advisory_unlock(7001)');
$admin->query_until(qr/sealed/, '');
ok( $node->poll_query_until('postgres',
		"SELECT worker_state = 'serving' AND worker_pid <> $old AND epoch > $old_epoch FROM lake.stats()"),
	'the new worker has recovered');
is( $node->safe_psql('postgres',
		"SELECT casts_pending, (SELECT count(*) FROM lake.trajectory('w')) FROM lake.stats()"),
	'0|5', 'no pending casts are left over, and the five landings are in the log');
is( $node->safe_psql('postgres', "SELECT phase, position, pending, quarantined FROM lake.owner_state('w')"),
	'CognitiveWork|5|0|f', 'the owner is at its fifth landing');
is( $node->safe_psql('postgres',
		"SELECT (lake.cast_durable('w', 'CognitiveWork', 'Evaluation')).position"),
	'6', 'casts go on at the next position');
$admin->quit;
# Had the admin's seal failed, its cut casts would have gone back to the
# ring and been sealed by the new worker: the figures above cannot tell.
is($admin->{stderr}, '', "the admin's seal committed: its session saw no error");
$gate->quit;

# --- release racing the re-recovery its fix starts ---------------------------
$node->safe_psql('postgres', q{
	SELECT lake.define_lifecycle('lq', 'A', '{{A,B},{B,A}}');
	SELECT lake.create_owner('q', 'lq');
	SELECT lake.cast_durable('q', 'A', 'B');
	SELECT lake.cast_durable('q', 'B', 'A');
});
sub epoch { return $node->safe_psql('postgres', 'SELECT epoch FROM lake.stats()'); }

# Waits until the worker has recovered again since epoch $e.
sub recovered_since
{
	my ($e, $what) = @_;
	ok( $node->poll_query_until('postgres',
			"SELECT epoch > $e AND worker_state = 'serving' FROM lake.stats()"),
		$what);
}

# The owner q is in the live state and durably what the edit of lq allows.
sub q_is
{
	my ($expected, $what) = @_;
	is( $node->safe_psql('postgres',
			"SELECT s.phase, s.position, s.quarantined, o.quarantine_position IS NULL "
			  . "FROM lake.owner_state('q') s, lake_data.owner o WHERE o.name = 'q'"),
		$expected, $what);
}

for my $round (1 .. 5)
{
	my $e = epoch();
	$node->safe_psql('postgres', "UPDATE lake_data.lifecycle SET edges = '{{A,B}}' WHERE name = 'lq'");
	recovered_since($e, "round $round: the worker re-recovered after the edge was removed");
	q_is('B|1|t|f', "round $round: the owner is quarantined at its prefix, durably");

	$e = epoch();
	my ($ret, $out, $err) = $node->psql('postgres',
		"UPDATE lake_data.lifecycle SET edges = '{{A,B},{B,A}}' WHERE name = 'lq';\n"
		  . "SELECT lake.release_owner('q');");
	is($ret, 0, "round $round: the release succeeded") or diag($err);
	recovered_since($e, "round $round: the worker's re-recovery after the fix is done");
	q_is('A|2|f|t', "round $round: released in the live state and durably, at its whole log");
	# A release writes a snapshot, which would hold both landings: the
	# next round's edit must find the move it removes in the replayed tail.
	$node->safe_psql('postgres', 'DELETE FROM lake_data.snapshot');
}

# Deterministic: the release holds the sealing lock, uncommitted, when a
# re-recovery starts (a new worker lifetime; a lifecycle edit would itself
# wait for the lock, as an edit takes it to its commit) and waits for the
# lock; the release commits while it waits. The recovery must read the
# registry after the lock is granted, so it sees the release.
$node->safe_psql('postgres', "UPDATE lake_data.lifecycle SET edges = '{{A,B}}' WHERE name = 'lq'");
ok($node->poll_query_until('postgres', "SELECT quarantined FROM lake.owner_state('q')"),
	'held release: the owner is quarantined again');
my $e = epoch();
$node->safe_psql('postgres', "UPDATE lake_data.lifecycle SET edges = '{{A,B},{B,A}}' WHERE name = 'lq'");
recovered_since($e, 'held release: the worker re-recovered after the fix');
q_is('B|1|t|f', 'held release: the fix alone does not release the owner');

$gate = $node->background_psql('postgres');
$gate->query_safe('SELECT pg_advisory_lock(7002)');
$admin = $node->background_psql('postgres', on_error_stop => 0);
$admin_pid = $admin->query_safe('SELECT pg_backend_pid()');
$admin->query_until(qr/releasing/,
	"\\echo releasing\nDO \$\$ BEGIN PERFORM lake.release_owner('q'); PERFORM pg_advisory_lock(7002); END \$\$;\n\\echo released\n");
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_locks WHERE pid = $admin_pid AND locktype = 'advisory' AND NOT granted"),
	'held release: released, uncommitted, holding the sealing lock');
$e = epoch();
my $wpid = $node->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($wpid)");
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
		  . "WHERE a.backend_type = 'lake worker' AND NOT l.granted"),
	'held release: the re-recovery waits for the sealing lock');
$gate->query_safe('SELECT pg_advisory_unlock(7002)');
$admin->query_until(qr/released/, '');
unlike($admin->{stderr}, qr/ERROR/, 'held release: the release commits without an error');
like($admin->{stderr}, qr/NOTICE:  owner "q" released at position 2/, '... and says so');
recovered_since($e, 'held release: the re-recovery is done');
q_is('A|2|f|t', 'held release: released in the live state and durably, at its whole log');
$admin->quit;
$gate->quit;

# --- a seal before recovery that fails keeps what is pending -----------------
# A lifecycle edit makes the worker seal what is pending, then recover. A
# lock on lake_data.cycle holds that seal's insert past the worker's
# lock_timeout (the sealing lock itself is free): recovering then would
# empty the ring of casts already acknowledged. The worker puts the
# recovery off until the seal goes through: every receipt is sealed, none
# answers LK006.
my @receipts = map {
	$node->safe_psql('postgres', "SELECT lake.cast('w', NULL, NULL, '\\x1$_'::bytea)")
} 1 .. 3;
is($node->safe_psql('postgres', 'SELECT casts_pending FROM lake.stats()'),
	'3', 'held drain: three casts are pending');
my $locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN; LOCK TABLE lake_data.cycle IN ACCESS EXCLUSIVE MODE');
$log_off = -s $node->logfile;
$e = epoch();
$node->safe_psql('postgres', "UPDATE lake_data.lifecycle SET edges = edges WHERE name = 'kanban'");
ok(lock_timeouts_logged($node, $log_off, 2), 'held drain: the worker\'s seal before recovery gave up twice');
is($node->safe_psql('postgres', 'SELECT casts_pending FROM lake.stats()'),
	'3', 'held drain: the three casts are still pending');
$locker->query_safe('COMMIT');
recovered_since($e, 'held drain: the worker recovered once the lock was gone');
is( $node->safe_psql('postgres',
		join(' UNION ALL ', map { "SELECT (lake.await_durable('$_'::lake.receipt, 10000)).cycle IS NOT NULL" } @receipts)),
	"t\nt\nt", 'held drain: every receipt has its coordinate');
is($node->safe_psql('postgres', "SELECT count(*) FROM lake.trajectory('w') WHERE payload IN ('\\x11', '\\x12', '\\x13')"),
	'3', 'held drain: the three landings are in the log');
$locker->quit;

# --- a cast that waited through a whole recovery -----------------------------
# An idempotent cast looks its operation up in the sealed history before
# it takes the cycle lock; held there (a lock on lake_data.cast_operation),
# it outlives a recovery, which empties the owner table and fills it again
# (the entries land elsewhere). The cast must find its owner anew, not
# write through the entry it held: it lands on x1, at x1's next position.
$node->safe_psql('postgres',
	join("\n", map { "SELECT lake.create_owner('x$_'); SELECT lake.cast_durable('x$_', NULL, NULL);" } 1 .. 20));
$locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN; LOCK TABLE lake_data.cast_operation IN ACCESS EXCLUSIVE MODE');
my $caster = $node->background_psql('postgres', on_error_stop => 0);
my $caster_pid = $caster->query_safe('SELECT pg_backend_pid()');
$caster->query_until(qr/begin_cast/,
	"\\echo begin_cast\nSELECT (lake.cast_durable('x1', NULL, NULL, '\\x99'::bytea, operation_id => 'stale')).position;\n\\echo end_cast\n");
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_locks WHERE pid = $caster_pid AND relation = 'lake_data.cast_operation'::regclass AND NOT granted"),
	'stale entry: the cast waits in its look-up of the sealed history');
$e = epoch();
$node->safe_psql('postgres', "UPDATE lake_data.lifecycle SET edges = edges WHERE name = 'kanban'");
recovered_since($e, 'stale entry: the worker recovered meanwhile');
$locker->query_safe('COMMIT');
like($caster->query_until(qr/end_cast/, ''), qr/^2\b/m, 'stale entry: the cast is x1\'s second landing');
is( $node->safe_psql('postgres',
		"SELECT string_agg(o || ':' || n, ',' ORDER BY o) FROM (SELECT o, count(*) n FROM unnest(ARRAY(SELECT 'x' || g FROM generate_series(1, 20) g)) o, lake.trajectory(o) GROUP BY o) t WHERE n <> 1"),
	'x1:2', 'stale entry: only x1 has a second landing');
is($node->safe_psql('postgres', "SELECT position, payload FROM lake.trajectory('x1', 1)"),
	'2|\\x99', 'stale entry: it is the cast\'s payload');
$caster->quit;
$locker->quit;

$node->stop;
done_testing();
