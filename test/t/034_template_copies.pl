# The live owner states and pending casts in shared memory belong to one
# database. A copy made with CREATE DATABASE ... TEMPLATE keeps every
# relation OID, so when it took the served database's name (a fixture
# reset: DROP and CREATE ... TEMPLATE; or a clone renamed into place), its
# sessions read the dropped database's owner states and cast against them,
# a checkpoint there stored them as its snapshot, and the worker sealed
# casts accepted in one database into the other. The states now name
# their database too: the copy waits for its own recovery.
#
# The worker is kept away while the copy is checked by its own back-off:
# after a few connections to a database that does not exist, its next try
# is seconds away (029_missing_database.pl).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('copies',
	conf => "lake.database = 'app'\nlake.admission_queue_wait = '1s'\nlake.cycle_interval = '1h'");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('app', "CREATE EXTENSION lake; SELECT lake.create_owner('c');");
# The worker must not be connected to the template while it is copied.
$node->append_conf('postgresql.conf', "lake.database = 'nowhere'");
$node->restart;
$node->safe_psql('postgres', 'CREATE DATABASE app_tpl TEMPLATE app');
$node->append_conf('postgresql.conf', "lake.database = 'app'");
$node->restart;

my $serving = "SELECT worker_state = 'serving' FROM lake.stats()";
my $missing = qr/database "app" does not exist/;
my $missed = sub { my @m = (slurp_file($node->logfile) =~ /$missing/g); scalar @m };
# Waits until the worker has failed to connect 'n' times in all: its next
# try is then 2^(n-1) s away.
my $kept_away = sub {
	my ($n) = @_;
	ok(defined wait_until(120, sub { $missed->() >= $n }), "the worker cannot connect ($n)");
};

ok($node->poll_query_until('app', $serving), 'served');
$node->safe_psql('app', q{
SELECT lake.cast_durable('c', 'Planning', 'CognitiveWork');
SELECT lake.cast_durable('c', 'CognitiveWork', 'Evaluation');});

# 1. A reset from the template: the new database's c is at Planning.
my $before = $missed->();    # the worker's tries before app was first made
$node->safe_psql('postgres', 'DROP DATABASE app WITH (FORCE)');
$kept_away->($before + 4);
$node->safe_psql('postgres', 'CREATE DATABASE app TEMPLATE app_tpl');

my ($state, $msg) = sql_error($node, "SELECT phase || '/' || position FROM lake.owner_state('c')", 'app');
is($state, '53000', "before its recovery, the copy's owner_state waits, then 53000")
  or diag($msg);
($state) = sql_error($node, "SELECT lake.cast('c', 'Evaluation', 'Commit')", 'app');
is($state, '53000', "a cast valid only in the dropped database is not accepted");
($state) = sql_error($node, 'SELECT lake.checkpoint()', 'app');
is($state, '53000', 'no checkpoint of the dropped database\'s states');
is($node->safe_psql('app', 'SELECT count(*) FROM lake_data.snapshot'), '0', 'no snapshot stored');

ok($node->poll_query_until('app', $serving), 'the worker serves the new database');
is($node->safe_psql('app', "SELECT phase || '/' || position FROM lake.owner_state('c')"),
	'Planning/0', 'recovered from its own log');
is( $node->safe_psql('app',
		"SELECT d.cycle || '/' || d.position FROM lake.cast_durable('c', 'Planning', 'CognitiveWork') d"),
	'1/1', 'its first cast is its own first landing');

# 2. A clone renamed into place while a cast accepted in the original is
# pending: the cast is not sealed into the clone. A worker terminated
# between seals seals what is pending before it leaves (066_clean_stop.pl);
# one terminated anywhere else (a recovery, a snapshot) leaves at once.
# That is PostgreSQL's die(), which the worker's SIGUSR2 (the signal of
# the timer its SIGTERM arms) is: sent alone, it keeps the cast pending
# across the worker's exit. The rename waits for that exit.
$node->safe_psql('app', "SELECT lake.cast('c', 'CognitiveWork', 'Evaluation', 'made in src')");
is($node->safe_psql('app', 'SELECT casts_pending FROM lake.stats()'), '1', 'a cast pending');
kill 'USR2', $node->safe_psql('app', 'SELECT worker_pid FROM lake.stats()');
$node->safe_psql('postgres', 'ALTER DATABASE app RENAME TO src');
$kept_away->($missed->() + 3);
$node->safe_psql('postgres', 'CREATE DATABASE clone TEMPLATE src');
$node->safe_psql('postgres', 'ALTER DATABASE clone RENAME TO app');
ok($node->poll_query_until('app', $serving), 'the worker serves the clone');
is($node->safe_psql('app', "SELECT count(*) FROM lake.log(0) WHERE payload = 'made in src'"),
	'0', "the original's pending cast is not sealed into the clone");
is($node->safe_psql('app', "SELECT phase || '/' || position FROM lake.owner_state('c')"),
	'CognitiveWork/1', "the clone's owner is at its own last landing");

# 3. The original, now a database lake does not serve, touches nothing
# live: a hand edit of its lifecycles does not have the served database's
# owners recovered, and its lake.stats() tells the worker's state as it is.
my $epoch = $node->safe_psql('app', 'SELECT epoch FROM lake.stats()');
$node->safe_psql('src', 'UPDATE lake_data.lifecycle SET name = name WHERE false');
$node->safe_psql('app', "SELECT lake.cast_durable('c', 'CognitiveWork', 'Evaluation')");
is($node->safe_psql('app', 'SELECT epoch FROM lake.stats()'), $epoch,
	'an edit in another database has the served owners recovered no more');
is($node->safe_psql('src', 'SELECT worker_state FROM lake.stats()'), 'serving',
	'lake.stats() elsewhere says the worker serves');

$node->stop;
done_testing();
