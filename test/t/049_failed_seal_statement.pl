# A seal whose transaction aborts after the seal raised its commit to
# synchronous (here: the statement that called lake.seal() fails after it
# returned) must not make the session's next, unrelated transaction wait
# for synchronous standbys its synchronous_commit = local does not ask for
# (with a standby that never comes, it would wait for ever).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('failed_seal', init => { allows_streaming => 1 },
	conf => "lake.cycle_interval = '1h'");
$node->start;
$node->safe_psql('postgres', "CREATE EXTENSION lake; SELECT lake.create_owner('fs')");
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the node serves');

# Every commit that waits for a synchronous standby waits for ever now.
$node->safe_psql('postgres', q{
ALTER SYSTEM SET synchronous_standby_names = 'no_such_standby';
SELECT pg_reload_conf();});

my $s = $node->background_psql('postgres', on_error_stop => 0);
$s->query_safe('SET synchronous_commit = local');
$s->query_safe("SELECT lake.cast('fs', 'Planning', 'CognitiveWork')");
$s->query('SELECT lake.seal() / 0');
like($s->{stderr}, qr/division by zero/, 'the statement of a seal fails after the seal was written');
$s->{stderr} = '';
$s->query_until(qr/start/, "\\echo start\nCREATE TABLE after_failed_seal ();\n");
ok($node->poll_query_until('postgres',
		"SELECT (SELECT count(*) FROM pg_class WHERE relname = 'after_failed_seal')
		      + (SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep') > 0"),
	'the next transaction has committed, or waits');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"),
	'0', 'the next transaction commits locally, as synchronous_commit = local asks, not for the standby');

# Let any waiter go before the end.
$node->safe_psql('postgres', q{
ALTER SYSTEM RESET synchronous_standby_names;
SELECT pg_reload_conf();});
$s->quit;
$node->stop;
done_testing();
