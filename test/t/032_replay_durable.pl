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
	conf => "wal_writer_delay = '10s'\nwal_writer_flush_after = 0\n");
$node->start;
$node->safe_psql('postgres', "CREATE EXTENSION lake; SELECT lake.create_dataset('d')");
$node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()")
  or die 'the worker does not serve';
# A checkpoint now, so none is due during the test.
$node->safe_psql('postgres', 'CHECKPOINT');

for my $round (1 .. 3)
{
	my $op = "async-$round";
	my $version = $node->safe_psql('postgres',
		"SET synchronous_commit = off; SELECT lake.append('d', 't', '$op', '\\x01'::bytea)");
	my ($insert, $flush) = split /\|/, $node->safe_psql('postgres',
		'SELECT pg_current_wal_insert_lsn(), pg_current_wal_flush_lsn()');
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

done_testing();
