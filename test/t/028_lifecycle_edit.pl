# A lifecycle edit renumbers the phases a session loads from then on, while
# the live owner states keep the numbers of the lifecycle recovery loaded
# until the worker recovers under the edit. In that window nothing may read
# the old numbers through the new names (SPEC §5: the recovered state is
# the replay of the durable landings):
# - lake.owner_state waits for the recovery instead of naming another phase;
# - lake.checkpoint() waits too, instead of snapshotting another phase that
#   the next restart would then load.
# gdb holds the worker as it starts the recovery the edit asked for.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

die 'gdb is required (scripts/setup.sh installs it)'
  unless grep { -x "$_/gdb" } split /:/, $ENV{PATH};

my $node = lake_node('lifecycle_edit', conf => "log_statement = none");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.define_lifecycle('abc', 'A', '{{A,B},{B,C},{C,A}}');
SELECT lake.create_owner('o', 'abc');
});
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the worker serves');
$node->safe_psql('postgres', q{SELECT lake.cast_durable('o', 'A', 'B'); SELECT lake.cast_durable('o', 'B', 'C')});
is($node->safe_psql('postgres', q{SELECT phases FROM lake_data.lifecycle WHERE name = 'abc'}),
	'{A,B,C}', 'the owner is in C, phase number 2');

# The edit adds phase D: C becomes number 3, and number 2 is B.
my $wpid = $node->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()');
my $gw = gdb_hold($wpid, 'cycle_close');
$node->safe_psql('postgres',
	q{UPDATE lake_data.lifecycle SET edges = '{{A,D},{D,A},{A,B},{B,C},{C,A}}' WHERE name = 'abc'});
is($node->safe_psql('postgres', q{SELECT phases FROM lake_data.lifecycle WHERE name = 'abc'}),
	'{A,D,B,C}', 'the edit renumbers the phases');
ok(gdb_stopped($gw), 'the worker starts the recovery the edit asks for, and is held')
  or diag("gdb: $gw->{out}");

my $state = background($node, q{SELECT phase, position FROM lake.owner_state('o')});
my $ckpt = background($node, q{SELECT lake.checkpoint() IS NOT NULL});
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 2 FROM pg_stat_activity WHERE (query LIKE '%lake.owner_state(''o'')%' OR query LIKE '%lake.checkpoint()%') AND wait_event = 'Extension' AND pid <> pg_backend_pid()"),
	'owner_state and checkpoint wait for the recovery')
  or diag("owner_state: $state->{out}$state->{err}; checkpoint: $ckpt->{out}$ckpt->{err}");

gdb_let_go($gw);
ok(defined wait_until(60, sub { finished($state) && finished($ckpt) }), 'both answer after it');
is("$state->{out}$state->{err}", "C|2\n", 'owner_state: phase C, position 2');
is("$ckpt->{out}$ckpt->{err}", "t\n", 'the checkpoint is taken');

# A checkpoint already past its wait for the owners when an edit commits
# finds the door closed under the sealing lock: it lets the lock go and
# waits, since the recovery it waits for takes that lock (holding it, the
# checkpoint failed with 55000 once the worker's recovery gave up on it).
my ($cs, $cpid, $gc) = held_session($node, 'checkpoint_take',
	'SELECT lake.checkpoint() IS NOT NULL AS taken;');
ok(gdb_stopped($gc), 'a checkpoint is held past its wait for the owners')
  or diag("gdb: $gc->{out}");
$wpid = $node->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()');
$gw = gdb_hold($wpid, 'cycle_close');
$node->safe_psql('postgres',
	q{UPDATE lake_data.lifecycle SET edges = '{{A,E},{E,A},{A,D},{D,A},{A,B},{B,C},{C,A}}' WHERE name = 'abc'});
ok(gdb_stopped($gw), 'another edit; the worker is held as it starts recovering');
gdb_let_go($gc);
ok($node->poll_query_until('postgres',
		"SELECT wait_event = 'Extension' FROM pg_stat_activity WHERE pid = $cpid"),
	'the checkpoint waits for the recovery');
gdb_let_go($gw);
ok(defined wait_until(60, sub { $cs->{run}->pump_nb; $cs->{stdout} =~ /done/ }),
	'the checkpoint answers after the recovery')
  or diag("stdout: $cs->{stdout}\nstderr: $cs->{stderr}");
like($cs->{stdout}, qr/^t$/m, '... having taken its snapshot');
$cs->quit;
unlike($cs->{stderr}, qr/ERROR/, '... without an error');
is($node->safe_psql('postgres', q{SELECT phase, position FROM lake.owner_state('o')}),
	'C|2', 'the owner is still in C');

# The snapshot holds C: a restart recovers the owner in C, nothing to apply.
$node->restart;
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the worker serves after a restart');
is($node->safe_psql('postgres', q{SELECT phase, position, quarantined FROM lake.owner_state('o')}),
	'C|2|f', 'the owner comes back from the snapshot in C');
is($node->safe_psql('postgres', q{SELECT coalesce(sum(applied), 0) FROM lake.recover('o')}),
	'0', 'recovery applies nothing');
is($node->safe_psql('postgres', q{SELECT (lake.cast_durable('o', 'C', 'A')).position}),
	'3', 'and the owner moves on from C');

$node->stop;
done_testing();
