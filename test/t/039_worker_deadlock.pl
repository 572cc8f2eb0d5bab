# A deadlock found in one of the worker's lock waits as its own
# lock_timeout (500 ms) runs out. The worker catches the deadlock error and
# carries on, but the lock timeout's cancel stayed pending (PostgreSQL's
# own error recovery clears it; the worker's did not), and the next
# interrupt check outside its catch ended the worker: a restart, a new
# epoch, a stall of every durable cast.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use LakeTAP;

my $node = lake_node('worker_deadlock', conf => "deadlock_timeout = '400ms'");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_owner('o1');
});
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the worker serves');
my ($starts, $epoch, $worker) = split /\|/, $node->safe_psql('postgres',
	"SELECT worker_starts, epoch, worker_pid FROM lake.stats()");

# An administrator holds lake_data.cycle, so the worker's next seal waits
# for it, holding the sealing lock.
my $admin = $node->background_psql('postgres', on_error_stop => 0);
$admin->query_safe("SET deadlock_timeout = '60s'");
$admin->query_safe('BEGIN');
$admin->query_safe('LOCK TABLE lake_data.cycle IN SHARE MODE');
my $g = gdb_hold($worker, 'disable_timeouts');
$node->safe_psql('postgres', "SELECT lake.cast('o1', 'Planning', 'CognitiveWork')");
my $waits = time;
ok($node->poll_query_until('postgres',
		"SELECT count(*) > 0 FROM pg_locks WHERE pid = $worker AND NOT granted"),
	'the worker\'s seal waits for the table');
# The administrator's lifecycle edit waits for the sealing lock: a deadlock,
# which the worker finds at its deadlock_timeout, held there by gdb until
# its lock_timeout has run out too.
$admin->query_until(qr/start/,
	"\\echo start\nUPDATE lake_data.lifecycle SET name = name WHERE name = 'kanban';\n");
ok(gdb_stopped($g), 'the worker found the deadlock and is held before its timers are off')
  or diag("gdb: $g->{out}");
usleep(100_000) while time < $waits + 1.2;
gdb_let_go($g);
$admin->query('ROLLBACK');

ok($node->poll_query_until('postgres', "SELECT pending = 0 FROM lake.owner_state('o1')"),
	'the cast is sealed once the administrator is gone');
is($node->safe_psql('postgres', 'SELECT worker_starts || \'|\' || epoch FROM lake.stats()'),
	"$starts|$epoch", 'the worker did not exit: no restart, no new epoch');
unlike(slurp_file($node->logfile), qr/lake worker.*exited with exit code/,
	'no worker exit was logged');

$admin->quit;
$node->stop;
done_testing();
