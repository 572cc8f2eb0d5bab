# The lake background worker (SPEC §6): visible in pg_stat_activity,
# waits (and says so once) until the extension exists, serves once it does,
# leaves quickly on SIGTERM and comes back, comes back after a crash
# restart, reloads on SIGHUP, and runs only on a primary: not on a
# streaming standby, and from the moment the standby is promoted.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes;
use LakeTAP;

my $node = lake_node('worker', conf => 'restart_after_crash = on');

# The log file may hold earlier runs: read only what this run writes.
my $log0 = -e $node->logfile ? -s $node->logfile : 0;
sub this_log { return slurp_file($node->logfile, $log0); }
$node->start;

# Before CREATE EXTENSION there is no lake.stats() in database postgres. A
# probe database gets a function bound to the same C entry point, declared
# as the install script declares lake.stats() (the library refuses another
# width): it reads the same shared memory, and installs nothing in the
# served database.
$node->safe_psql('postgres', 'CREATE DATABASE probe');
$node->safe_psql(
	'probe', q{
CREATE FUNCTION worker_stats(
    OUT database text, OUT worker_pid int, OUT worker_state text,
    OUT worker_started_at timestamptz, OUT worker_starts bigint,
    OUT config_reloads bigint, OUT stages_open bigint, OUT stages_expired bigint,
    OUT stage_chunks_expired bigint, OUT epoch int, OUT cycles_sealed bigint,
    OUT casts_sealed bigint, OUT casts_pending bigint, OUT mean_casts_per_cycle float8,
    OUT last_seal_ms float8, OUT sealed_cycle bigint, OUT recovery_owners bigint,
    OUT recovery_applied bigint, OUT recovery_quarantined bigint,
    OUT recovery_ms float8, OUT recovery_tail bigint, OUT recovery_snapshot bigint,
    OUT last_snapshot bigint, OUT sessions_waiting bigint)
    AS 'lake', 'lake_stats' LANGUAGE C;
});

sub probe
{
	my ($cols) = @_;
	return $node->safe_psql('probe', "SELECT $cols FROM worker_stats()");
}

sub waiting_lines
{
	my @n = this_log() =~
	  /LOG:\s+lake worker waiting: extension "lake" is not installed in database "postgres"/g;
	return scalar @n;
}

# --- before the extension exists: connected, waiting, said so once --------
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'lake worker' AND datname = 'postgres'",
		'1'),
	'one lake worker in pg_stat_activity, connected to lake.database (postgres)');
ok( eval {
		$node->wait_for_log(
			qr/LOG:\s+lake worker waiting: extension "lake" is not installed in database "postgres"/,
			$log0);
		1;
	},
	'the worker logs that it waits for the extension');
my $pid = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'lake worker'");
is(probe('worker_pid, worker_state, database'),
	"$pid|waiting for extension|postgres",
	'lake.stats() shows the worker waiting for the extension');
ok( $node->poll_query_until(
		'postgres',
		"SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $pid"),
	'the waiting worker sleeps on its latch');

# Each SIGHUP wakes the worker for one more pass of its loop; after three
# passes it still has said "waiting" only once.
my $reloads = probe('config_reloads');
for my $i (1 .. 3)
{
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	$node->poll_query_until('probe',
		'SELECT config_reloads FROM worker_stats()', $reloads + $i)
	  or die "the worker did not process reload $i";
}
is(waiting_lines(), 1, 'after three more passes the worker has logged "waiting" once');
is(probe('worker_pid, worker_state'), "$pid|waiting for extension",
	'the same worker is still waiting');

# --- CREATE EXTENSION: the worker starts serving ---------------------------
$node->safe_psql('postgres', 'CREATE EXTENSION lake');
ok($node->poll_query_until('postgres', 'SELECT worker_state FROM lake.stats()', 'serving'),
	'after CREATE EXTENSION the worker is serving');
is($node->safe_psql('postgres', 'SELECT worker_pid, database, worker_starts FROM lake.stats()'),
	"$pid|postgres|1", 'the same worker, first start, serving postgres');
like(this_log(), qr/LOG:\s+lake worker serving database "postgres"/,
	'the worker logs that it serves postgres');

# --- SIGHUP: config_reloads counts reloads ---------------------------------
$reloads = $node->safe_psql('postgres', 'SELECT config_reloads FROM lake.stats()');
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
ok( $node->poll_query_until('postgres',
		'SELECT config_reloads FROM lake.stats()', $reloads + 1),
	'SIGHUP (pg_reload_conf) increments lake.stats().config_reloads by one');

# A reload applies lake.cycle_interval to the cycle already open: a cast
# accepted under an interval of an hour is sealed soon after the interval
# is lowered, not an hour later.
sub reload_with
{
	my ($setting) = @_;
	my $before = $node->safe_psql('postgres', 'SELECT config_reloads FROM lake.stats()');
	$node->safe_psql('postgres', "ALTER SYSTEM SET $setting");
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	$node->poll_query_until('postgres',
		"SELECT config_reloads > $before FROM lake.stats()")
	  or die "the worker did not reload $setting";
}
reload_with("lake.cycle_interval = '1h'");
$node->safe_psql('postgres',
	"SELECT lake.create_owner('interval'); SELECT lake.cast('interval', 'Planning', 'CognitiveWork')");
is($node->safe_psql('postgres', "SELECT pending FROM lake.owner_state('interval')"),
	'1', 'under an interval of an hour the cast waits in the open cycle');
reload_with("lake.cycle_interval = '10ms'");
ok( $node->poll_query_until('postgres',
		"SELECT pending = 0 AND position = 1 FROM lake.owner_state('interval')"),
	'after the interval is lowered by a reload, the open cycle is sealed');
# SPEC §6: lake.stats() reports how long the last seal and the recovery took.
is($node->safe_psql('postgres', 'SELECT last_seal_ms > 0 AND recovery_ms > 0 FROM lake.stats()'),
	't', 'lake.stats() reports the last seal\'s and the recovery\'s durations');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET lake.cycle_interval');
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');

# The worker reports its table statistics as it goes, as a backend does
# between transactions: pg_stat_user_tables and autovacuum see the rows its
# seals insert (and its snapshots delete) while it runs, not only once it
# exits. It once kept them pending for its whole life.
sub cycle_inserts
{
	return $node->safe_psql('postgres',
		"SELECT n_tup_ins FROM pg_stat_user_tables WHERE relid = 'lake_data.cycle'::regclass");
}
my $serving_pid = $node->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()');
my $inserts = cycle_inserts();
$node->safe_psql('postgres', "SELECT lake.cast_durable('interval', 'CognitiveWork', 'Evaluation')");
ok( $node->poll_query_until('postgres',
		"SELECT n_tup_ins > $inserts FROM pg_stat_user_tables WHERE relid = 'lake_data.cycle'::regclass"),
	"a seal's row shows in pg_stat_user_tables while the worker runs");
is($node->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()'),
	$serving_pid, '... and the worker that sealed it is the one still serving');

# The new worker after $old is gone: serving, another pid, in
# pg_stat_activity. Returns its pid.
sub new_worker
{
	my ($what, $old) = @_;
	ok( $node->poll_query_until(
			'postgres',
			"SELECT s.worker_state = 'serving' AND s.worker_pid <> $old AND a.pid IS NOT NULL "
			  . "FROM lake.stats() s LEFT JOIN pg_stat_activity a "
			  . "  ON a.pid = s.worker_pid AND a.backend_type = 'lake worker'"),
		"$what: a new worker (not $old) serves and shows in pg_stat_activity");
	return $node->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()');
}

# --- SIGTERM: the worker leaves within a second and comes back --------------
{
	my $starts = $node->safe_psql('postgres', 'SELECT worker_starts FROM lake.stats()');
	my $off = -s $node->logfile;
	my $t0 = Time::HiRes::time();
	kill 'TERM', $pid;
	my $gone = wait_until(30, sub { !kill(0, $pid) });
	ok(defined $gone, 'SIGTERM: the worker process exits');
	diag(sprintf('SIGTERM: worker gone after %.3f s', $gone)) if defined $gone;
	cmp_ok($gone // 99, '<', 1.0, 'SIGTERM: the worker exits within a second');
	my $new = new_worker('SIGTERM', $pid);
	my $back = Time::HiRes::time() - $t0;
	diag(sprintf('SIGTERM: new worker serving after %.3f s', $back));
	cmp_ok($back, '<', 10, 'SIGTERM: the new worker is back within a few seconds');
	is($node->safe_psql('postgres', 'SELECT worker_starts FROM lake.stats()'),
		$starts + 1, 'SIGTERM: worker_starts counts the new lifetime');
	like(
		slurp_file($node->logfile, $off),
		qr/background worker "lake worker" \(PID $pid\) exited with exit code 1/,
		'SIGTERM: the worker exits with code 1, so the postmaster restarts it');
	$pid = $new;
}

# --- SIGKILL: crash restart, and the worker comes back --------------------
{
	my $off = -s $node->logfile;
	kill 'KILL', $pid;
	ok( eval {
			$node->wait_for_log(
				qr/background worker "lake worker" \(PID $pid\) was terminated by signal 9.*all server processes terminated; reinitializing.*database system is ready to accept connections/s,
				$off);
			1;
		},
		'SIGKILL: the postmaster crash-restarts the server');
	$node->poll_query_until('postgres', 'SELECT true');
	$pid = new_worker('SIGKILL', $pid);
}

# --- a lock on pg_extension is waited out, not a restart --------------------
# The worker looks the extension up at each pass, with its 500 ms
# lock_timeout. A timeout there is retried after a pause, as every other
# one is, not an exit into a new lifetime (each a new epoch and a full
# recovery of every owner).
{
	my $before = $node->safe_psql('postgres', 'SELECT worker_pid, worker_starts, epoch FROM lake.stats()');
	my $off = -s $node->logfile;
	my $locker = $node->background_psql('postgres');
	$locker->query_safe('BEGIN; LOCK pg_catalog.pg_extension IN ACCESS EXCLUSIVE MODE');
	ok(lock_timeouts_logged($node, $off, 2), 'the worker gives up on a locked pg_extension twice');
	$locker->query_safe('COMMIT');
	$locker->quit;
	is($node->safe_psql('postgres', 'SELECT worker_pid, worker_starts, epoch FROM lake.stats()'),
		$before, 'the same worker lifetime serves on, under the same epoch');
}

# --- a recovery held up by the sealing lock is a wait, not a failure --------
# An administrator's transaction holds the sealing lock (an open lifecycle
# edit) while a new worker starts: its recovery gives up on the lock at
# lock_timeout and tries again. Casts meanwhile wait for it up to
# lake.admission_queue_wait and get 53000, as for any recovery still under
# way; they used to get 55000 ("could not recover them") at once, which a
# client retrying on 53000 takes for a lasting failure.
#
# The database's owner may set exit_on_error for its database, which turns
# every error the worker catches and retries (these lock timeouts) into its
# end: the worker forces it off, and is not restarted again and again.
{
	$node->safe_psql('postgres', "SELECT lake.create_owner('held')");
	my $starts = $node->safe_psql('postgres', 'SELECT worker_starts FROM lake.stats()');
	my $admin = $node->background_psql('postgres', on_error_stop => 0);
	$node->safe_psql('postgres', 'ALTER DATABASE postgres SET exit_on_error = on');
	$node->safe_psql('postgres', "ALTER SYSTEM SET lake.admission_queue_wait = '2s'");
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	$admin->query_safe("BEGIN; UPDATE lake_data.lifecycle SET edges = edges WHERE name = 'kanban'");
	my $off = -s $node->logfile;
	kill 'TERM', $pid;
	ok( eval {
			$node->wait_for_log(
				qr/LOG:  lake worker waits for a lock another transaction holds\n.*DETAIL:  lake: recovering owners: canceling statement due to lock timeout/,
				$off);
			1;
		},
		'held lock: the new worker\'s recovery gives up on the sealing lock, and logs the wait');
	unlike(slurp_file($node->logfile, $off), qr/ERROR:  canceling statement due to lock timeout/,
		'held lock: as a wait (LOG), not as an error');
	my ($state, $msg) = sql_error($node, "SELECT lake.cast('held', NULL, NULL)");
	is($state, '53000', 'held lock: a cast waits for the recovery, then 53000')
	  or diag($msg);
	$admin->query_safe('ROLLBACK');
	$admin->quit;
	$pid = new_worker('held lock', $pid);
	is($node->safe_psql('postgres', "SELECT (lake.cast_durable('held', NULL, NULL)).position"),
		'1', 'held lock: once it is let go, the worker recovers and casts are served');
	is($node->safe_psql('postgres', 'SELECT worker_starts FROM lake.stats()'),
		$starts + 1, 'held lock: one worker start, for the SIGTERM only (exit_on_error is off for it)');
	$node->safe_psql('postgres', 'ALTER DATABASE postgres RESET exit_on_error');
	$node->safe_psql('postgres', 'ALTER SYSTEM RESET lake.admission_queue_wait');
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
}

# --- a long lake.cycle_interval does not hold stage expiry back -------------
# With a cast pending, the worker sleeps until its cycle is due; the
# expiry pass (every quarter of lake.stage_ttl, at least a second) must
# still run, not wait out the cycle.
{
	# The worker's own reloads are waited for: a cast reaching it under
	# the old interval would be sealed at once.
	reload_with("lake.cycle_interval = '1h'");
	reload_with("lake.stage_ttl = '1s'");
	my $before = $node->safe_psql('postgres', 'SELECT stages_expired FROM lake.stats()');
	$node->safe_psql('postgres', "SELECT lake.create_dataset('expiring'); SELECT lake.cast('held', NULL, NULL)");
	$node->safe_psql('postgres', "SELECT lake.begin_append('expiring', 'default', 'idle')");
	ok($node->poll_query_until('postgres', "SELECT stages_expired > $before FROM lake.stats()"),
		'long interval: the idle stage expires while a cast waits for its cycle');
	is($node->safe_psql('postgres', 'SELECT casts_pending FROM lake.stats()'),
		'1', 'long interval: the cast is still pending (no seal woke the worker)');
	reload_with("lake.cycle_interval = '10ms'");
	ok($node->poll_query_until('postgres', 'SELECT casts_pending = 0 FROM lake.stats()'),
		'long interval: back at 10ms, the cast is sealed');
	$node->safe_psql('postgres', 'ALTER SYSTEM RESET lake.cycle_interval');
	$node->safe_psql('postgres', 'ALTER SYSTEM RESET lake.stage_ttl');
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
}

# --- DROP EXTENSION: the worker goes back to waiting ------------------------
$node->safe_psql('postgres', 'DROP EXTENSION lake');
ok($node->poll_query_until('probe', 'SELECT worker_state FROM worker_stats()',
		'waiting for extension'),
	'after DROP EXTENSION the worker waits again');
is(probe('worker_pid'), $pid, 'the same worker waits');
$node->stop;

# --- a streaming standby runs no worker; promotion starts one ----------------
my $primary = lake_node('primary', init => { allows_streaming => 1 });
$primary->start;
$primary->safe_psql('postgres',
	"CREATE EXTENSION lake; SELECT lake.create_dataset('ds'); SELECT lake.append('ds', 't', 'op-1', '\\x01'::bytea);");
ok($primary->poll_query_until('postgres', 'SELECT worker_state FROM lake.stats()', 'serving'),
	'the primary runs a serving worker');
$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->start;
$primary->safe_psql('postgres', "SELECT lake.append('ds', 't', 'op-2', '\\x02'::bytea)");
$primary->wait_for_catchup($standby);

is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't', 'the standby is in recovery');
is($standby->safe_psql('postgres', "SELECT count(*) FROM lake.versions('ds')"),
	'2', 'the standby has replayed both versions');
is( $standby->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'lake worker'"),
	'0', 'no lake worker runs on the standby');
is( $standby->safe_psql('postgres',
		"SELECT worker_pid IS NULL, worker_state, worker_starts FROM lake.stats()"),
	't|stopped|0', 'lake.stats() on the standby: no worker ever started');

$standby->promote;
ok( $standby->poll_query_until(
		'postgres',
		"SELECT NOT pg_is_in_recovery() AND s.worker_state = 'serving' AND a.datname = 'postgres' "
		  . "FROM lake.stats() s JOIN pg_stat_activity a "
		  . "  ON a.pid = s.worker_pid AND a.backend_type = 'lake worker'"),
	'after promotion a lake worker serves postgres on the new primary');
is($standby->safe_psql('postgres', 'SELECT worker_starts FROM lake.stats()'),
	'1', 'one worker start on the promoted standby');
is($standby->safe_psql('postgres', "SELECT lake.append('ds', 't', 'op-3', '\\x03'::bytea)"),
	'3', 'the promoted standby accepts appends');

# With no background-worker slot left for it, the worker never runs
# (PostgreSQL logs "too many background workers" and does not try again):
# a cast is refused within lake.admission_queue_wait, and its refusal
# points at lake.stats(), which says the worker is stopped, rather than
# at a recovery that is not happening.
my $noslot = lake_node('noslot', conf => "max_worker_processes = 0\nlake.admission_queue_wait = '200ms'");
$noslot->start;
$noslot->safe_psql('postgres', "CREATE EXTENSION lake; SELECT lake.create_owner('n1')");
is($noslot->safe_psql('postgres', 'SELECT worker_state, worker_starts FROM lake.stats()'),
	'stopped|0', 'without a worker slot lake.stats() says the worker is stopped');
my ($noslot_state, $noslot_msg) = sql_error($noslot, "SELECT lake.cast('n1', NULL, NULL)");
is($noslot_state, '53000', 'a cast is refused (53000) within the queue wait');
my (undef, undef, $noslot_err) = $noslot->psql('postgres', "SELECT lake.cast('n1', NULL, NULL)");
like($noslot_err, qr/HINT:.*"stopped"/, 'and its hint says what a stopped worker means');
$noslot->stop;

done_testing();
