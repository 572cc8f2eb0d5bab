# With a synchronous standby named, a seal's commit waits for it whatever
# synchronous_commit the database (or the worker's role) sets: a
# coordinate is acknowledged only once the standby has the cycle, so a
# promotion never loses it. The worker used to force only the local flush:
# with synchronous_commit = local it acknowledged cycles the standby did
# not have yet.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $primary = lake_node('sync_primary', init => { allows_streaming => 1 });
$primary->start;
$primary->safe_psql('postgres', "CREATE EXTENSION lake; SELECT lake.create_owner('s')");
ok($primary->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the primary serves');

my $standby = sync_standby($primary, 'sync_standby');

# The database asks for a local commit only, and the worker starts again
# to take that setting.
$primary->safe_psql('postgres', 'ALTER DATABASE postgres SET synchronous_commit = local');
my $pid = $primary->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()');
$primary->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok( $primary->poll_query_until('postgres',
		"SELECT worker_state = 'serving' AND worker_pid <> $pid FROM lake.stats()"),
	'a new worker serves');
is($primary->safe_psql('postgres',
		"SELECT setting FROM pg_settings WHERE name = 'synchronous_commit'"),
	'local', 'sessions of the database commit locally');

# With the standby gone, a durable cast is not acknowledged ...
$standby->stop;
my $r = $primary->safe_psql('postgres', "SELECT lake.cast('s', 'Planning', 'CognitiveWork')");
is($primary->safe_psql('postgres', "SELECT lake.await_durable('$r'::lake.receipt, 2000) IS NULL"),
	't', 'no coordinate while the synchronous standby is away');

# A replay is as durable as its caller's own commit: an append committed
# locally (the database's setting) is not answered to a caller whose
# commits wait for the standby until the standby has it. It was answered at
# once, and a promotion then gave its number to another operation.
$primary->safe_psql('postgres', "SELECT lake.create_dataset('d')");
my $version = $primary->safe_psql('postgres', "SELECT lake.append('d', 't', 'local', '\\x01'::bytea)");
my ($state, $msg) = sql_error($primary,
	"SET synchronous_commit = on; SET statement_timeout = '2s';
	 SELECT lake.append('d', 't', 'local', '\\x01'::bytea)");
is("$state $msg", "57014 canceling the wait for synchronous replication of what this answer names",
	'a synchronous replay is not answered while the standby lacks the version');
# While it waits it holds no admission permit: one tenant's replays held
# every permit, and every other session's appends were 53000.
my $replayer = $primary->background_psql('postgres', on_error_stop => 0);
$replayer->query_until(qr/start/,
	"\\echo start\nSET synchronous_commit = on;\nSELECT lake.append('d', 't', 'local', '\\x01'::bytea);\n");
ok($primary->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND query LIKE '%lake.append%'"),
	'a replay waits for the synchronous standby');
is($primary->safe_psql('postgres', 'SELECT slots_in_use FROM lake.admission()'),
	'0', 'without holding an admission permit');

# A stage's calls are flushed whatever the session says, but wait for the
# standby only as the session's setting (here the database's local) says:
# forced to wait, they hung past statement_timeout with their locks held.
my (undef, $staged) = $primary->psql('postgres',
	"SELECT count(*) FROM (SELECT lake.append_chunk(lake.begin_append('d', 't', 'staged'), 0, '\\x02'::bytea)) c",
	timeout => 30);
is($staged, '1', 'a stage is begun and fed with the synchronous standby away (synchronous_commit = local)');

# ... until it is back: then the standby has the cycle.
$standby->start;
is($primary->safe_psql('postgres',
		"SET synchronous_commit = on; SELECT lake.append('d', 't', 'local', '\\x01'::bytea)"),
	$version, 'and is answered once the standby is back');
ok($primary->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE wait_event = 'SyncRep'"),
	'and the waiting replay is answered too');
$replayer->quit;
# remote_apply waits, outside a commit, for the standby's flush only: the
# replay is answered while the standby's replay is paused (it was 57014,
# checked against the applied position).
$standby->poll_query_until('postgres', "SELECT count(*) = 1 FROM pg_stat_wal_receiver")
  or die 'the standby does not stream';
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_pause()');
my $applied = $primary->safe_psql('postgres', "SELECT lake.append('d', 't', 'paused', '\\x03'::bytea)");
is($primary->safe_psql('postgres',
		"SET synchronous_commit = remote_apply; SET statement_timeout = '20s';
		 SELECT lake.append('d', 't', 'paused', '\\x03'::bytea)"),
	$applied, 'a remote_apply replay is answered once the standby has flushed the version');
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
my $coord = $primary->safe_psql('postgres', "SELECT lake.await_durable('$r'::lake.receipt)");
like($coord, qr/^\(\d+,1,/, 'the coordinate once the standby confirms');
my ($cycle) = $coord =~ /^\((\d+),/;
ok( $standby->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM lake_data.cycle WHERE cycle = $cycle"),
	'the standby holds the acknowledged cycle');

# A replay waits for the standby to have the commit, not only the row: a
# writer commits locally after the standby has its row and is then gone.
# The replay waited only for the row's page (its hint bit set, or a commit
# position PostgreSQL keeps only for asynchronous commits) and answered at
# once a version a promotion then gave to another operation.
my $writer = $primary->background_psql('postgres');
$writer->query_safe("BEGIN; SELECT lake.append('d', 't', 'row-only', '\\x04'::bytea)");
my $inserted = $writer->query_safe('SELECT pg_current_wal_insert_lsn()');
ok($primary->poll_query_until('postgres',
		"SELECT flush_lsn >= '$inserted' FROM pg_stat_replication WHERE application_name = 'sync_standby'"),
	'the standby has the uncommitted row');
$standby->stop;
$writer->query_safe('COMMIT');
$writer->quit;
($state, $msg) = sql_error($primary,
	"SET synchronous_commit = on; SET statement_timeout = '2s';
	 SELECT lake.append('d', 't', 'row-only', '\\x04'::bytea)");
is("$state $msg", "57014 canceling the wait for synchronous replication of what this answer names",
	'a replay is not answered while the standby has the row but not its commit');
$standby->start;
like($primary->safe_psql('postgres',
		"SET synchronous_commit = on; SELECT lake.append('d', 't', 'row-only', '\\x04'::bytea)"),
	qr/^\d+$/, 'and is answered once the standby is back');

$standby->stop;
$primary->stop;
done_testing();
