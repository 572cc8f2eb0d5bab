# A DROP EXTENSION that comes while the worker is in a pass over lake's
# tables. The DROP locks the extension first and then each of its objects;
# the worker's pass locks one table after another. Without anything else,
# the DROP could hold a table the pass asks for next while it waits for
# one the pass holds: a deadlock, which PostgreSQL's detector may end by
# aborting the DROP (40P01; seen under valgrind). The worker holds the
# extension itself (a share lock) for each of its transactions, so the DROP
# waits for the pass at its first lock, holding nothing of lake's, and goes
# on once the pass commits.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('drop_during_pass');
$node->start;
my $log0 = -s $node->logfile;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_owner('o1');
});
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the worker serves');
my $worker = $node->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()');

# The worker's next seal is held by gdb with a table of the cycle open.
my $g = gdb_hold($worker, 'store_require_width');
$node->safe_psql('postgres', "SELECT lake.cast('o1', 'Planning', 'CognitiveWork')");
ok(gdb_stopped($g), 'the worker is held inside a seal') or diag("gdb: $g->{out}");

my $before_drop = -s $node->logfile;
my $drop = background($node, 'DROP EXTENSION lake');
ok($node->poll_query_until('postgres',
		"SELECT count(*) > 0 FROM pg_locks l JOIN pg_stat_activity a USING (pid)
		  WHERE a.query = 'DROP EXTENSION lake' AND NOT l.granted"),
	'the DROP waits');
is($node->safe_psql('postgres', q{
SELECT l.locktype || ' ' || l.classid::regclass || ' ' || l.mode
  FROM pg_locks l JOIN pg_stat_activity a USING (pid)
 WHERE a.query = 'DROP EXTENSION lake' AND NOT l.granted}),
	'object pg_extension AccessExclusiveLock',
	'it waits for the extension, which the worker holds for its pass');
is($node->safe_psql('postgres', q{
SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
  JOIN pg_class c ON c.oid = l.relation
 WHERE a.query = 'DROP EXTENSION lake'
   AND c.relnamespace IN ('lake'::regnamespace, 'lake_data'::regnamespace)}),
	'0', 'and holds none of lake\'s tables meanwhile');

gdb_let_go($g);
ok(defined wait_until(60, sub { finished($drop) }), 'the DROP ends once the pass is over');
is($drop->{err}, '', 'the DROP succeeded, no deadlock');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_extension WHERE extname = 'lake'"),
	'0', 'the extension is gone');
ok(defined wait_until(60, sub {
			slurp_file($node->logfile, $before_drop) =~ /lake worker waiting: extension "lake" is not installed/ }),
	'the worker waits for the extension again');
unlike(slurp_file($node->logfile, $log0), qr/deadlock detected|lake worker.*exited with exit code|ERROR/,
	'no deadlock, no error, no worker exit');

# A DROP whose transaction stays open: the worker's passes wait for it
# (their lock waits give up and are tried again), and serve once it is
# rolled back.
$node->safe_psql('postgres', 'CREATE EXTENSION lake');
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the worker serves the new extension');
my $admin = $node->background_psql('postgres', on_error_stop => 0);
my $before_open = -s $node->logfile;
$admin->query_safe('BEGIN');
$admin->query_safe('DROP EXTENSION lake');
ok(defined wait_until(30, sub {
			slurp_file($node->logfile, $before_open) =~ /lake worker waits for a lock another transaction holds/ }),
	'the worker waits for the open DROP, and says so');
$admin->query_safe('ROLLBACK');
$node->safe_psql('postgres', "SELECT lake.create_owner('o2')");
$node->safe_psql('postgres', "SELECT lake.cast_durable('o2', 'Planning', 'CognitiveWork')");
is($node->safe_psql('postgres', "SELECT position FROM lake.owner_state('o2')"), '1',
	'after the ROLLBACK the worker seals again');

$admin->quit;
$node->stop;
done_testing();
