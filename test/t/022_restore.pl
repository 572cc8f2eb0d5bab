# A database restored from pg_dump into another cluster (lake_data is
# dumped with the extension) carries on from its history:
# - the restore succeeds: the dumped writer epoch is merged into the row
#   CREATE EXTENSION made, and the identity sequences are restored, so new
#   owners get new ids;
# - after the restart that recovers the restored owners, the server seals
#   in an epoch past every restored one: no receipt is issued twice (one
#   was, in a second cycle, and a retried cast waited forever);
# - each cycle keeps its lsn, a position in the source cluster's WAL: a
#   retried idempotent cast and an await of a restored receipt answer with
#   the restored coordinate (the check that a coordinate's lsn is flushed
#   applies to the cycles of this server's live epoch only);
# - a receipt the source issued after the dump (it went on) is LK006 on the
#   restored database, never the coordinate of one of its own casts;
# - the writer row restored before the log: a seal fenced out by the
#   restored head makes the worker recover from the whole log.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $src = lake_node('restore_src');
$src->start;
$src->safe_psql('postgres', 'CREATE EXTENSION lake');
$src->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()")
  or die 'the source worker does not serve';
# Epochs past the destinations' own (each worker start advances it), so a
# restored epoch that is dropped rather than merged shows.
for my $n (2 .. 4)
{
	my $pid = $src->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()');
	$src->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
	$src->poll_query_until('postgres',
		"SELECT worker_state = 'serving' AND worker_pid <> $pid AND epoch = $n FROM lake.stats()")
	  or die "the source worker did not reach epoch $n";
}

# Move the source's WAL well past where a fresh cluster's will be after
# the restore: each switch after a write starts a new 16 MB segment.
for (1 .. 6)
{
	$src->safe_psql('postgres', 'CREATE TABLE IF NOT EXISTS filler (i int); INSERT INTO filler VALUES (1)');
	$src->safe_psql('postgres', 'SELECT pg_switch_wal()');
}
$src->safe_psql('postgres', "SELECT lake.create_owner('r_owner')");
my $coord = $src->safe_psql('postgres',
	"SELECT lake.cast_durable('r_owner', 'Planning', 'CognitiveWork', '\\x01'::bytea, NULL, 'r-op')");
my ($epoch, $seq) = split /\|/,
  $src->safe_psql('postgres',
	"SELECT epoch, seq FROM lake_data.cast_operation WHERE operation_id = 'r-op'");
is($epoch, '4', 'the dumped history is of epoch 4');
my $lsn = $src->safe_psql('postgres', "SELECT (lake.cast_durable('r_owner', 'Planning', 'CognitiveWork', '\\x01'::bytea, NULL, 'r-op')).lsn");

my $dump = $src->basedir . '/lake.dump';
$src->command_ok(
	[ 'pg_dump', '-Fc', '-f', $dump, '-d', $src->connstr('postgres') ],
	'the source database dumps');
# The source goes on after the dump: a new worker lifetime and a sealed
# cast. Its receipt must not name a cast of the restored database, which
# clients may move to (the restore is a fork, as a promotion is).
$src->restart;
$src->poll_query_until('postgres', "SELECT worker_state = 'serving' AND epoch > $epoch FROM lake.stats()")
  or die 'the source worker does not serve again';
my $after_dump = $src->safe_psql('postgres', "SELECT lake.cast('r_owner', 'CognitiveWork', 'Evaluation')");
$src->safe_psql('postgres', "SELECT lake.await_durable('$after_dump')");
$src->stop;

my $dst = lake_node('restore_dst');
$dst->start;
$dst->command_ok(
	[ 'pg_restore', '--exit-on-error', '-d', $dst->connstr('postgres'), $dump ],
	'the dump restores into a fresh cluster without an error');
# The worker served the new extension before the rows came; the merged
# writer epoch makes it recover the restored owners, no restart needed.
ok( $dst->poll_query_until('postgres',
		"SELECT worker_state = 'serving' AND epoch > $epoch FROM lake.stats()"),
	'the worker recovers the restored owners on its own, past their epoch');

ok( $dst->safe_psql('postgres', "SELECT pg_current_wal_flush_lsn() < '$lsn'::pg_lsn") eq 't',
	'the restored cycle\'s lsn lies past this cluster\'s WAL (else this test proves nothing)');

is( $dst->safe_psql('postgres',
		"SELECT lake.cast_durable('r_owner', 'Planning', 'CognitiveWork', '\\x01'::bytea, NULL, 'r-op')"),
	$coord,
	'a retried idempotent cast answers with the restored coordinate');
is( $dst->safe_psql('postgres',
		"SELECT lake.await_durable(ROW($epoch, $seq)::lake.receipt)"),
	$coord,
	'an await of the restored receipt answers with the restored coordinate');
is( $dst->safe_psql('postgres',
		"SELECT string_agg(to_phase, ',' ORDER BY position) FROM lake.trajectory('r_owner')"),
	'CognitiveWork', 'the restored trajectory holds the step once');

# New work on the restored database: new ids, a new epoch's receipts.
$dst->safe_psql('postgres', "SELECT lake.create_owner('r_new')");
is( $dst->safe_psql('postgres',
		"SELECT count(DISTINCT id) FROM lake_data.owner WHERE name IN ('r_owner', 'r_new')"),
	'2', 'a new owner gets a new id');
$dst->safe_psql('postgres',
	"SELECT lake.cast_durable('r_owner', 'CognitiveWork', 'Evaluation')");
is( $dst->safe_psql('postgres',
		"SELECT count(*) FROM lake_data.cycle a JOIN lake_data.cycle b ON a.cycle < b.cycle
		  AND a.epoch = b.epoch AND a.first_seq <= b.last_seq AND b.first_seq <= a.last_seq"),
	'0', 'no receipt is in two cycles');
is( $dst->safe_psql('postgres',
		"SELECT string_agg(to_phase, ',' ORDER BY position) FROM lake.trajectory('r_owner')"),
	'CognitiveWork,Evaluation', 'the restored owner moves on from its restored state');
is( (sql_error($dst, "SELECT lake.await_durable('$after_dump', 10000)"))[0],
	'LK006', "the source's receipt $after_dump, issued after the dump, is LK006 here, not this database's cast");

# A restore over live casts would share their receipts: refused.
$dst->command_fails_like(
	[ 'pg_restore', '--data-only', '--table=writer', '-d', $dst->connstr('postgres'), $dump ],
	qr/cannot take a restored epoch: this database's lake has accepted casts/,
	'a writer epoch restored over live casts is refused');

# A data-only restore with triggers disabled: the writer row cannot be
# merged (its copy fails on the one-row key), yet after the restart the
# epoch passes every restored cycle's.
my $dst2 = lake_node('restore_dst2');
$dst2->start;
$dst2->safe_psql('postgres', 'CREATE EXTENSION lake');
$dst2->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()")
  or die 'the second worker does not serve';
$dst2->command_fails_like(
	[ 'pg_restore', '--data-only', '--disable-triggers', '-d', $dst2->connstr('postgres'), $dump ],
	qr/writer_pkey/, 'the writer row of a trigger-less restore does not merge');
$dst2->restart;
ok( $dst2->poll_query_until('postgres',
		"SELECT worker_state = 'serving' AND epoch > $epoch FROM lake.stats()"),
	'recovery still starts past every restored epoch');
$dst2->safe_psql('postgres', "SELECT lake.cast_durable('r_owner', 'CognitiveWork', 'Evaluation')");
is( $dst2->safe_psql('postgres',
		"SELECT count(*) FROM lake_data.cycle a JOIN lake_data.cycle b ON a.cycle < b.cycle
		  AND a.epoch = b.epoch AND a.first_seq <= b.last_seq AND b.first_seq <= a.last_seq"),
	'0', 'no receipt is in two cycles there either');

# The writer row restored before the cycles (pg_restore -j commits the small
# table first): the recovery its merge starts sees no owners and no log, and
# a cast to a restored owner is then accepted against its initial state. Its
# seal is fenced out (the log's head is past the live one), and it used to
# be refused every second for ever, cast_durable waiting with it. The
# worker now recovers from the whole restored log: the pending cast is lost
# (LK006), the owner is where its log leaves it, and casts go on.
my $dst3 = lake_node('restore_dst3');
$dst3->start;
$dst3->safe_psql('postgres', 'CREATE EXTENSION lake');
$dst3->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()")
  or die 'the third worker does not serve';
$dst3->command_ok(
	[ 'pg_restore', '--data-only', '--table=writer', '-d', $dst3->connstr('postgres'), $dump ],
	'the writer row restores first');
ok( $dst3->poll_query_until('postgres',
		"SELECT worker_state = 'serving' AND epoch > $epoch FROM lake.stats()"),
	'and the worker recovers, with no owner and no log yet');
$dst3->command_ok(
	[
		'pg_restore', '--data-only', '-t', 'owner', '-t', 'cycle', '-t', 'owner_block',
		'-t', 'cast_operation', '-t', 'snapshot', '-d', $dst3->connstr('postgres'), $dump
	],
	'the owners and the log restore after it');
my $offset = -s $dst3->logfile;
my ($state) = sql_error($dst3,
	"SET statement_timeout = '60s'; SELECT lake.cast_durable('r_owner', 'Planning', 'CognitiveWork')");
is($state, 'LK006', 'a cast accepted against the stale state is lost, not waited on for ever');
like(slurp_file($dst3->logfile, $offset),
	qr/pending casts cannot be sealed on the durable log and are lost/,
	'the worker says why');
is($dst3->safe_psql('postgres', "SELECT phase, position, quarantined FROM lake.owner_state('r_owner')"),
	'CognitiveWork|1|f', 'the owner is recovered from the restored log');
is( $dst3->safe_psql('postgres',
		"SELECT (lake.cast_durable('r_owner', 'CognitiveWork', 'Evaluation')).position"),
	'2', 'and casts go on from it');

# A restore into a database of another encoding is refused: names inside
# lake's records (phases, cast operation ids) are bytes in the encoding
# they were written in, which pg_restore converts in the tables and not in
# the records. Restored anyway, owners with non-ASCII phases were
# quarantined and replays of their idempotent casts called their records
# damaged.
# (The source was made by the same initdb as this first destination.)
my $src_enc = $dst->safe_psql('postgres', 'SELECT pg_catalog.getdatabaseencoding()');
my $other = $src_enc eq 'LATIN1' ? 'UTF8' : 'LATIN1';
my $dst4 = lake_node('restore_dst4', conf => "lake.database = 'other_enc'");
$dst4->start;
$dst4->safe_psql('postgres',
	"CREATE DATABASE other_enc ENCODING '$other' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0");
$dst4->command_fails_like(
	[ 'pg_restore', '--single-transaction', '-d', $dst4->connstr('other_enc'), $dump ],
	qr/lake's records were written in a database of encoding "\Q$src_enc\E", and this one's is "$other"/,
	'a restore into a database of another encoding is refused');
is($dst4->safe_psql('other_enc', "SELECT count(*) FROM pg_extension WHERE extname = 'lake'"),
	'0', 'and, in one transaction, leaves nothing of lake there');
# A plain restore loads the writer row last, after the records: they are
# refused on their own, so none is there to be read in the wrong encoding.
$dst4->safe_psql('postgres', 'DROP DATABASE other_enc WITH (FORCE)');
$dst4->safe_psql('postgres',
	"CREATE DATABASE other_enc ENCODING '$other' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0");
$dst4->command_fails_like(
	[ 'pg_restore', '-d', $dst4->connstr('other_enc'), $dump ],
	qr/lake's records were written in a database of encoding "\Q$src_enc\E", and this one's is "$other"/,
	'a plain restore into another encoding refuses the cycle records');
is( $dst4->safe_psql('other_enc',
		'SELECT (SELECT count(*) FROM lake_data.cycle) + (SELECT count(*) FROM lake_data.snapshot)'),
	'0', 'and none of them, nor a snapshot, is there');

done_testing();
