# lake's own statements under auto_explain.log_nested_statements: their
# plans reach any session that asks for LOG messages (client_min_messages
# is a user setting). The grant check looked up the tenant of another
# tenant's row (a version's, a stage's, an owner's) through a custom plan,
# which showed that tenant as a constant: a refused role learned whose the
# row was. SECURITY.md: a refusal names only what the caller passed.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('nested_plans');
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'lake,auto_explain'
auto_explain.log_min_duration = 0
auto_explain.log_nested_statements = on
});
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
CREATE ROLE ta LOGIN;
CREATE ROLE tb LOGIN;
GRANT USAGE ON SCHEMA lake TO ta, tb;
SELECT lake.grant_tenant('ta', 'alpha');
SELECT lake.grant_tenant('tb', 'beta');
SELECT lake.create_dataset('shared');
});
my $stage = $node->safe_psql('postgres', q{
SET ROLE ta;
SELECT lake.append('shared', 'alpha', 'op-a1', '\x01');
SELECT lake.create_owner('hidden_owner', 'kanban', 'alpha');
SELECT lake.begin_append('shared', 'alpha', 'stage-op');
}) =~ s/.*\n//sr;

my @calls = (
	[ 'read', q{SELECT lake.read('shared', 1)} ],
	[ 'owner_state', q{SELECT * FROM lake.owner_state('hidden_owner')} ],
	[ 'cast', q{SELECT lake.cast('hidden_owner', 'Planning', 'CognitiveWork')} ],
	[ 'append_chunk', "SELECT lake.append_chunk($stage, 0, '\\x00')" ],
	[ 'abort_append', "SELECT lake.abort_append($stage)" ]);
for my $c (@calls)
{
	my ($name, $sql) = @$c;
	my ($out, $err) = ('', '');
	$node->psql('postgres', "\\set VERBOSITY verbose\nSET client_min_messages = log;\n$sql",
		stdout => \$out, stderr => \$err, extra_params => [ '-U', 'tb' ]);
	like($err, qr/ERROR:  42501: permission denied/, "$name of another tenant's row is refused (42501)");
	unlike($err, qr/alpha/, "$name: nothing the session saw names the row's tenant");
}

# The session does see the plans of lake's statements (so the checks above
# can fail): its own tenant's owner creation shows them.
my ($out, $err) = ('', '');
$node->psql('postgres', q{SET client_min_messages = log; SELECT lake.create_owner('b_owner', 'kanban', 'beta')},
	stdout => \$out, stderr => \$err, extra_params => [ '-U', 'tb' ]);
like($err, qr/LOG:  duration: .* plan:/s, "lake's nested statements' plans reach the session");

# Planner settings a session may change (USERSET) do not reach lake's own
# statements: with index scans off and a JIT compilation for any cost, a
# tenant's calls held what others wait for through a slow plan, and its
# plan_cache_mode chose whether a plan shows its parameters.
$node->safe_psql('postgres', "SELECT lake.append('shared', 'beta', 'op-b' || g, '\x02') FROM generate_series(1, 3) g");
($out, $err) = ('', '');
$node->psql('postgres', q{SET client_min_messages = log;
SET enable_indexscan = off; SET enable_bitmapscan = off; SET enable_indexonlyscan = off;
SET jit = on; SET jit_above_cost = 0; SET plan_cache_mode = force_custom_plan;
SELECT count(*) FROM lake.versions('shared', 1)},
	stdout => \$out, stderr => \$err, extra_params => [ '-U', 'tb' ]);
my @lake_plans = grep { /Query Text: .*lake_data\./ } split /LOG:  duration/, $err;
my ($version_plan) = grep { /FROM lake_data\.version v/ } @lake_plans;
ok(defined $version_plan, "lake's statement on lake_data.version was logged");
like($version_plan // '', qr/Index Scan/, 'it still scans its index');
is(scalar(grep { /JIT:/ } @lake_plans), 0, "none of lake's statements is JIT-compiled");

$node->stop;
done_testing();
