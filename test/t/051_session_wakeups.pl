# Wake-ups of waiting sessions that a lock wait in their own catalog
# reads could consume (036 does the worker's). A lock wait sleeps on the
# process's latch and resets it: a seal's wake-up set before it is gone.
#
# 1. A cast waiting for room in a full ring: a seal's broadcast that came
#    while it looked its operation up again (between getting on the queue
#    and sleeping) took it off the queue, and a lock wait in that look-up
#    took the latch: it slept to lake.admission_queue_wait with room free.
# 2. A durable cast's waiter: its once-a-second tick reads catalogs; a
#    lock wait there took the seal's wake-up, and it slept a second more
#    with its coordinate already filled in.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

# The smallest ring (64 kB): four 15,000-byte casts fill it. deadlock_timeout
# well above the lock waits below: its timer would set the latch again.
my $node = lake_node('session_wakeups',
	conf => "lake.cycle_buffer_size = '64kB'\ndeadlock_timeout = '10s'\n"
	  . "log_timezone = 'UTC'\ntimezone = 'UTC'");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_owner('r1');
SELECT lake.create_owner('w1');
});

# Seals wait (and time out, and retry) while a session holds the cycle table.
my $pause = $node->background_psql('postgres');
sub pause_seals
{
	$pause->query_safe('BEGIN');
	$pause->query_safe('LOCK TABLE lake_data.cycle IN SHARE MODE');
}

sub fill_ring
{
	$node->safe_psql('postgres',
		"SELECT lake.cast('r1', NULL, NULL, repeat('f', 15000)::bytea) FROM generate_series(1, 4)");
}

sub pending
{
	return $node->safe_psql('postgres', 'SELECT casts_pending FROM lake.stats()');
}

# --- 1. the cast waiting for room ---------------------------------------
pause_seals();
fill_ring();
is(pending(), '4', 'four 15,000-byte casts fill the ring');

# C casts under an operation id, so that every look again reads the
# operations table first. Held (gdb) at its second look-up: with the
# broken wait, the look that follows its first miss, on the queue already;
# otherwise the one after the seal below frees room.
my ($c, $c_pid, $g) = held_session($node, "log_find_operation\nignore 1 1",
	q{SELECT (lake.cast('r1', NULL, NULL, repeat('c', 15000)::bytea, NULL, 'op-c')).seq
  || '|' || clock_timestamp();});
ok( defined wait_until(
		30,
		sub {
			$g->{h}->pump_nb;
			$g->{out} =~ /Breakpoint 1,/
			  || $node->safe_psql('postgres',
				"SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $c_pid") eq 't';
		}),
	'the cast found no room');

# The seal frees the ring and wakes whoever waits for room.
$pause->query_safe('COMMIT');
ok($node->poll_query_until('postgres', q{SELECT casts_pending = 0 FROM lake.stats()}),
	'a seal freed the ring');
ok(gdb_stopped($g), 'the cast is held at its look-up') or diag("gdb: $g->{out}");

# The ring full again, and the operations table locked: C's look-up waits
# for the lock, on its latch.
pause_seals();
fill_ring();
my $locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN');
$locker->query_safe('LOCK TABLE lake_data.cast_operation IN ACCESS EXCLUSIVE MODE');
gdb_let_go($g);
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) > 0 FROM pg_locks WHERE pid = $c_pid AND NOT granted"),
	'the cast waits for the lock in its look-up');
$locker->query_safe('COMMIT');
ok( $node->poll_query_until(
		'postgres', "SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $c_pid"),
	'the cast waits for room again');

# A seal frees the ring: C must take the room now, not at its deadline
# (lake.admission_queue_wait, a minute here). The seal comes at once or
# after the worker's retry pause (its lock wait times out at 500 ms, then
# it waits a second): 3 s bounds it on a slow machine.
my $freed_at = $pause->query_safe('SELECT clock_timestamp()');
$pause->query_safe('COMMIT');
my $out = $c->query_until(qr/done/, '');
my ($seq, $cast_at) = $out =~ /^(\d+)\|(.+)$/m;
ok(defined $seq, 'the cast was accepted') or diag($out . $c->{stderr});
my $took = $node->safe_psql('postgres',
	"SELECT extract(epoch FROM '" . ($cast_at // 'infinity') . "'::timestamptz - '$freed_at'::timestamptz)");
cmp_ok($took, '<', 3, 'once a seal freed room, not at its deadline');
note(sprintf('accepted %.0f ms after the seals resumed', 1000 * $took));
$c->quit;

# --- 2. the durable cast's waiter tick ------------------------------------
ok($node->poll_query_until('postgres', q{SELECT casts_pending = 0 FROM lake.stats()}),
	'the ring is empty');
pause_seals();
my $w = $node->background_psql('postgres', on_error_stop => 0);
my $w_pid = $w->query_safe('SELECT pg_backend_pid()');
$w->query_until(qr/start/, "\\echo start\n"
	  . "SELECT c.position || '|' || clock_timestamp() FROM lake.cast_durable('w1', 'Planning', 'CognitiveWork') c;\n"
	  . "\\echo done\n");
ok( $node->poll_query_until(
		'postgres', "SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $w_pid"),
	'the durable cast waits for its seal');

# Held at its next tick; the seal then fills in its coordinate and sets its
# latch. A change to lake_data's schema row makes the tick read pg_namespace
# again, and a lock on it makes that read wait.
$g = gdb_hold($w_pid, 'cycle_incarnation_gone');
ok(gdb_stopped($g), 'the waiter is held at its tick') or diag("gdb: $g->{out}");
$pause->query_safe('COMMIT');
ok($node->poll_query_until('postgres', q{SELECT casts_pending = 0 FROM lake.stats()}),
	'the seal covered the cast');
$node->safe_psql('postgres', 'GRANT USAGE ON SCHEMA lake_data TO PUBLIC; REVOKE USAGE ON SCHEMA lake_data FROM PUBLIC');
# While pg_namespace is locked a new session cannot start its first query:
# the lock wait is watched from a session whose caches hold what the
# watching query needs (it ran once before the lock).
my $waits_query = "SELECT count(*) > 0 FROM pg_locks WHERE pid = $w_pid AND NOT granted";
$pause->query_safe($waits_query);
$locker->query_safe('SELECT clock_timestamp()');
$locker->query_safe('BEGIN');
$locker->query_safe('LOCK TABLE pg_catalog.pg_namespace IN ACCESS EXCLUSIVE MODE');
ok(gdb($g, "delete\ncontinue\n", qr/Continuing/), 'the waiter goes on');
ok(defined wait_until(30, sub { $pause->query_safe($waits_query) eq 't' }), 'the tick waits for the lock');
# Inside the lock wait's WaitLatch now: a breakpoint there stops only a
# later sleep. Once the lock is let go, the waiter must return, not sleep
# on with its coordinate filled in (a second the broken wait slept).
$g->{h}->signal('INT');
ok(gdb($g, "break WaitLatch\ncontinue\n", qr/Continuing/), 'a breakpoint at the next sleep');
$locker->query_safe('COMMIT');
ok( defined wait_until(
		30,
		sub {
			$g->{h}->pump_nb;
			$w->{run}->pump_nb;
			$w->{stdout} =~ /done/ || $g->{out} =~ /Breakpoint \d+,/;
		}),
	'the waiter returned or slept again');
unlike($g->{out}, qr/Breakpoint \d+,/, 'it returned once the tick had its lock, without sleeping again');
gdb_let_go($g);
$out = $w->query_until(qr/done/, '');
ok($out =~ /^\d+\|/m, 'the durable cast returned its coordinate') or diag($out . $w->{stderr});

$w->quit;
$locker->quit;
$pause->quit;
$node->stop;
done_testing();
