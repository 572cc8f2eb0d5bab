# Waiting sleeps: a session that waits for admission (SPEC §3) or for a
# receipt to become durable (SPEC §4), and the worker while it is idle or
# while a seal cannot run, sleep on a latch, a condition variable or the
# lock manager; none spins. Each wait here lasts two seconds, and the
# process's CPU time over it (utime + stime of /proc/<pid>/stat, in clock
# ticks of 10 ms) must stay under a tenth of that: a busy loop takes all
# of it.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('waits_sleep',
	conf => "lake.max_concurrent_appends = 1\nlake.admission_queue_wait = '2s'\nlake.cycle_interval = '1h'");
$node->start;

# The worker waiting for the extension (not installed yet) looks once a
# second, a transaction each time: over 2.5 s the served database counts a
# few of its commits (it reports them at most once a second), where a loop
# that looked every millisecond would count thousands.
ok($node->poll_query_until('postgres',
		"SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE backend_type = 'lake worker'"),
	'the worker waits for the extension');
my $commits = $node->safe_psql('postgres', q{
SELECT xact_commit AS c0 FROM pg_stat_database WHERE datname = 'postgres' \gset
SELECT pg_sleep(2.5);
SELECT pg_stat_clear_snapshot();
SELECT xact_commit - :c0 FROM pg_stat_database WHERE datname = 'postgres';});
$commits = (split /\n/, $commits)[-1];
cmp_ok($commits, '<', 50, "the worker waiting for the extension looks once a second ($commits commits in 2.5 s)");

$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_dataset('held');
SELECT lake.create_dataset('waits');
SELECT lake.create_owner('w');
CREATE FUNCTION try_append() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lake.append('waits', 't', 'x', '\x02'::bytea);
    RETURN 'appended';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;});
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the worker serves');
my $worker = $node->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()');

# The CPU ticks of process $pid, as SQL (a superuser reads /proc).
sub ticks_sql
{
	my ($pid) = @_;
	return "(SELECT s[14]::bigint + s[15]::bigint FROM "
	  . "string_to_array(pg_read_file('/proc/$pid/stat'), ' ') s)";
}

# Runs $wait in one session, which reads its own and the worker's CPU ticks
# before and after it; returns (seconds waited, own ticks, worker ticks,
# what the wait printed).
sub measured
{
	my ($wait) = @_;
	my $out = $node->safe_psql('postgres', qq{
CREATE TEMP TABLE t0 AS SELECT clock_timestamp() AS at,
  @{[ ticks_sql('self') ]} AS own, @{[ ticks_sql($worker) ]} AS worker;
$wait
SELECT round(extract(epoch FROM clock_timestamp() - t0.at), 1),
       @{[ ticks_sql('self') ]} - t0.own, @{[ ticks_sql($worker) ]} - t0.worker
FROM t0;});
	my @lines = split /\n/, $out;
	return ((split /\|/, $lines[-1]), join("\n", @lines[0 .. $#lines - 1]));
}

# The worker, idle.
my ($secs, $own, $worker_ticks) = measured('SELECT pg_sleep(2);');
cmp_ok($worker_ticks, '<', 20, "the idle worker sleeps ($worker_ticks ticks in $secs s)");

# An append waiting for admission: the only slot is held by an open
# transaction's append; the wait ends with 53000 at the bound.
my $holder = $node->background_psql('postgres');
$holder->query_safe("BEGIN; SELECT lake.append('held', 't', 'h', '\\x01')");
my $said;
($secs, $own, $worker_ticks, $said) = measured('SELECT try_append();');
is($said, '53000', 'an append waiting for admission is refused at its bound (53000)');
cmp_ok($secs, '>=', 2, "... after waiting for it ($secs s)");
cmp_ok($own, '<', 20, "... asleep ($own ticks)");
$holder->query_safe('ROLLBACK');
is($node->safe_psql('postgres', 'SELECT slots_in_use FROM lake.admission()'), '0', 'the slot is free again');

# A receipt awaited while no seal can run (a session holds lake_data.cycle):
# await_durable returns NULL at its timeout; the waiter sleeps, and so does
# the worker, which cannot seal meanwhile.
my $receipt = $node->safe_psql('postgres', "SELECT lake.cast('w', 'Planning', 'CognitiveWork')");
$holder->query_safe('BEGIN; LOCK TABLE lake_data.cycle IN SHARE MODE');
($secs, $own, $worker_ticks, $said) =
  measured("SELECT lake.await_durable('$receipt'::lake.receipt, 2000) IS NULL AS timed_out;");
is($said, 't', 'await_durable timed out while no seal could run');
cmp_ok($secs, '>=', 2, "... after its timeout ($secs s)");
cmp_ok($own, '<', 20, "... asleep ($own ticks)");
cmp_ok($worker_ticks, '<', 20, "and the worker, which cannot seal meanwhile, sleeps too ($worker_ticks ticks)");
$holder->query_safe('COMMIT');
$holder->quit;
is($node->safe_psql('postgres', "SELECT (lake.await_durable('$receipt'::lake.receipt, 60000)).position"),
	'1', 'once the lock is gone the receipt is sealed');

$node->stop;
done_testing();
