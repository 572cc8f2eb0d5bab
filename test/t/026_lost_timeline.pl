# A standby promoted without the primary's last WAL (asynchronous
# replication; the same holds for a point-in-time recovery to an earlier
# point) starts a new timeline from an older state. What a client was handed
# on the lost end of the old timeline must never name something else on the
# new one (SPEC §4: "(epoch, seq) never repeats"):
# - the promoted node's epoch skips past every epoch the lost end can have
#   used, so a receipt issued there is LK006 ("cast it again"), never the
#   coordinate of another cast that happens to get the same (epoch, seq);
# - a stage id begun there does not exist (42704) on the new timeline, never
#   another operation's stage, whatever the stage-id sequence says;
# - a second standby of the same primary, promoted after the first one was
#   lost in turn (timeline 3, from the same writer row as timeline 2), takes
#   an epoch neither the old primary nor the first standby took.
# The primary is restarted while the standbys are stopped: its new epoch,
# its receipts and its stage ids are the lost end.
use strict;
use warnings;

use File::Copy ();
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
my $second = PostgreSQL::Test::Cluster->new('second');
$second->init_from_backup($primary, 'b', has_streaming => 1);
$_->start for $standby, $second;
$primary->wait_for_catchup($_) for $standby, $second;
my $known = $primary->safe_psql('postgres', 'SELECT epoch FROM lake.stats()');
$_->stop for $standby, $second;

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

# A receipt of the first standby's first epoch, then a restart on the new
# timeline, which advances the epoch by one step, as ever.
my @lost2 = ($standby->safe_psql('postgres', q{SELECT lake.cast('lost', 'Planning', 'CognitiveWork')}));
$standby->safe_psql('postgres', "SELECT lake.await_durable('$lost2[0]')");
$standby->restart;
ok($standby->poll_query_until('postgres',
		"SELECT worker_state = 'serving' AND epoch > $epoch FROM lake.stats()"),
	'a restart on the new timeline serves a new epoch');
my $epoch2 = $standby->safe_psql('postgres', 'SELECT epoch FROM lake.stats()');
is($epoch2, $epoch + 1, 'the same timeline: the next epoch');

# The promoted standby is lost in turn, with receipts of both its epochs.
push @lost2, $standby->safe_psql('postgres', q{SELECT lake.cast('kept', NULL, NULL, 'y')});
$standby->safe_psql('postgres', "SELECT lake.await_durable('$lost2[-1]')");
my $history = $standby->data_dir . '/pg_wal/00000002.history';
ok(-f $history, 'the first promotion wrote the history of timeline 2');
$standby->stop('immediate');

# The second standby knows timeline 2 exists (a shared archive would tell
# it; here its history file is copied), so it promotes to timeline 3, from
# the same writer row the first one started from.
File::Copy::copy($history, $second->data_dir . '/pg_wal/00000002.history')
  or die "copy $history: $!";
$second->start;
$second->promote;
ok($second->poll_query_until('postgres',
		"SELECT NOT pg_is_in_recovery() AND worker_state = 'serving' AND epoch > 0 FROM lake.stats()"),
	'the second standby, promoted, serves');
is($second->safe_psql('postgres', 'SELECT substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)'),
	'00000003', 'it is on timeline 3');
my $epoch3 = $second->safe_psql('postgres', 'SELECT epoch FROM lake.stats()');
ok(!grep({ $_ == $epoch3 } $lost_epoch, $epoch, $epoch2),
	"its epoch ($epoch3) is none the lost lines took ($lost_epoch; $epoch, $epoch2)");
# More no-step casts than any lost epoch issued receipts.
$second->safe_psql('postgres',
	q{SELECT count(lake.cast_durable('kept', NULL, NULL, 'x')) FROM generate_series(1, 10)});
for my $r (@receipts, @lost2)
{
	my ($state) = sql_error($second, "SELECT lake.await_durable('$r', 10000)");
	is($state, 'LK006', "receipt $r of a lost line: LK006, not another cast's coordinate");
}

done_testing();
