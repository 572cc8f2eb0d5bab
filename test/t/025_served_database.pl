# lake serves one database, lake.database. A copy of it (CREATE DATABASE
# ... TEMPLATE) holds lake's tables with the same OIDs, so the shared
# state took its sessions for the served database's: their casts went into
# the shared ring and were sealed into the original's tables, and appends
# wrote to the copy that no worker serves. Every call in the copy is now
# 55000, and the original is untouched.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('served');
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_owner('c');
SELECT lake.create_dataset('d');
SELECT lake.cast_durable('c', 'Planning', 'CognitiveWork');});

# The worker must not be connected to the template while it is copied.
$node->append_conf('postgresql.conf', "lake.database = 'nowhere'");
$node->restart;
$node->safe_psql('template1', 'CREATE DATABASE copy TEMPLATE postgres');
$node->append_conf('postgresql.conf', "lake.database = 'postgres'");
$node->restart;
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the worker serves the original');

for my $call (
	[ 'cast', "SELECT lake.cast('c', 'CognitiveWork', 'Evaluation')" ],
	[ 'cast_durable', "SELECT lake.cast_durable('c', 'CognitiveWork', 'Evaluation')" ],
	[ 'owner_state', "SELECT * FROM lake.owner_state('c')" ],
	[ 'append', "SELECT lake.append('d', 'default', 'op', '\\x01'::bytea)" ],
	[ 'trajectory', "SELECT count(*) FROM lake.trajectory('c')" ])
{
	my ($what, $sql) = @$call;
	my ($state, $msg) = sql_error($node, $sql, 'copy');
	is($state, '55000', "$what in the copy: 55000");
	like($msg, qr/lake serves database "postgres", not this one/, '... naming the served database');
}

is( $node->safe_psql('postgres',
		"SELECT string_agg(to_phase, ',' ORDER BY position) FROM lake.trajectory('c')"),
	'CognitiveWork', 'the original holds only its own step');
is($node->safe_psql('postgres', "SELECT count(*) FROM lake.versions('d', 0)"),
	'0', 'and no version');

$node->stop;
done_testing();
