# A point-in-time recovery (an archive restore to a named restore point,
# then a promotion) starts a new timeline from an older state. What the
# abandoned line handed out must never name something else on the new one
# (SPEC §4: "(epoch, seq) never repeats"; §5: await_durable never lies):
# - restored to a point after CREATE EXTENSION, a receipt sealed before the
#   target answers its coordinate, one sealed after it is LK006, and a stage
#   begun after it does not exist (42704);
# - restored to a point before CREATE EXTENSION, the extension created
#   again starts at an epoch the abandoned line never used. It started at
#   epoch 1, as the abandoned line had: that line's receipt (1,1) answered
#   the coordinate of the new line's first cast; dropped and created again
#   while the server runs, it goes on from the server's epoch.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $primary = lake_node('pitr', init => { has_archiving => 1, allows_streaming => 1 });
$primary->start;
$primary->backup('before_lake');
$primary->safe_psql('postgres', "SELECT pg_catalog.pg_create_restore_point('no_lake')");

$primary->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_owner('o');
SELECT lake.create_dataset('d');});
ok($primary->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the primary serves');
my ($kept_receipt, $kept) = split /\|/, $primary->safe_psql('postgres', q{
SELECT '(' || r.epoch || ',' || r.seq || ')', lake.await_durable(r)::text
FROM lake.cast('o', 'Planning', 'CognitiveWork') r});
$primary->safe_psql('postgres', "SELECT pg_catalog.pg_create_restore_point('with_lake')");

# The abandoned line: a cast sealed and a stage begun after the target.
my ($lost_receipt, $lost) = split /\|/, $primary->safe_psql('postgres', q{
SELECT '(' || r.epoch || ',' || r.seq || ')', lake.await_durable(r)::text
FROM lake.cast('o', 'CognitiveWork', 'Evaluation') r});
my $lost_stage = $primary->safe_psql('postgres', "SELECT lake.begin_append('d', 't', 'op')");
$primary->safe_psql('postgres', 'SELECT pg_catalog.pg_switch_wal()');
my $segment = $primary->safe_psql('postgres',
	'SELECT pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn())');
ok($primary->poll_query_until('postgres',
		"SELECT last_archived_wal >= '$segment' FROM pg_stat_archiver"),
	'the abandoned line is archived');
$primary->stop;

# A restore of the base backup to 'target', promoted at it.
sub restored
{
	my ($name, $target) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init_from_backup($primary, 'before_lake', has_restoring => 1, standby => 0);
	$node->append_conf('postgresql.conf',
		"recovery_target_name = '$target'\nrecovery_target_action = 'promote'");
	$node->start;
	ok($node->poll_query_until('postgres', 'SELECT NOT pg_catalog.pg_is_in_recovery()'),
		"$name: promoted at $target");
	return $node;
}

# Restored to a point after CREATE EXTENSION.
my $with = restored('with_lake', 'with_lake');
ok($with->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'with lake: the worker serves');
is($with->safe_psql('postgres', "SELECT lake.await_durable('$kept_receipt'::lake.receipt)::text"),
	$kept, 'with lake: the receipt sealed before the target answers its coordinate');
my ($state) = sql_error($with, "SELECT lake.await_durable('$lost_receipt'::lake.receipt)");
is($state, 'LK006', 'with lake: the receipt sealed after the target is LK006');
($state) = sql_error($with, "SELECT lake.append_chunk($lost_stage, 0, '\\x01'::bytea)");
is($state, '42704', 'with lake: the stage begun after the target does not exist');
is($with->safe_psql('postgres', "SELECT phase FROM lake.owner_state('o')"),
	'CognitiveWork', 'with lake: the owner is at its state at the target');
$with->stop;

# Restored to a point before CREATE EXTENSION: the extension is created
# again, and its first cast is made.
my $without = restored('without_lake', 'no_lake');
$without->safe_psql('postgres', "CREATE EXTENSION lake; SELECT lake.create_owner('o')");
ok($without->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'without lake: the worker serves the new extension');
my ($new_receipt, $new) = split /\|/, $without->safe_psql('postgres', q{
SELECT '(' || r.epoch || ',' || r.seq || ')', lake.await_durable(r)::text
FROM lake.cast('o', 'Planning', 'CognitiveWork') r});
isnt($new_receipt, $kept_receipt, 'without lake: the new line issues a receipt of its own');
for ([ $kept_receipt, 'sealed before the first target' ], [ $lost_receipt, 'sealed after it' ])
{
	my ($r, $what) = @$_;
	my ($s, $m) = sql_error($without, "SELECT lake.await_durable('$r'::lake.receipt)::text");
	is($s, 'LK006', "without lake: the abandoned line's receipt $what is LK006")
	  or diag("answered: " . ($s eq '' ? $without->safe_psql('postgres',
				"SELECT lake.await_durable('$r'::lake.receipt)::text") : $m));
}
# Dropped and created again while the server runs: the new extension
# starts past this server's epoch, without skipping a timeline's epochs
# again (it did, 4,096 per timeline above 1, at every re-creation: int32
# epochs ran out after a few dozen at high timelines and many partitions).
my $epoch = $without->safe_psql('postgres', 'SELECT epoch FROM lake.stats()');
cmp_ok($epoch, '>', 4096, "without lake: the first epoch on timeline 2 or above skipped ($epoch)");
$without->safe_psql('postgres', 'DROP EXTENSION lake');
$without->safe_psql('postgres', 'CREATE EXTENSION lake');
ok($without->poll_query_until('postgres', "SELECT worker_state = 'serving' AND epoch > $epoch FROM lake.stats()"),
	'dropped and created again: the worker serves a later epoch');
is($without->safe_psql('postgres', 'SELECT epoch FROM lake.stats()'), $epoch + 1,
	'dropped and created again: the next epoch, no second skip');
$without->stop;
done_testing();
