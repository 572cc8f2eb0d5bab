# The worker's SQL runs with search_path = pg_catalog, pg_temp too
# (SECURITY.md "A hostile search_path"). The worker calls lake's C code
# directly, never through a function's SET clause, and starts with the
# path its database's settings give it — which the database's owner, not a
# superuser, may set. Its stage expiry compares ids with an IN (subquery),
# whose = PostgreSQL resolves by name: a database owner who plants an =
# for bigint first on the database's path must not get it run by the
# worker, as the extension's owner. The same owner may make the database's
# transactions read-only by default: the worker's writes through SPI (stage
# expiry, owner snapshots) must go on regardless.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('worker_search_path',
	conf => "lake.stage_ttl = '1s'\nlake.checkpoint_cycles = 1");
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_dataset('ds');
CREATE ROLE dbo LOGIN;
ALTER DATABASE postgres OWNER TO dbo;
});
# The database's owner plants a recording = for bigint and puts its schema
# first on the database's path.
$node->safe_psql(
	'postgres', q{
SET ROLE dbo;
CREATE SCHEMA evil;
CREATE TABLE evil.hits (who text, at timestamptz DEFAULT pg_catalog.clock_timestamp());
GRANT ALL ON SCHEMA evil TO PUBLIC;
GRANT ALL ON evil.hits TO PUBLIC;
CREATE FUNCTION evil.eq(bigint, bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO evil.hits (who) VALUES (CURRENT_USER);
    RETURN $1 OPERATOR(pg_catalog.=) $2;
END $$;
CREATE OPERATOR evil.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.eq);
ALTER DATABASE postgres SET search_path = evil, pg_catalog;
ALTER DATABASE postgres SET default_transaction_read_only = on;
});
# This test's own sessions write: they turn the database's default off.
my $rw = 'SET default_transaction_read_only = off; ';
# The worker reads the database's settings when it connects.
$node->restart;
$node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()")
  or die 'the worker does not serve';

# The planted operator is live: a session of this database uses it.
$node->safe_psql('postgres', $rw . 'SELECT 1::bigint = 1::bigint');
is($node->safe_psql('postgres', 'SELECT pg_catalog.count(*) FROM evil.hits'),
	'1', 'a session with the database\'s path uses the planted =');
$node->safe_psql('postgres', $rw . 'TRUNCATE evil.hits');

# An idle stage, which the worker expires after a second.
my $before = $node->safe_psql('postgres', 'SELECT stages_expired FROM lake.stats()');
my $stage = $node->safe_psql('postgres', $rw . "SELECT lake.begin_append('ds', 'default', 'idle')");
$node->safe_psql('postgres', $rw . "SELECT lake.append_chunk($stage, 0, '\\x01'::bytea)");
ok( $node->poll_query_until(
		'postgres', "SELECT stages_expired > $before FROM lake.stats()"),
	'the worker expired the idle stage');
is($node->safe_psql('postgres', 'SELECT pg_catalog.count(*) FROM lake_data.stage'),
	'0', 'no stage is left');
is($node->safe_psql('postgres', "SELECT pg_catalog.string_agg(who, ',') FROM evil.hits"),
	'', 'the worker\'s statements never used the planted operator');

# A durable cast: its cycle is sealed (table AM) and, at
# lake.checkpoint_cycles = 1, snapshotted (SPI) by the worker.
my $cycle = $node->safe_psql('postgres',
	$rw . "SELECT lake.create_owner('o'); SELECT (lake.cast_durable('o', 'Planning', 'CognitiveWork')).cycle");
ok( $node->poll_query_until(
		'postgres', "SELECT pg_catalog.max(cycle) >= $cycle FROM lake_data.snapshot"),
	'the worker snapshots owners in a database whose transactions are read-only by default');

$node->stop;
done_testing();
