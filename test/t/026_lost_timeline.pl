# A standby promoted without the primary's last WAL (asynchronous
# replication; the same holds for a point-in-time recovery to an earlier
# point) starts a new timeline from an older state. What a client was handed
# on the lost end of the old timeline must never name something else on the
# new one (SPEC §4: "(epoch, seq) never repeats"):
# - the promoted node's epoch skips past every epoch the lost end can have
#   used, so a receipt issued there is LK006 ("cast it again"), never the
#   coordinate of another cast that happens to get the same (epoch, seq);
# - a stage id begun there does not exist (42704) on the new timeline, never
#   another operation's stage, whatever the stage-id sequence says.
# The primary is restarted while the standby is stopped: its new epoch, its
# receipts and its stage ids are the lost end.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $CASTS = 5;

my $primary = lake_node('primary', init => { allows_streaming => 1 });
$primary->start;
$primary->safe_psql(
	'postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_dataset('ds');
SELECT lake.create_owner('lost');
SELECT lake.create_owner('kept');
});
ok($primary->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the primary serves');
$primary->safe_psql('postgres',
	q{SELECT lake.cast_durable('kept', 'Planning', 'CognitiveWork')});

$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->start;
$primary->wait_for_catchup($standby);
my $known = $primary->safe_psql('postgres', 'SELECT epoch FROM lake.stats()');
$standby->stop;

# The lost end: a new worker lifetime, its receipts and a stage.
$primary->restart;
ok($primary->poll_query_until('postgres',
		"SELECT worker_state = 'serving' AND epoch > $known FROM lake.stats()"),
	'the restarted primary serves a new epoch');
my $lost_epoch = $primary->safe_psql('postgres', 'SELECT epoch FROM lake.stats()');
my @phases = ('Planning', 'CognitiveWork', 'Evaluation', 'Commit', 'Planning', 'CognitiveWork');
my @receipts;
for my $i (0 .. $CASTS - 1)
{
	push @receipts, $primary->safe_psql('postgres',
		"SELECT lake.cast('lost', '$phases[$i]', '$phases[$i + 1]')");
}
is($primary->safe_psql('postgres', "SELECT (lake.await_durable('$receipts[-1]')).position"),
	$CASTS, "the lost end sealed its $CASTS casts");
like($receipts[0], qr/^\($lost_epoch,\d+\)$/, "its receipts carry epoch $lost_epoch");
my $lost_stage = $primary->safe_psql('postgres',
	q{SELECT lake.begin_append('ds', 'default', 'lost-op')});
$primary->safe_psql('postgres', "SELECT lake.append_chunk($lost_stage, 0, 'lost bytes')");
$primary->stop('immediate');

# The standby, which has none of it, takes over.
$standby->start;
$standby->promote;
ok($standby->poll_query_until('postgres',
		"SELECT NOT pg_is_in_recovery() AND worker_state = 'serving' AND epoch > 0 FROM lake.stats()"),
	'the promoted standby serves');
my $epoch = $standby->safe_psql('postgres', 'SELECT epoch FROM lake.stats()');
cmp_ok($epoch, '>', $lost_epoch,
	"the promoted node's epoch ($epoch) is past the lost end's ($lost_epoch), which it never saw");

# As many casts on the new timeline as the lost end made, and more.
my @kept = ('CognitiveWork', 'Evaluation', 'Commit', 'Planning', 'CognitiveWork', 'Evaluation', 'Prune');
for my $i (0 .. $#kept - 1)
{
	$standby->safe_psql('postgres', "SELECT lake.cast_durable('kept', '$kept[$i]', '$kept[$i + 1]')");
}
for my $r (@receipts)
{
	my ($state) = sql_error($standby, "SELECT lake.await_durable('$r', 10000)");
	is($state, 'LK006', "receipt $r of the lost end: LK006, not another cast's coordinate");
}
is($standby->safe_psql('postgres', q{SELECT position FROM lake.owner_state('lost')}),
	'0', "the lost end's casts are not there");

my $stage = $standby->safe_psql('postgres', q{SELECT lake.begin_append('ds', 'default', 'new-op')});
isnt($stage, $lost_stage, "a new stage ($stage) does not take the lost end's id ($lost_stage)");
my ($state) = sql_error($standby, "SELECT lake.append_chunk($lost_stage, 0, 'lost bytes')");
is($state, '42704', "the lost end's stage id names no stage");
$standby->safe_psql('postgres', "SELECT lake.append_chunk($stage, 0, 'new bytes')");
is($standby->safe_psql('postgres', "SELECT convert_from(lake.read('ds', lake.commit_append($stage)), 'UTF8')"),
	'new bytes', 'the new stage commits its own bytes');

# A restart on the new timeline advances the epoch by one step, as ever.
$standby->restart;
ok($standby->poll_query_until('postgres',
		"SELECT worker_state = 'serving' AND epoch > $epoch FROM lake.stats()"),
	'a restart on the new timeline serves a new epoch');
is($standby->safe_psql('postgres', 'SELECT epoch FROM lake.stats()'),
	$epoch + 1, 'the same timeline: the next epoch');

done_testing();
