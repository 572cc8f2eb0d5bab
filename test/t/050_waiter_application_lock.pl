# A durable-cast waiter gives up (57014) when its transaction holds a lock
# on lake's tables that another session waits for (013_durable.pl). Locks
# on anything else never hold a seal back and are not looked at: a waiter
# whose transaction holds an application's table lock that another session
# queues for keeps waiting, and is answered once a seal can run.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('app_lock', conf => "lake.cycle_interval = 1h");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_owner('al');
CREATE TABLE app_rows (id int);});
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the node serves');
my $r = $node->safe_psql('postgres', "SELECT lake.cast('al', NULL, NULL, '\\x01'::bytea)");

# No seal can run while $ddl holds lake_data.cycle.
my $ddl = $node->background_psql('postgres');
$ddl->query_safe('BEGIN; LOCK TABLE lake_data.cycle IN SHARE MODE;');

# The waiter holds the application's table; $app queues behind it.
my $waiter = $node->background_psql('postgres', on_error_stop => 0);
$waiter->query_safe('BEGIN; LOCK TABLE app_rows IN ACCESS EXCLUSIVE MODE;');
my $wpid = $waiter->query_safe('SELECT pg_backend_pid()');
$waiter->query_until(qr/start/,
	"\\echo start\n\\set VERBOSITY verbose\nSELECT lake.await_durable('$r'::lake.receipt, 60000) IS NOT NULL AS answered;\n");
ok($node->poll_query_until('postgres', 'SELECT sessions_waiting FROM lake.stats()', '1'),
	'the waiter waits for a receipt no seal can write');
my $app = $node->background_psql('postgres', on_error_stop => 0);
$app->query_until(qr/start/, "\\echo start\nSELECT count(*) FROM app_rows;\n");
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_locks WHERE relation = 'app_rows'::regclass AND NOT granted"),
	'an application session waits for the waiter\'s table lock');
# Two of the waiter's 1 s ticks pass while the application session waits
# (or it stopped waiting: the waiter gave its lock up).
ok($node->poll_query_until('postgres',
		"SELECT coalesce(bool_and(now() - state_change > interval '2.5 s'), true) FROM pg_stat_activity
		 WHERE wait_event_type = 'Lock' AND query LIKE 'SELECT count(*) FROM app_rows%'"),
	'the application session has waited for more than two ticks, or waits no more');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid = $wpid AND state = 'active'"),
	'1', 'the waiter still waits: an application\'s lock is not lake\'s');

# Seals can run again: the waiter is answered, then lets the application go.
$ddl->query_safe('COMMIT');
$ddl->quit;
my ($out) = $waiter->query('SELECT 1');
unlike($waiter->{stderr}, qr/57014/, 'the waiter was not ended for the application lock');
$waiter->query_safe('COMMIT');
$waiter->quit;
$app->quit;
$node->stop;
done_testing();
