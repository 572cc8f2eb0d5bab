# What a synchronous standby has written but not flushed does not count as
# flushed: a replay under synchronous_commit = on is answered only once the
# standbys have flushed its version (README: "written or flushed there", as
# the caller's setting says), and a seal is made synchronous whatever the
# sealing session's synchronous_commit asks (remote_write here), so no
# coordinate is answered while the standby has only written its cycle.
#
# The synchronous "standby" is a pg_receivewal with a replication slot and
# without --synchronous: it reports every WAL byte it wrote at once (-s 1)
# but its flush position only when a segment is complete, so the two stay
# apart until pg_switch_wal(). (No real standby can be held between its
# write and its flush.)
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

# Every session asks for remote_write (a commit under 'on' would wait for
# the receiver's flush, which comes only with a complete segment): the
# worker too.
my $node = lake_node('recv_primary', init => { allows_streaming => 1 },
	conf => "synchronous_commit = remote_write");
$node->start;
$node->safe_psql('postgres',
	"CREATE EXTENSION lake; SELECT lake.create_owner('s'); SELECT lake.create_dataset('d')");
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the node serves');

$node->safe_psql('postgres', "SELECT pg_create_physical_replication_slot('recv', true)");
my $dir = $node->basedir . '/received';
mkdir $dir or die "mkdir $dir: $!";
my ($out, $err) = ('', '');
my $recv = IPC::Run::start(
	[ 'pg_receivewal', '-D', $dir, '--slot=recv', '-s', '1', '-n', '-d',
	  'host=' . $node->host . ' port=' . $node->port . ' application_name=recv' ],
	'>', \$out, '2>', \$err);
$node->safe_psql('postgres', q{
ALTER SYSTEM SET synchronous_standby_names = 'recv';
SELECT pg_reload_conf();});
ok($node->poll_query_until('postgres',
		"SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = 'recv'"),
	'the receiver is a synchronous standby');

# A replay under synchronous_commit = on answers only once the standbys
# have flushed the version (README: "written or flushed there"); under
# remote_write, once they have written it.
my $version = $node->safe_psql('postgres',
	"SET synchronous_commit = off; SELECT lake.append('d', 't', 'written', '\\x01'::bytea)");
my $lsn = $node->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
ok($node->poll_query_until('postgres',
		"SELECT write_lsn >= '$lsn' AND flush_lsn < '$lsn' FROM pg_stat_replication WHERE application_name = 'recv'"),
	'the receiver has written the version, not flushed it');
my ($state, $msg) = sql_error($node,
	"SET synchronous_commit = on; SET statement_timeout = '3s';
	 SELECT lake.append('d', 't', 'written', '\\x01'::bytea)");
is("$state $msg", "57014 canceling the wait for synchronous replication of what this answer names",
	'a replay under synchronous_commit = on is not answered while the standby has only written the version');
is($node->safe_psql('postgres',
		"SET synchronous_commit = remote_write; SET statement_timeout = '30s';
		 SELECT lake.append('d', 't', 'written', '\\x01'::bytea)"),
	$version, 'a replay under remote_write is answered once the standby has written it');

# A seal waits for the standbys' flush even where the worker's sessions
# ask for remote_write only (the worker runs with the node's remote_write): no coordinate while the receiver has the
# cycle written, not flushed.
my $r = $node->safe_psql('postgres', "SELECT lake.cast('s', 'Planning', 'CognitiveWork')");
is($node->safe_psql('postgres', "SELECT lake.await_durable('$r'::lake.receipt, 10000) IS NULL"),
	't', 'no coordinate while the standby has the cycle written, not flushed');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"),
	'1', 'the seal waits for the standby');
# A complete segment is flushed: the seal is released.
$node->safe_psql('postgres', 'SELECT pg_switch_wal()');
like($node->safe_psql('postgres', "SELECT lake.await_durable('$r'::lake.receipt, 60000)"),
	qr/^\(\d+,1,/, 'the coordinate once the standby has flushed the cycle');

$recv->kill_kill;
$node->stop;
done_testing();
