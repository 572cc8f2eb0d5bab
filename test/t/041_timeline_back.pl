# A timeline that goes back: pg_upgrade puts the new cluster on timeline 1
# whatever the old one was on (as does pg_resetwal -l). Stage ids are drawn
# in a range per timeline, so after an asynchronous failover (the lost
# primary on timeline 1, the promoted standby on 2) and such a reset, new
# uploads drew ids from timeline 1's range again, which the lost primary
# had handed out: a client's retried chunk of a lost upload was taken into
# another operation's upload. Now the worker's recovery on a timeline below
# its row's moves the id sequence 2^32 ahead, and until it has, stage ids
# are refused (55000).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $primary = lake_node('primary', init => { allows_streaming => 1 });
$primary->start;
$primary->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_dataset('ds');
});
ok($primary->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the primary serves');
$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->start;
$primary->wait_for_catchup($standby);
$standby->stop;

# The lost end: uploads begun on timeline 1 that the standby never sees,
# more than the 32 values a sequence logs ahead.
my @lost = split /\n/, $primary->safe_psql('postgres',
	q{SELECT lake.begin_append('ds', 'default', 'lost-' || i) FROM generate_series(1, 60) AS i});
is(scalar @lost, 60, 'the lost end began 60 uploads');
$primary->stop('immediate');

$standby->start;
$standby->promote;
ok($standby->poll_query_until('postgres',
		"SELECT NOT pg_is_in_recovery() AND worker_state = 'serving' FROM lake.stats()"),
	'the promoted standby serves');
is($standby->safe_psql('postgres', 'SELECT substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)'),
	'00000002', 'on timeline 2');
$standby->safe_psql('postgres', q{SELECT lake.begin_append('ds', 'default', 'kept-1')});

# pg_upgrade of the promoted node: the new cluster is on timeline 1.
$standby->stop;
my $new = lake_node('new');
my $bindir = $standby->config_data('--bindir');
{
	# pg_upgrade writes its logs into the directory it runs in.
	my $cwd = PostgreSQL::Test::Utils::tempdir;
	chdir $cwd or die;
	command_ok(
		[
			'pg_upgrade', '--no-sync',
			'-d', $standby->data_dir, '-D', $new->data_dir,
			'-b', $bindir, '-B', $bindir,
			'-s', $new->host, '-p', $standby->port, '-P', $new->port
		],
		'pg_upgrade of the promoted node');
}
$new->start;
is($new->safe_psql('postgres', 'SELECT substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)'),
	'00000001', 'the upgraded cluster is on timeline 1');
ok($new->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'its worker recovered');
like(slurp_file($new->logfile), qr/lake: the timeline went back from 2 to 1/,
	'and logged the timeline going back');

# New uploads, as many as it takes to reach the lost ids' values: none is
# one of them, and a chunk retried into a lost upload finds no stage.
my @new = split /\n/, $new->safe_psql('postgres',
	q{SELECT lake.begin_append('ds', 'default', 'after-' || i) FROM generate_series(1, 60) AS i});
my %lost = map { $_ => 1 } @lost;
is(scalar(grep { $lost{$_} } @new), 0, 'no new stage id is one the lost end handed out');
cmp_ok($new[0], '>=', 2**32, "the ids moved past timeline 1's lost range ($new[0])");
my ($state, $msg) = sql_error($new,
	"SELECT lake.append_chunk($lost[-1], 0, '\\xdeadbeef'::bytea)");
is($state, '42704', 'a chunk retried into a lost upload finds no stage') or diag($msg);

# Until the worker has recovered on the timeline it is on, the row keeps
# the higher one it was left with (here set back by hand): ids are refused.
$new->safe_psql('postgres', 'UPDATE lake_data.writer SET timeline = 2');
($state, $msg) = sql_error($new, q{SELECT lake.begin_append('ds', 'default', 'early')});
is($state, '55000', 'a stage id before the recovery on the lower timeline is refused') or diag($msg);
like($msg, qr/timeline 1/, 'naming the timeline');
$new->safe_psql('postgres', 'UPDATE lake_data.writer SET timeline = 1');
like($new->safe_psql('postgres', q{SELECT lake.begin_append('ds', 'default', 'early')}),
	qr/^\d+$/, 'and given once the row is on it');

# A recovery that fails after the skip (here: a registry that does not
# match the log) is tried again every second, and the skip's setval
# outlives each failed try: the tries used up every id in minutes (then
# 2200H for every upload). A skip already made is not made again.
$new->safe_psql('postgres', q{
SELECT lake.create_owner('o');
SELECT lake.cast_durable('o', 'Planning', 'CognitiveWork');
CREATE TABLE o_row AS SELECT * FROM lake_data.owner WHERE name = 'o';
DELETE FROM lake_data.owner WHERE name = 'o';
UPDATE lake_data.writer SET timeline = 2;
});
my $seq_before = $new->safe_psql('postgres', 'SELECT last_value FROM lake_data.blob_seq');
my $offset = -s $new->logfile;
$new->restart;
ok(wait_until(60, sub {
			my $n = () = slurp_file($new->logfile, $offset) =~ /does not match the log/g;
			$n >= 3;
		}),
	'the recovery fails, and is tried again, three times');
my $seq_after = $new->safe_psql('postgres', 'SELECT last_value FROM lake_data.blob_seq');
cmp_ok($seq_after - $seq_before, '<', 2**33, 'the ids skipped once, not once a try');
cmp_ok($seq_after - $seq_before, '>=', 2**32, 'by 2^32 at least');
$new->safe_psql('postgres', 'INSERT INTO lake_data.owner OVERRIDING SYSTEM VALUE SELECT * FROM o_row');
ok($new->poll_query_until('postgres', 'SELECT timeline = 1 FROM lake_data.writer'),
	'with the registry repaired the worker recovers');
like($new->safe_psql('postgres', q{SELECT lake.begin_append('ds', 'default', 'after-repair')}),
	qr/^\d+$/, 'and stage ids are given');

$new->stop;
done_testing();
