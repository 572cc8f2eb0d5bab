# While lake.database names a database that does not exist, the worker's
# connection is FATAL and the postmaster starts it again a second later.
# Each new lifetime first waits twice as long as the last (up to a
# minute), so the log gets a line a minute, not one a second; once the
# database exists it is served.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('missing', conf => "lake.database = 'nowhere'");
$node->start;

my $fatal = qr/database "nowhere" does not exist/;
my $fatals = sub { my @m = (slurp_file($node->logfile) =~ /$fatal/g); scalar @m };

ok(defined wait_until(60, sub { $fatals->() >= 1 }), 'the first connection fails');
# Restarts a second apart, after pauses of 1, 2 and 4 s: the fourth
# failure comes about 10 s after the first (3 s without the pauses).
my $took = wait_until(60, sub { $fatals->() >= 4 });
ok(defined $took, 'it keeps trying');
cmp_ok($took // 0, '>=', 6, 'with growing pauses between the tries');

$node->safe_psql('postgres', 'CREATE DATABASE nowhere');
$node->safe_psql('nowhere', 'CREATE EXTENSION lake');
ok($node->poll_query_until('nowhere', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'a database created meanwhile is served');
$node->safe_psql('nowhere', "SELECT lake.create_owner('o')");
is($node->safe_psql('nowhere', "SELECT (lake.cast_durable('o', 'Planning', 'CognitiveWork')).position"),
	'1', 'and casts there are sealed');

$node->stop;
done_testing();
