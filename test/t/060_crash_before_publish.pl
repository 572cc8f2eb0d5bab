# A crash after a seal's commit is flushed and before it is published: the
# worker is SIGKILLed in its commit callback, after the commit record is
# durable and before the waiters are given their coordinates (017 kills it
# before the flush). The cycle is durable though no client heard of it:
# after the restart it is there, once; the durable cast whose client lost
# its connection, retried with its operation id, answers the coordinate it
# was sealed with (not a second landing); a fire-and-forget receipt of the
# same cycle answers it too (not LK006); lake.recover() applies nothing.
# (Readers may show the cycle before it is published: its commit is flushed,
# so no crash can take it away.)
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

die 'gdb is required (scripts/setup.sh installs it)'
  unless grep { -x "$_/gdb" } split /:/, $ENV{PATH};

my $node = lake_node('before_publish',
	conf => "fsync = on\nrestart_after_crash = on\nlake.cycle_interval = '1h'\n");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.define_lifecycle('ab', 'A', '{{A,B},{B,A}}');
SELECT lake.create_owner('o', 'ab');
SELECT lake.create_owner('p', 'ab');
});
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the worker serves');

# A fire-and-forget cast, pending; then a durable one that makes the worker seal.
my $rp = $node->safe_psql('postgres', q{SELECT lake.cast('p', 'A', 'B')});
my $wpid = $node->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()');
my $g = gdb_hold($wpid, 'publish_xact_callback if event == 0 && seal_commit != 0');
my $durable = background($node,
	q{SELECT (lake.cast_durable('o', 'A', 'B', NULL, NULL, 'op-1')).position});
# (A conditional breakpoint stops as "Breakpoint 1.1," where gdb splits it.)
ok(defined wait_until(30, sub { $g->{h}->pump_nb; $g->{out} =~ /Breakpoint 1[.,]/ }),
	'the worker is held in its seal\'s commit callback') or diag("gdb: $g->{out}");
is($node->safe_psql('postgres', q{SELECT count(*) FROM lake_data.cycle}), '1',
	'the cycle\'s row is committed');
is($node->safe_psql('postgres', q{
SELECT lsn <= pg_current_wal_flush_lsn() FROM lake_data.cycle}), 't', '... and flushed');
ok(!finished($durable), 'the durable cast has no coordinate');

# The worker dies there; the postmaster restarts the cluster.
kill 'KILL', $wpid;
gdb_let_go($g);
ok(defined wait_until(60, sub { finished($durable) }), 'the durable cast\'s session ends');
like($durable->{err}, qr/terminat|connection|closed/i, 'without a coordinate');
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the worker recovered after the restart');

is($node->safe_psql('postgres', q{SELECT count(*) FROM lake.cycles()}), '1', 'the cycle is there');
my $cycle = $node->safe_psql('postgres', q{SELECT cycle FROM lake.cycles()});
is($node->safe_psql('postgres',
		q{SELECT (c).cycle || ' ' || (c).position FROM (SELECT lake.cast_durable('o', 'A', 'B', NULL, NULL, 'op-1') c) x}),
	"$cycle 1", 'the retried durable cast answers the coordinate it was sealed with');
is($node->safe_psql('postgres', q{SELECT count(*) FROM lake.trajectory('o')}), '1',
	'o has landed the step once');
is($node->safe_psql('postgres',
		qq{SELECT (c).cycle || ' ' || (c).position FROM (SELECT lake.await_durable('$rp') c) x}),
	"$cycle 1", 'the fire-and-forget receipt of the same cycle answers it');
is($node->safe_psql('postgres', q{SELECT coalesce(sum(applied), 0) FROM lake.recover()}), '0',
	'lake.recover() applies nothing');
is($node->safe_psql('postgres', q{SELECT phase || ' ' || position FROM lake.owner_state('o')}),
	'B 1', 'o is in B at position 1');
is($node->safe_psql('postgres', q{SELECT (lake.cast_durable('o', 'B', 'A')).position}), '2',
	'the next cast continues its positions');

$node->stop;
done_testing();
