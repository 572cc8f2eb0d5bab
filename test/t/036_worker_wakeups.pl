# Wake-ups of the worker and of waiting sessions that PostgreSQL's own
# waits could consume. A lock wait, a condition-variable sleep or a
# synchronous commit inside the worker's loop resets its latch: a cast's
# or a waiter's wake-up set meanwhile was lost, and the worker slept the
# idle tick it had computed before (up to a second) with a durable cast
# waiting.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use LakeTAP;

# A stage TTL of 4 s: the worker's expiry pass runs once a second.
# deadlock_timeout well above the worker's 500 ms lock_timeout: its timer,
# armed when the worker's lock wait starts, would otherwise wake the worker
# 1 s into that wait and cut the cost of a lost wake-up to ~0.5 s.
# The log's %m and clock_timestamp() are compared as timestamptz: in UTC,
# whose abbreviation reads back unambiguously ("CST" would not).
my $node = lake_node('wakeups',
	conf => "lake.stage_ttl = '4s'\ndeadlock_timeout = '5s'\nlog_timezone = 'UTC'\ntimezone = 'UTC'");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_owner('w1');
});
my $worker = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'lake worker'");
$node->safe_psql('postgres', q{
CREATE FUNCTION lake_test_watch(before bigint) RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..12000 LOOP
        IF (SELECT config_reloads FROM lake.stats()) > before THEN RETURN clock_timestamp(); END IF;
        PERFORM pg_sleep(0.005);
    END LOOP;
    RETURN NULL;
END $$;});

# The server's timestamp (log_line_prefix %m) of the first log line from
# byte offset on that matches re.
sub logged_at
{
	my ($offset, $re) = @_;
	for my $line (split /\n/, slurp_file($node->logfile, $offset))
	{
		return $1 if $line =~ $re && $line =~ /^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \S+)/;
	}
	return 'infinity';
}

# Seconds from server timestamp a to b (both as the server prints them).
sub server_secs
{
	my ($a, $b) = @_;
	return $node->safe_psql('postgres', "SELECT extract(epoch FROM '$b'::timestamptz - '$a'::timestamptz)");
}

# The worker held (gdb) as its expiry pass starts: it has just found
# nothing to seal and means to sleep its idle tick afterwards.
my $log_at = -s $node->logfile;
my $g = gdb_hold($worker, 'expire_idle_stages');
ok(gdb_stopped($g), 'the worker is held at the start of its expiry pass') or diag("gdb: $g->{out}");

# A durable cast now: it sets the worker's latch to have its cycle sealed.
# The cast reports the server's clock when its coordinate came back, so the
# time measured below is the server's, not psql's exit or this test's polls.
my $cast = background($node,
	q{SELECT c.position || '|' || clock_timestamp() FROM lake.cast_durable('w1', 'Planning', 'CognitiveWork') c});
ok( $node->poll_query_until(
		'postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
WHERE query LIKE '%cast_durable%' AND wait_event_type = 'Extension'}),
	'the durable cast waits for its seal');

# An administrator's lock on lake_data.stage makes the expiry pass wait
# (ProcSleep, which waits on the worker's latch and resets it): the
# cast's wake-up is consumed there.
my $admin = $node->background_psql('postgres');
$admin->query_safe('BEGIN');
$admin->query_safe('LOCK TABLE lake_data.stage IN ACCESS EXCLUSIVE MODE');
gdb_let_go($g);
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) > 0 FROM pg_locks WHERE pid = $worker AND NOT granted"),
	'the worker waits for the lock in its expiry pass');

# The worker gives up the lock after its lock_timeout (500 ms): its pass
# ends, and it must seal at once, not sleep the second it computed before
# the cast came.
ok(lock_timeouts_logged($node, $log_at, 1), 'the expiry pass timed out on the lock');
wait_until(30, sub { finished($cast) });
my ($pos, $returned_at) = split /\|/, $cast->{out};
is($pos, '1', 'the durable cast returned its coordinate');
# Server clock: the worker's lock-timeout log line (log_line_prefix %m) to
# the cast's return. With the wake-up lost the worker sleeps the idle tick
# it computed before the cast came: the cast returns ~1 s after the lock
# timeout (1002-1003 ms measured), far above the bound.
my $took = server_secs(logged_at($log_at, qr/lock timeout/), $returned_at);
cmp_ok($took, '>=', 0, 'the cast returned after the lock timeout');
cmp_ok($took, '<', 0.3,
	'it returned once the worker left its lock wait, not after its idle tick');
note(sprintf('returned %.0f ms after the lock timeout was logged', 1000 * $took));
$admin->query_safe('COMMIT');

# The same for a reload: its SIGHUP's wake-up, consumed in the expiry
# pass's lock wait, left the new settings unread until the idle tick.
$log_at = -s $node->logfile;
my $reloads = $node->safe_psql('postgres', 'SELECT config_reloads FROM lake.stats()');
$g = gdb_hold($worker, 'expire_idle_stages');
ok(gdb_stopped($g), 'the worker is held at the start of its next expiry pass') or diag("gdb: $g->{out}");
# A session polls lake.stats() on the server (5 ms steps) and prints the
# server's clock when the reload shows.
my $watch = $node->background_psql('postgres');
$watch->query_until(qr/start/, "\\echo start\n"
	  . "SELECT 'reloaded|' || w FROM (SELECT lake_test_watch($reloads) w) x;\n\\echo done\n");
$node->safe_psql('postgres', "ALTER SYSTEM SET lake.cycle_interval = '20ms'; SELECT pg_reload_conf()");
$admin->query_safe('BEGIN');
$admin->query_safe('LOCK TABLE lake_data.stage IN ACCESS EXCLUSIVE MODE');
gdb_let_go($g);
ok(lock_timeouts_logged($node, $log_at, 1), 'the expiry pass timed out on the lock again');
my $watched = $watch->query_until(qr/done/, '');
my ($reloaded_at) = $watched =~ /^reloaded\|(.*)$/m;
ok(defined $reloaded_at, 'the worker reloaded its configuration') or diag($watched);
$took = server_secs(logged_at($log_at, qr/lock timeout/), $reloaded_at // 'infinity');
cmp_ok($took, '>=', 0, 'the reload came after the lock timeout');
cmp_ok($took, '<', 0.3, 'once it left its lock wait, not after its idle tick');
note(sprintf('reloaded %.0f ms after the lock timeout was logged', 1000 * $took));
$watch->quit;
$admin->query_safe('COMMIT');

# A waiter's once-a-second tick (a dropped extension is noticed, LK006)
# ran only when its latch wait timed out: a NOTIFY to the session, more
# often than once a second, put it off for as long as the pings went on.
$node->safe_psql('postgres', "SELECT lake.create_owner('w2')");
$admin->query_safe('BEGIN');
$admin->query_safe('LOCK TABLE lake_data.cycle IN SHARE MODE');	# no seal gets through
my $receipt = $node->safe_psql('postgres', "SELECT lake.cast('w2', 'Planning', 'CognitiveWork')");
my $w = $node->background_psql('postgres', on_error_stop => 0);
$w->query_safe('LISTEN lake_ping');
$w->query_safe('\\set VERBOSITY verbose');
my $w_pid = $w->query_safe('SELECT pg_backend_pid()');
$w->query_until(qr/start/, "\\echo start\nSELECT lake.await_durable('$receipt'::lake.receipt);\n\\echo done\n");
ok( $node->poll_query_until(
		'postgres', "SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $w_pid"),
	'the session awaits its receipt');

# Pings at 20 a second for 60 s, from a session of its own.
my $script = PostgreSQL::Test::Utils::tempdir() . '/ping.sql';
PostgreSQL::Test::Utils::append_to_file($script, "NOTIFY lake_ping;\n");
my ($ping_out, $ping_err) = ('', '');
my $ping = IPC::Run::start(
	[ 'pgbench', '-n', '-R', '20', '-T', '60', '-f', $script, '-d', $node->connstr('postgres') ],
	'>', \$ping_out, '2>', \$ping_err);
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) > 0 FROM pg_stat_activity WHERE query LIKE 'NOTIFY lake_ping%'"),
	'the pings run') or diag($ping_err);

$admin->query_safe('DROP EXTENSION lake');
$admin->query_safe('COMMIT');
my $dropped = time;
$w->query_until(qr/done/, '');
my $waited = time - $dropped;
like($w->{stderr}, qr/ERROR:  LK006: receipt \S+ can never become durable/, 'it was told the receipt can never become durable (LK006)');
cmp_ok($waited, '<', 10, 'within about a second of the drop, while the pings go on');
ok($ping->pumpable, 'the pings were still running');
note(sprintf('the waiter returned %.1f s after the drop', $waited));
$ping->kill_kill;
$w->quit;

$admin->quit;
$node->stop;
done_testing();
