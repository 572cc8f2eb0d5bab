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
my $node = lake_node('wakeups', conf => "lake.stage_ttl = '4s'");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_owner('w1');
});
my $worker = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'lake worker'");

# The worker held (gdb) as its expiry pass starts: it has just found
# nothing to seal and means to sleep its idle tick afterwards.
my $log_at = -s $node->logfile;
my $g = gdb_hold($worker, 'expire_idle_stages');
ok(gdb_stopped($g), 'the worker is held at the start of its expiry pass') or diag("gdb: $g->{out}");

# A durable cast now: it sets the worker's latch to have its cycle sealed.
my $cast = background($node,
	q{SELECT c.position FROM lake.cast_durable('w1', 'Planning', 'CognitiveWork') c});
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
my $seen = time;
wait_until(30, sub { finished($cast) });
my $took = time - $seen;
is($cast->{out}, "1\n", 'the durable cast returned its coordinate');
cmp_ok($took, '<', 0.3,
	'it returned once the worker left its lock wait, not after its idle tick');
note(sprintf('returned %.0f ms after the lock timeout was seen', 1000 * $took));
$admin->query_safe('COMMIT');

# The same for a reload: its SIGHUP's wake-up, consumed in the expiry
# pass's lock wait, left the new settings unread until the idle tick.
$log_at = -s $node->logfile;
my $reloads = $node->safe_psql('postgres', 'SELECT config_reloads FROM lake.stats()');
$g = gdb_hold($worker, 'expire_idle_stages');
ok(gdb_stopped($g), 'the worker is held at the start of its next expiry pass') or diag("gdb: $g->{out}");
$node->safe_psql('postgres', "ALTER SYSTEM SET lake.cycle_interval = '20ms'; SELECT pg_reload_conf()");
$admin->query_safe('BEGIN');
$admin->query_safe('LOCK TABLE lake_data.stage IN ACCESS EXCLUSIVE MODE');
gdb_let_go($g);
ok(lock_timeouts_logged($node, $log_at, 1), 'the expiry pass timed out on the lock again');
$seen = time;
ok($node->poll_query_until('postgres', "SELECT config_reloads > $reloads FROM lake.stats()"),
	'the worker reloaded its configuration');
$took = time - $seen;
cmp_ok($took, '<', 0.3, 'once it left its lock wait, not after its idle tick');
note(sprintf('reloaded %.0f ms after the lock timeout was seen', 1000 * $took));
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
