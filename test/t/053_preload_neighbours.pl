# lake beside another preloaded library with shared memory of its own
# (pg_stat_statements), loaded before lake and after it. lake's
# shmem_request and shmem_startup hooks must call the ones installed before
# them: a library loaded first would otherwise get no shared memory, and
# fail on first use while lake works. No other suite preloads such a
# library, so lake's hooks never ran with a previous hook to call.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('neighbours');
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'pg_stat_statements,lake'\n");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
CREATE EXTENSION pg_stat_statements;
SELECT lake.create_dataset('n');
SELECT lake.create_owner('n_owner');
});

# Both libraries' shared memory in use: lake's admission counters, ring
# and worker, pg_stat_statements' hash table.
sub both_work
{
	my ($what, $op) = @_;
	is( $node->safe_psql('postgres',
			"SELECT lake.append('n', 'default', '$op', '\\x01') > 0"),
		't', "$what: an append");
	is( $node->safe_psql('postgres',
			"SELECT (lake.cast_durable('n_owner', NULL, NULL)).position > 0"),
		't', "$what: a durable cast");
	is( $node->safe_psql('postgres',
			"SELECT slots_in_use = 0 AND admitted > 0 FROM lake.admission()"),
		't', "$what: admission counters");
	is( $node->safe_psql('postgres',
			"SELECT sum(calls) > 0 FROM pg_stat_statements WHERE query LIKE '%lake.append(%'"),
		't', "$what: pg_stat_statements counted the append");
}

both_work('pg_stat_statements loaded first', 'op1');

# A crash restart sets up shared memory again through the same hooks.
ok(restart_recovered($node), 'lake recovers after an immediate stop');
both_work('after the crash restart', 'op2');

# The other order: lake's hooks installed first, pg_stat_statements' after.
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'lake,pg_stat_statements'\n");
$node->restart;
$node->poll_query_until('postgres',
	"SELECT worker_state = 'serving' FROM lake.stats()")
  or die 'the worker did not recover';
both_work('lake loaded first', 'op3');

$node->stop;
done_testing();
