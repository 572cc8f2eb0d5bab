# The wall clock stepped forward past lake.stage_ttl (an NTP correction, a
# virtual machine resumed): a stage's idleness is measured on the wall
# clock, so every stage looked idle and the worker expired uploads a client
# was still sending (the next chunk: 42704, the chunks gone). The worker
# now sees the step against the monotonic clock and expires nothing until
# lake.stage_ttl has passed on the clock as it is now: the upload goes on,
# and a stage that really is abandoned is expired after that.
#
# The server runs with a preloaded library (clock_shift.c, built here) that
# moves its wall clock by the seconds in a file, and not its monotonic one.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $dir = PostgreSQL::Test::Utils::tempdir;
my $so = preload_library($dir, 'clock_shift');
my $shift = "$dir/shift";
append_to_file($shift, '0');

my $node = lake_node('clock_step', conf => "lake.stage_ttl = '5s'");
with_preload($so, { LAKE_CLOCK_SHIFT => $shift }, sub { $node->start });
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_dataset('ds');
});
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the worker serves');

# Expiry works on the unshifted clock: a stage idle for the TTL goes.
my $idle = $node->safe_psql('postgres', q{SELECT lake.begin_append('ds', 'default', 'idle-before')});
ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM lake_data.stage WHERE id = $idle"),
	'an idle stage is expired');

my $upload = $node->safe_psql('postgres', q{SELECT lake.begin_append('ds', 'default', 'upload')});
my $abandoned = $node->safe_psql('postgres', q{SELECT lake.begin_append('ds', 'default', 'abandoned')});
$node->safe_psql('postgres', "SELECT lake.append_chunk($upload, 0, '\\x01'::bytea)");

# One minute forward.
my $offset = -s $node->logfile;
open my $fh, '>', $shift or die;
print $fh '60';
close $fh;
ok($node->wait_for_log(qr/the wall clock stepped forward by (59|60|61) s/, $offset),
	'the worker sees the step');

# The client goes on with its upload.
$node->safe_psql('postgres', "SELECT lake.append_chunk($upload, 1, '\\x02'::bytea)");
is($node->safe_psql('postgres', "SELECT encode(lake.read('ds', lake.commit_append($upload)), 'hex')"),
	'0102', 'the upload under way when the clock stepped is committed whole');

# The stage nobody touched since is expired, lake.stage_ttl after the step.
ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM lake_data.stage WHERE id = $abandoned"),
	'an abandoned stage is still expired, after lake.stage_ttl on the new clock');

# While expiry waits, its passes still count the open stages: after a
# start with lake.stage_ttl = 1h, lake.stats() said 0 for an hour.
$node->safe_psql('postgres',
	q{SELECT lake.begin_append('ds', 'default', 'open-1'), lake.begin_append('ds', 'default', 'open-2')});
$node->append_conf('postgresql.conf', "lake.stage_ttl = '1h'");
with_preload($so, { LAKE_CLOCK_SHIFT => $shift }, sub { $node->restart });
ok($node->poll_query_until('postgres', 'SELECT stages_open = 2 FROM lake.stats()'),
	'lake.stats() counts the open stages while expiry waits after a start');

$node->stop;
done_testing();
