# The functions that must run in a transaction of their own (lake.seal,
# checkpoint, recover, release_owner, rebuild_owner_index) under the
# extended protocol's pipelining. The first statement of a pipeline runs
# outside a transaction block, and a BEGIN later in the same pipeline turns
# that very transaction into one, which can then stay open or be prepared:
# a prepared seal held the sealing lock (nothing sealed until it was
# resolved), and its publication was left to the session's next commit, so
# a ROLLBACK PREPARED left a hole in the log. PostgreSQL's own rule for
# such commands applies: commit right after the statement, and refuse one
# that is not first in its pipeline.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IO::Socket::UNIX;
use LakeTAP;

my $node = lake_node('pipeline',
	conf => "max_prepared_transactions = 2\nlake.cycle_interval = '1h'\nlog_error_verbosity = verbose");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_owner('p1');
SELECT lake.cast('p1', 'Planning', 'CognitiveWork');
});

my $dir = PostgreSQL::Test::Utils::tempdir();

# pgbench_pipeline(name, statements...) -> (exit status, stderr): one
# client runs the statements once, in one pipeline.
sub pgbench_pipeline
{
	my ($name, @statements) = @_;
	my $script = "$dir/$name.sql";
	PostgreSQL::Test::Utils::append_to_file($script,
		join("\n", '\startpipeline', (map { "$_;" } @statements), '\endpipeline') . "\n");
	my ($stdout, $stderr);
	my $ok = IPC::Run::run(
		[ 'pgbench', '-n', '-M', 'extended', '-t', '1', '-f', $script, '-d', $node->connstr('postgres') ],
		'>', \$stdout, '2>', \$stderr);
	return ($ok ? 0 : $? >> 8, $stderr);
}

# A seal first in its pipeline commits at once: the transaction the
# pipeline's BEGIN opens, prepared, holds nothing of lake's.
my ($status, $stderr) = pgbench_pipeline('seal_then_prepare',
	'SELECT lake.seal()', 'BEGIN', "PREPARE TRANSACTION 'after_seal'");
is($status, 0, 'a pipeline with lake.seal() first, then BEGIN and PREPARE, runs') or diag($stderr);
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_prepared_xacts WHERE gid = 'after_seal'"),
	'1', 'its transaction after the seal is prepared');
is($node->safe_psql('postgres', q{SELECT phase || '|' || "position" || '|' || pending FROM lake.owner_state('p1')}),
	'CognitiveWork|1|0', 'the seal was committed and published at once');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM pg_locks l JOIN pg_prepared_xacts p ON l.virtualtransaction = '-1/' || p.transaction
WHERE p.gid = 'after_seal' AND l.locktype NOT IN ('transactionid', 'virtualxid')}),
	'0', 'the prepared transaction holds no lock of lake');
is($node->safe_psql('postgres',
		q{SET statement_timeout = '20s'; SELECT (lake.cast_durable('p1', 'CognitiveWork', 'Evaluation')).position}),
	'2', 'another seal goes ahead while it stays prepared');
$node->safe_psql('postgres', "COMMIT PREPARED 'after_seal'");
is($node->safe_psql('postgres',
		q{SELECT (lake.cast_durable('p1', 'Evaluation', 'Commit')).position}),
	'3', 'and after it is committed');

# Anywhere but first in a pipeline, each is refused (25001) and does nothing.
foreach my $call (
	'lake.seal()', 'lake.checkpoint()', 'lake.recover()',
	"lake.release_owner('p1')", 'lake.rebuild_owner_index()')
{
	(my $function = $call) =~ s/\(.*\)/()/;
	(my $name = $function) =~ s/\W+/_/g;
	$node->safe_psql('postgres', q{SELECT lake.cast('p1', NULL, NULL)});
	my $log_at = -s $node->logfile;
	($status, $stderr) = pgbench_pipeline("second_$name", 'SELECT 1', "SELECT $call");
	isnt($status, 0, "$call second in a pipeline fails");
	like($stderr, qr/\Q$function\E cannot be executed within a pipeline/, "$call: refused as in a pipeline");
	like(slurp_file($node->logfile, $log_at), qr/ERROR:  25001: \Q$function\E cannot be executed within a pipeline/,
		"$call: with 25001 (the server log)");
	is($node->safe_psql('postgres', q{SELECT pending FROM lake.owner_state('p1')}),
		'1', "$call: the pending cast stays pending");
	$node->safe_psql('postgres', 'SELECT lake.seal()');
}

# A row-limited Execute suspends the portal of lake.seal() before the
# commit PreventInTransactionBlock asks for, and a BEGIN before the Sync
# makes its transaction a block (libpq cannot send such an Execute: this
# speaks the protocol itself). The block may stay open as long as the
# client likes, as a lifecycle edit's may; it cannot be prepared.
{
	my $sock = IO::Socket::UNIX->new(Type => SOCK_STREAM(), Peer => $node->host . '/.s.PGSQL.' . $node->port)
	  or die "cannot connect: $!";
	my $send = sub { my ($type, $body) = @_; print $sock $type . pack('N', 4 + length $body) . $body; };
	# Messages up to ReadyForQuery: the SQLSTATEs of errors, and the status.
	my $until_ready = sub {
		my @errors;
		for (;;)
		{
			read($sock, my $head, 5) == 5 or die 'connection lost';
			my ($type, $len) = unpack('a N', $head);
			my $body = '';
			read($sock, $body, $len - 4) if $len > 4;
			push @errors, $1 if $type eq 'E' && $body =~ /C([0-9A-Z]{5})\0/;
			return (\@errors, $body) if $type eq 'Z';
		}
	};
	my $startup = pack('N', 196608) . "user\0" . $node->safe_psql('postgres', 'SELECT current_user') . "\0database\0postgres\0\0";
	print $sock pack('N', 4 + length $startup) . $startup;
	$until_ready->();
	my $extended = sub {
		my ($sql, $max_rows) = @_;
		$send->('P', "\0$sql\0" . pack('n', 0));
		$send->('B', "\0\0" . pack('n n n', 0, 0, 0));
		$send->('E', "\0" . pack('N', $max_rows));
	};
	$node->safe_psql('postgres', q{SELECT lake.cast('p1', NULL, NULL)});
	$extended->('SELECT lake.seal() FROM generate_series(1, 2)', 1);
	$extended->('BEGIN', 0);
	$send->('S', '');
	my ($errors, $status) = $until_ready->();
	is_deeply($errors, [], 'a row-limited Execute of lake.seal(), then BEGIN, runs');
	is($status, 'T', 'and leaves a transaction block open');
	$send->('Q', "PREPARE TRANSACTION 'suspended_seal'\0");
	($errors, $status) = $until_ready->();
	is_deeply($errors, ['0A000'], 'PREPARE TRANSACTION of it is refused (0A000)');
	is($node->safe_psql('postgres', "SELECT count(*) FROM pg_prepared_xacts WHERE gid = 'suspended_seal'"),
		'0', 'nothing is prepared');
	is($node->safe_psql('postgres', q{SELECT pending FROM lake.owner_state('p1')}),
		'1', 'the refused seal gave its cast back');
	$send->('X', '');
	close($sock);
	is($node->safe_psql('postgres',
			q{SET statement_timeout = '20s'; SELECT (lake.cast_durable('p1', NULL, NULL)).position > 0}),
		't', 'and seals go on');
}

# A transaction that took the lock and then dropped the extension is
# refused the same way: the lock is known without the dropped catalog.
my ($drop_state) = sql_error($node, q{
BEGIN;
UPDATE lake_data.lifecycle SET edges = edges WHERE name = 'kanban';
DROP EXTENSION lake CASCADE;
PREPARE TRANSACTION 'dropped';
});
is($drop_state, '0A000', 'PREPARE after a lifecycle edit and DROP EXTENSION is refused (0A000)');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_extension WHERE extname = 'lake'"),
	'1', 'and the extension is still there');

# Only a transaction that took the sealing lock is looked at: PREPARE goes
# on as ever in a database where lake is not installed.
$node->safe_psql('postgres', 'CREATE DATABASE plain');
$node->safe_psql('plain', q{
CREATE TABLE t (i int);
BEGIN;
INSERT INTO t VALUES (1);
PREPARE TRANSACTION 'plain_prepared';
COMMIT PREPARED 'plain_prepared';
});
is($node->safe_psql('plain', 'SELECT count(*) FROM t'), '1',
	'a transaction is prepared and committed where lake is not installed');

# lake.seal() takes the pipeline's first place only when nothing ran before
# it in the transaction: after BEGIN it is refused as in any block.
my $log_at = -s $node->logfile;
($status, $stderr) = pgbench_pipeline('begin_then_seal', 'BEGIN', 'SELECT lake.seal()', 'COMMIT');
isnt($status, 0, 'lake.seal() after BEGIN in a pipeline fails');
like($stderr, qr/lake\.seal\(\) cannot run inside a transaction block/, 'refused inside a transaction block');
like(slurp_file($node->logfile, $log_at), qr/ERROR:  25001: lake\.seal\(\) cannot run inside a transaction block/,
	'... with 25001 (the server log)');

$node->stop;
done_testing();
