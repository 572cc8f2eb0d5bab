# Owners keep their tenants across restarts and snapshots (SPEC §4): the
# tenant is in the durable owner registry, and the worker loads it into the
# live owner states at recovery — replaying the log, and starting from a
# snapshot. After each restart a role holding tenant acme still casts to,
# reads and awaits acme's owner, and is still refused (42501, naming only
# the owner) for globex's.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('owner_tenant');
$node->start;
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION lake;
	CREATE ROLE app_acme LOGIN;
	GRANT USAGE ON SCHEMA lake TO app_acme;
	SELECT lake.grant_tenant('app_acme', 'acme');
	SELECT lake.create_owner('o_acme', 'kanban', 'acme');
	SELECT lake.create_owner('o_globex', 'kanban', 'globex');
	SELECT lake.cast_durable('o_globex', 'Planning', 'CognitiveWork', '\x67'::bytea);
});

my $casts = 0;

# What app_acme may and may not do, after each kind of restart.
sub check_tenants
{
	my ($when) = @_;

	is( $node->safe_psql('postgres',
			"SELECT name || ':' || tenant FROM lake_data.owner ORDER BY name"),
		"o_acme:acme\no_globex:globex",
		"$when: the registry keeps the tenants");
	$casts++;
	is( $node->safe_psql(
			'postgres', qq{
		SET ROLE app_acme;
		SELECT (lake.cast_durable('o_acme', NULL, NULL, '\\x61'::bytea)).position;
	}),
		$casts,
		"$when: acme's role casts to acme's owner");
	is( $node->safe_psql(
			'postgres', q{
		SET ROLE app_acme;
		SELECT count(*) FROM lake.trajectory('o_acme');
	}),
		$casts,
		"$when: acme's role reads acme's owner's trajectory");
	for my $call (
		"SELECT lake.cast('o_globex', 'CognitiveWork', 'Evaluation')",
		"SELECT lake.cast_durable('o_globex', NULL, NULL)",
		"SELECT * FROM lake.owner_state('o_globex')",
		"SELECT * FROM lake.trajectory('o_globex')")
	{
		my ($state, $msg) = sql_error($node, "SET ROLE app_acme; $call");
		is("$state: $msg", '42501: permission denied for owner "o_globex"',
			"$when: refused: $call");
	}
	is( $node->safe_psql(
			'postgres', q{
		SET ROLE app_acme;
		SELECT coalesce(string_agg(DISTINCT owner, ','), '') FROM lake.log();
	}),
		'o_acme',
		"$when: the log shows acme's role only acme's owner");
	is( $node->safe_psql('postgres',
			"SELECT phase || '|' || position FROM lake.owner_state('o_globex')"),
		'CognitiveWork|1',
		"$when: globex's owner did not move");
}

check_tenants('before any restart');

$node->restart(mode => 'immediate');
check_tenants('after an immediate restart (log replay)');

$node->safe_psql('postgres', 'SELECT lake.checkpoint()');
my $epoch = $node->safe_psql('postgres', 'SELECT epoch FROM lake.stats()');
$node->restart(mode => 'fast');
# The worker's recovery ends by opening a new epoch; its figures count then.
ok($node->poll_query_until('postgres', "SELECT epoch > $epoch FROM lake.stats()"),
	'the worker recovered after the restart');
is($node->safe_psql('postgres', 'SELECT recovery_snapshot > 0 FROM lake.stats()'),
	't', 'recovery started from the snapshot');
check_tenants('after a checkpoint and a restart (snapshot)');

$node->stop;
done_testing();
