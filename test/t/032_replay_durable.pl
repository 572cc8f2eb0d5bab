# A replay acknowledges a version as durably as the caller's own commit
# would (SPEC §3): its writer may have committed with synchronous_commit =
# off, which makes the version visible before its commit is flushed. A
# synchronous caller told the version by a replay used to lose it to a
# crash, and the number went to another operation. The replay now flushes
# the writer's commit first. The WAL writer is slowed to its 10 s maximum,
# so nothing else flushes the asynchronous commit before the crash.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('replay_durable',
	conf => "wal_writer_delay = '10s'\nwal_writer_flush_after = 0\nrestart_after_crash = on\n");
$node->start;
$node->safe_psql('postgres', "CREATE EXTENSION lake; SELECT lake.create_dataset('d')");
$node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()")
  or die 'the worker does not serve';
# A checkpoint now, so none is due during the test.
$node->safe_psql('postgres', 'CHECKPOINT');

# Whether a round's asynchronous commit was still unflushed when the replay
# came: a round whose commit something else flushed first cannot fail.
my $proving = 0;
for my $round (1 .. 3)
{
	my $op = "async-$round";
	my $version = $node->safe_psql('postgres',
		"SET synchronous_commit = off; SELECT lake.append('d', 't', '$op', '\\x01'::bytea)");
	my ($insert, $flush) = split /\|/, $node->safe_psql('postgres',
		'SELECT pg_current_wal_insert_lsn(), pg_current_wal_flush_lsn()');
	$proving++ if $insert ne $flush;
	is( $node->safe_psql('postgres', "SELECT lake.append('d', 't', '$op', '\\x01'::bytea)"),
		$version, "round $round: a synchronous replay answers the asynchronous append's version");
	$node->stop('immediate');
	$node->start;
	my (undef, $read) = $node->psql('postgres', "SELECT lake.read_operation('d', 't', '$op')");
	is( $read, '\\x01', "round $round: after a crash the version is there"
		  . ($insert eq $flush ? ' (the commit was flushed anyway: this round proves nothing)' : ''));
	is( $node->safe_psql('postgres',
			"SELECT count(*) FROM lake.versions('d') WHERE operation_id = '$op' AND version = $version"),
		'1', "round $round: with its number");
}

# The same once the row's committed hint bit is set: PostgreSQL sets it on
# an unflushed asynchronous commit as soon as the page's LSN is past the
# commit's (a later write on the page, another clog LSN group), and the
# replay used to take the hint for a flush. Forty transactions put the
# second append's commit in another group; a read of the versions sets the
# hint. The WAL writer is stopped meanwhile (it would flush full pages),
# and killed for the crash.
{
	my $walwriter = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'");
	kill 'STOP', $walwriter;
	my $version = $node->safe_psql('postgres',
		"SET synchronous_commit = off; SELECT lake.append('d', 't', 'hinted', '\\x0a0a'::bytea)");
	$node->safe_psql('postgres',
		join('', map { "SET synchronous_commit = off; SELECT txid_current();\n" } 1 .. 40)
		  . "SET synchronous_commit = off; SELECT lake.append('d', 't', 'hinted-next', '\\x0c0c'::bytea);\n"
		  . "SELECT count(*) FROM lake.versions('d');\n");
	my ($insert, $flush) = split /\|/, $node->safe_psql('postgres',
		'SELECT pg_current_wal_insert_lsn(), pg_current_wal_flush_lsn()');
	$proving++ if $insert ne $flush;
	is( $node->safe_psql('postgres', "SELECT lake.append('d', 't', 'hinted', '\\x0a0a'::bytea)"),
		$version, 'a synchronous replay of a hinted row answers its version');
	kill 'KILL', $walwriter;
	$node->poll_query_until('postgres',
		"SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'walwriter' AND pid <> $walwriter")
	  or die 'the server did not restart after the crash';
	my (undef, $read) = $node->psql('postgres', "SELECT lake.read_operation('d', 't', 'hinted')");
	is( $read, '\\x0a0a', 'after a crash the hinted version is there'
		  . ($insert eq $flush ? ' (the commit was flushed anyway: this proves nothing)' : ''));
	is( $node->safe_psql('postgres',
			"SELECT count(*) FROM lake.versions('d') WHERE operation_id = 'hinted' AND version = $version"),
		'1', 'with its number');
}
cmp_ok($proving, '>=', 1, 'at least one replay came before its asynchronous commit was flushed');

# A call on a stage already committed is refused (55000) naming the version
# the stage became: that answer too names what another transaction
# committed, maybe asynchronously, so it is made as durable first.
my $staged_proving = 0;
for my $round (1 .. 3)
{
	my $op = "staged-$round";
	my $stage = $node->safe_psql('postgres', "SELECT lake.begin_append('d', 't', '$op')");
	$node->safe_psql('postgres', "SELECT lake.append_chunk($stage, 0, '\\x0e0e'::bytea)");
	my $version = $node->safe_psql('postgres',
		"SET synchronous_commit = off; SELECT lake.commit_append($stage)");
	my ($insert, $flush) = split /\|/, $node->safe_psql('postgres',
		'SELECT pg_current_wal_insert_lsn(), pg_current_wal_flush_lsn()');
	$staged_proving++ if $insert ne $flush;
	my ($state, $msg) = sql_error($node, "SELECT lake.append_chunk($stage, 0, '\\x0e0e'::bytea)");
	is("$state $msg", "55000 stage $stage is already committed as version $version of dataset \"d\"",
		"staged round $round: a synchronous call on the committed stage names its version");
	$node->stop('immediate');
	$node->start;
	is( $node->safe_psql('postgres',
			"SELECT count(*) FROM lake.versions('d') WHERE operation_id = '$op' AND version = $version"),
		'1', "staged round $round: after a crash the version it named is there"
		  . ($insert eq $flush ? ' (the commit was flushed anyway: this round proves nothing)' : ''));
}
cmp_ok($staged_proving, '>', 0, 'at least one staged round crashed with the commit unflushed');

done_testing();
