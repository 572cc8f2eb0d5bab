# A bounded lock wait whose bound runs out just as the lock is granted.
# PostgreSQL's lock timeout then leaves its cancel pending after the wait
# returns with the lock; the next interrupt check raised 55P03 from inside
# lake ("canceling statement due to lock timeout") although the session
# set no lock_timeout. The refusal is lake's own: 53000, nothing written.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use LakeTAP;

my $node = lake_node('bound_at_grant', conf => "lake.admission_queue_wait = '1s'");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_dataset('lt');
});

# A holds the dataset's append lock until it commits.
my $a = $node->background_psql('postgres');
$a->query_safe('BEGIN');
$a->query_safe(q{SELECT lake.append('lt', 'default', 'a1', '\x01')});

# B appends and queues for the lock; gdb holds it where ProcSleep, granted,
# turns its timers off.
my ($b, $b_pid, $g) = held_session($node, 'disable_timeouts',
	qq{\\set VERBOSITY verbose\nSELECT lake.append('lt', 'default', 'b1', '\\x02');});
my $issued = time;
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_locks WHERE pid = $b_pid AND NOT granted"),
	'the second append waits for the dataset lock');
$a->query_safe('COMMIT');
ok(gdb_stopped($g), 'it was granted the lock and is held before its timers are off')
  or diag("gdb: $g->{out}");

# The bound (1 s from the call) runs out while the process is held: its
# alarm is delivered when it goes on. Nothing to poll for: a timer.
usleep(100_000) while time < $issued + 1.5;
gdb_let_go($g);
$b->query_until(qr/done/, '');
like($b->{stderr}, qr/ERROR:  53000: (?:dataset "lt" is busy|append admission limit reached)/,
	'the append is refused with lake\'s own bound (53000)');
unlike($b->{stderr}, qr/lock timeout/, 'not with a lock timeout the session never set');
is($node->safe_psql('postgres', q{SELECT count(*) FROM lake.versions('lt')}),
	'1', 'nothing was written for it');
is($node->safe_psql('postgres', q{SELECT lake.append('lt', 'default', 'b1', '\x02')}),
	'2', 'the append goes through when retried');
$b->quit;
$a->quit;

# A deadlock found in a bounded wait as its bound runs out: lake's 53000,
# which the caller catches, but the lock timeout's cancel stayed pending
# and the handler's next statement raised 55P03.
$node->safe_psql('postgres', "SELECT lake.create_dataset('d1'); SELECT lake.create_dataset('d2')");
$a = $node->background_psql('postgres', on_error_stop => 0);
$a->query_safe("SET deadlock_timeout = '60s'");
$a->query_safe('BEGIN');
$a->query_safe(q{SELECT lake.append('d1', 'default', 'a1', '\x01')});
$b = $node->background_psql('postgres', on_error_stop => 0);
$b_pid = $b->query_safe('SELECT pg_backend_pid()');
$b->query_safe("SET deadlock_timeout = '400ms'");
$b->query_safe('BEGIN');
$b->query_safe(q{SELECT lake.append('d2', 'default', 'b1', '\x01')});
# Held (gdb) where ProcSleep, the deadlock found, turns its timers off.
$g = gdb_hold($b_pid, 'disable_timeouts');
$b->query_until(qr/start/, q{\echo start
DO $$
BEGIN
  BEGIN
    PERFORM lake.append('d1', 'default', 'b2', '\x02');
  EXCEPTION WHEN insufficient_resources THEN
    RAISE NOTICE 'caught %', SQLSTATE;
  END;
  PERFORM 1;
  RAISE NOTICE 'after the handler';
END $$;
\echo done
});
$issued = time;
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_locks WHERE pid = $b_pid AND NOT granted"),
	'the second session waits for the first one\'s dataset');
$a->query_until(qr/start/, "\\echo start\nSELECT lake.append('d2', 'default', 'a2', '\\x02');\n");
ok(gdb_stopped($g), 'the deadlock was found, and the wait is held before its timers are off')
  or diag("gdb: $g->{out}");
usleep(100_000) while time < $issued + 1.5;
gdb_let_go($g);
$b->query_until(qr/done/, '');
like($b->{stderr}, qr/caught 53000/, 'the deadlock ended the wait as its bound does (53000)');
like($b->{stderr}, qr/after the handler/, 'and the caller that caught it goes on');
unlike($b->{stderr}, qr/lock timeout/, 'no lock timeout surfaced later');
$b->query('ROLLBACK');
$b->quit;
# The first session's own wait for d2 ran out meanwhile (53000) or ends now.
$a->query('ROLLBACK');
$a->quit;
$node->stop;
done_testing();
