# A session that calls lake between a lifecycle edit's pre-commit (the door
# closed, the edit counted) and the moment its commit becomes visible (here
# the commit waits for a synchronous standby that is not there). Such a
# session reads the lifecycle as it was before the edit, and may cache it
# (lake.create_owner does). It must not count that cache as current once
# the worker has recovered under the edit: a session that did checked its
# casts against the old phase numbers for as long as it lived — a move from
# a phase the owner is not in was accepted, and the owner quarantined at
# the next recovery.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('lifecycle_edit_window', init => { allows_streaming => 1 },
	conf => "lake.admission_queue_wait = '1s'\n");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.define_lifecycle('L', 'a', '{{a,b},{b,c}}');
SELECT lake.create_owner('o1', 'L');
SELECT lake.cast_durable('o1', 'a', 'b');
SELECT lake.cast_durable('o1', 'b', 'c');
});
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the worker serves');
is($node->safe_psql('postgres', q{SELECT phases FROM lake_data.lifecycle WHERE name = 'L'}),
	'{a,b,c}', 'o1 is in c, phase number 2');
my $epoch = $node->safe_psql('postgres', 'SELECT epoch FROM lake.stats()');

# The session, connected before the edit (it keeps its cache).
my $s = $node->background_psql('postgres', on_error_stop => 0);
$s->query_safe('SET synchronous_commit = local');
$s->query_safe(q{\set VERBOSITY verbose});

# The edit renumbers the phases (a, c, b: c becomes 1, b 2); its commit
# waits for a standby.
$node->safe_psql('postgres', q{
ALTER SYSTEM SET synchronous_standby_names = 'no_such_standby';
SELECT pg_reload_conf();
});
# The checkpointer makes the setting count some time after the reload: a
# commit that waits for the standby says it does.
my $probe;
for my $i (1 .. 100)
{
	$probe = background($node, "CREATE TABLE probe_$i ()");
	$node->poll_query_until('postgres',
		"SELECT EXISTS (SELECT FROM pg_class WHERE relname = 'probe_$i')
		     OR EXISTS (SELECT FROM pg_stat_activity WHERE wait_event = 'SyncRep')");
	last if $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'") eq '1';
}
my $edit = background($node,
	q{UPDATE lake_data.lifecycle SET edges = '{{a,c},{c,b},{a,b},{b,c}}' WHERE name = 'L'});
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND query LIKE 'UPDATE lake_data.lifecycle%'}),
	'the edit waits in its commit for a synchronous standby');

# Meanwhile the session waits for the owners in vain, then caches L as it
# still reads it (the edit is not visible yet).
$s->query(q{SELECT lake.cast('o1', 'c', 'c')});
like($s->{stderr}, qr/ERROR:  53000: lake owners are not available yet/,
	'a cast in the window waits for the recovery the edit asked for, in vain');
$s->{stderr} = '';
$s->query_safe(q{SELECT lake.create_owner('o2', 'L')});
is($s->query_safe(q{SELECT count(*) FROM lake_data.owner WHERE name = 'o2'}), '1',
	'create_owner, which reads the lifecycle before the edit is visible, made its owner');

# The edit commits; the worker recovers under it.
$node->safe_psql('postgres', q{
ALTER SYSTEM RESET synchronous_standby_names;
SELECT pg_reload_conf();
});
ok(defined wait_until(60, sub { finished($edit) && finished($probe) }), 'the edit commits');
is($edit->{err}, '', 'without an error');
ok($node->poll_query_until('postgres', "SELECT epoch > $epoch AND worker_state = 'serving' FROM lake.stats()"),
	'the worker recovered under the edit');
is($node->safe_psql('postgres', q{SELECT phases FROM lake_data.lifecycle WHERE name = 'L'}),
	'{a,c,b}', 'c is now phase number 1, b number 2');

# The session checks casts against the lifecycle as edited.
$s->query(q{SELECT lake.cast('o1', 'b', 'c')});
like($s->{stderr}, qr/ERROR:  LK002: owner "o1" is in phase "c", not "b"/,
	'a move from b is refused: o1 is in c');
$s->{stderr} = '';
is($s->query_safe(q{SELECT phase FROM lake.owner_state('o1')}), 'c', 'its owner_state says c');
is($s->query_safe(q{SELECT (lake.cast_durable('o1', 'c', 'b')).position}), '3',
	'a move from c is accepted');
$s->quit;
is($node->safe_psql('postgres', q{SELECT phase || ' ' || quarantined FROM lake.owner_state('o1')}),
	'b false', 'a fresh session agrees: o1 in b, not quarantined');
is($node->safe_psql('postgres', q{SELECT count(*) FROM lake.recover() WHERE quarantined}), '0',
	'a recovery quarantines nobody');

$node->stop;
done_testing();
