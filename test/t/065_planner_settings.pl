# lake's own statements are planned with PostgreSQL's default planner
# settings, whatever the session sets: a tenant that turned off hash and
# merge joins and made index pages cost 10^9 had the commit of a stage
# with a hole run a nested loop over every chunk of the table per chunk
# of the stage (3 s for 2,000 chunks, an admission slot held throughout),
# and lake.versions, the receipt look-up and append_chunk read whole
# tables. auto_explain's log_settings names, in each logged plan, the
# planner settings that differ from PostgreSQL's defaults: the plans of
# lake's nested statements must name none but the path lake sets.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('planner');
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_dataset('ps');
SELECT lake.append('ps', 't', 'op-' || n, '\x01'::bytea) FROM generate_series(1, 20) n;
SELECT lake.create_owner('po');
});
my $stage = $node->safe_psql('postgres', q{
SELECT lake.begin_append('ps', 't', 'holed');
});
$node->safe_psql('postgres', "SELECT lake.append_chunk($stage, n, '\\x02'::bytea) FROM unnest(ARRAY[0, 1, 3]) n");
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"), 'the worker serves');

# Settings lake leaves as they are, each for a reason (src/store.c): what
# only parallel plans, the genetic
# optimizer past its threshold, JIT past jit, prefetching, recursive
# queries or temporary tables use.
my $left = qr/^(jit_\w+|geqo_(?!threshold)\w+|force_parallel_mode|max_parallel_\w+|min_parallel_\w+|parallel_leader_participation|effective_io_concurrency|maintenance_io_concurrency|recursive_worktable_factor|temp_buffers)$/;

# Every other setting a plan's Settings line can name (PostgreSQL's
# EXPLAIN flag) is set away from its default: a setting added to
# PostgreSQL, or left out of lake's list, shows in lake's plans.
my @set = split /\n/, $node->safe_psql('postgres', q{
SELECT format('SET %s = %L;', name,
       CASE WHEN vartype = 'bool' THEN CASE WHEN boot_val = 'on' THEN 'off' ELSE 'on' END
            WHEN vartype = 'enum' THEN (SELECT v FROM unnest(enumvals) v WHERE v <> boot_val ORDER BY v DESC LIMIT 1)
            WHEN min_val::numeric <> boot_val::numeric THEN min_val
            ELSE max_val END)
FROM pg_settings
WHERE 'EXPLAIN' = ANY (pg_settings_get_flags(name)) AND vartype <> 'string'
ORDER BY name});
my @changed = map { /^SET (\w+) =/ ? $1 : () } @set;
cmp_ok(scalar(grep { !/$left/ } @changed), '>=', 35, 'the planner settings lake fixes are all changed');
# (The path and jit are lake's own: 'pg_catalog, pg_temp' and off, checked
# by value below.)

my $from = -s $node->logfile;
my ($ret, $out, $err) = $node->psql('postgres', qq{
LOAD 'auto_explain';
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_nested_statements = on;
SET auto_explain.log_settings = on;
@set
-- Hostile where it matters: every cost against an index.
SET random_page_cost = 1e9;
SET cpu_index_tuple_cost = 1e6;
SELECT lake.append('ps', 't', 'op-new', '\\x03'::bytea) AS appended;
SELECT count(*) AS versions FROM lake.versions('ps');
SELECT lake.read('ps', 3) AS read;
SELECT lake.append_chunk($stage, 4, '\\x02'::bytea);
SELECT lake.commit_append($stage);
});
like($err, qr/ERROR:  stage $stage is missing chunk 2/, 'the commit names the hole');
($ret, $out, $err) = $node->psql('postgres', qq{
LOAD 'auto_explain';
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_nested_statements = on;
SET auto_explain.log_settings = on;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_indexscan = off;
SET random_page_cost = 1e9;
SELECT (lake.await_durable(lake.cast('po', 'Planning', 'CognitiveWork'))).position AS durable;
SELECT count(*) AS landings FROM lake.log(0);
SELECT count(*) AS steps FROM lake.trajectory('po');
SELECT count(*) AS cycles FROM lake.cycles(0);
});
is($ret, 0, 'the owner calls ran') or diag($err);

# Each plan auto_explain logged: its query's text and its settings line.
my @plans = split /^\S.*LOG:  duration: [\d.]+ ms  plan:\n/m, slurp_file($node->logfile, $from);
shift @plans;
my (@lake, $mine);
for my $plan (@plans)
{
	$plan =~ s/^\S.*//ms;    # up to the next line of the log
	my ($settings) = $plan =~ /^\s*Settings: (.*)$/m;
	$settings //= '';
	if ($plan =~ /Query Text: .*lake_data\./)
	{
		push @lake, $settings;
	}
	elsif ($plan =~ /Query Text: SELECT lake\.append\('ps'/)
	{
		$mine = $settings;
	}
}
like($mine, qr/enable_hashjoin = 'off'.*random_page_cost = '1e\+09'.*work_mem = '64kB'/,
	"the session's own statement was planned with its settings");
cmp_ok(scalar(@lake), '>=', 8, 'the plans of lake\'s statements were logged (' . scalar(@lake) . ')');
my @off = grep {
	my @named = grep { !/$left/ } map { /^(\w+) = / ? $1 : $_ }
	  grep { $_ ne "search_path = 'pg_catalog, pg_temp'" && $_ ne "jit = 'off'" } split /, (?=\w+ = ')/;
	@named > 0
} @lake;
is(scalar(@off), 0, 'none was planned with a setting lake fixes')
  or diag(join("\n", @off[0 .. (@off < 5 ? $#off : 4)]));

$node->stop;
done_testing();
