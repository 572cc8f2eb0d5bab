# Staged appends under crashes, memory bounds and expiry (SPEC §3, §6):
# - a backend killed with SIGKILL in the middle of commit_append (after it
#   wrote the version, before its transaction committed; and while it
#   waits for the dataset's append lock) leaves no version and the stage as
#   it was, which then commits; every version reads back and verifies;
# - committing a 256 MB stage takes no more backend memory than a 16 MB one
#   (within 2x): the commit streams chunk by chunk;
# - the worker expires stages idle longer than lake.stage_ttl, with their
#   chunks, and leaves committed versions alone.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use LakeTAP;

my $node = lake_node(
	'stage',
	conf => "restart_after_crash = on\n"
	  . "shared_buffers = '16MB'\n"
	  . "lake.max_stream_bytes = '300MB'\n"
	  . "lake.max_buffered_bytes = '600MB'\n"
	  # window 2 holds a commit on the dataset lock until it kills it: a
	  # 100 ms bound could refuse the commit before the poll saw it wait
	  . "lake.admission_queue_wait = '10min'\n");
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_dataset('ds');
-- chunk(tag, i): 1 MB that compresses well, different for every (tag, i).
CREATE FUNCTION chunk(tag text, i int) RETURNS bytea LANGUAGE sql IMMUTABLE AS
$$ SELECT convert_to(repeat(md5(tag || i), 32768), 'UTF8') $$;
});

# Open a stage for op and upload n 1 MB chunks; returns the stage id.
sub upload
{
	my ($op, $n) = @_;
	my $stage = $node->safe_psql('postgres', "SELECT lake.begin_append('ds', 't', '$op')");
	$node->safe_psql('postgres',
		"SELECT count(lake.append_chunk($stage, i, chunk('$op', i))) "
		  . "FROM generate_series(0, $n - 1) i");
	return $stage;
}

sub expected_digest
{
	my ($op, $n) = @_;
	return $node->safe_psql('postgres',
		"SELECT sha256(string_agg(chunk('$op', i), ''::bytea ORDER BY i)) "
		  . "FROM generate_series(0, $n - 1) i");
}

# Every version is 1..n, reads back whole and matches its digest.
sub lineage_ok
{
	my ($what) = @_;
	is( $node->safe_psql(
			'postgres', q{
SELECT coalesce(count(*) = max(version), true)
   AND coalesce(bool_and(digest = sha256(lake.read('ds', version))), true)
FROM lake.versions('ds')}),
		't',
		"$what: every version reads back and verifies");
}

sub wait_restarted
{
	my ($what) = @_;
	ok($node->poll_query_until('postgres', 'SELECT 1', '1'),
		"$what: the server is back after the crash");
}

sub versions_of
{
	my ($op) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM lake.versions('ds') WHERE operation_id = '$op'");
}

# --- Crash window 1: the version is written, the transaction not committed.
{
	my $stage = upload('crash-1', 3);
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	$s->query_safe('BEGIN');
	my $v = $s->query_safe("SELECT lake.commit_append($stage)");
	is($v, '1', 'window 1: the commit wrote version 1 inside its open transaction');
	is(versions_of('crash-1'), '0', 'window 1: nobody else sees it yet');

	kill 'KILL', $pid;
	$s->{run}->kill_kill;
	wait_restarted('window 1');

	is(versions_of('crash-1'), '0', 'window 1: after the crash there is no version');
	is( $node->safe_psql('postgres',
			"SELECT count(*) FROM lake_data.stage WHERE id = $stage"),
		'1', 'window 1: the stage is still open');
	is( $node->safe_psql('postgres',
			"SELECT count(*) FROM lake_data.chunk WHERE blob = $stage"),
		'3', 'window 1: its three chunks are intact');
	is($node->safe_psql('postgres', "SELECT lake.commit_append($stage)"),
		'1', 'window 1: the stage commits again as version 1');
	is( $node->safe_psql('postgres',
			"SELECT digest FROM lake.versions('ds') WHERE operation_id = 'crash-1'"),
		expected_digest('crash-1', 3),
		'window 1: the version holds exactly the uploaded chunks');
	lineage_ok('window 1');
}

# --- Crash window 2: the commit waits for the dataset's append lock.
{
	my $stage = upload('crash-2', 2);
	my $holder = $node->background_psql('postgres', on_error_stop => 0);
	$holder->query_safe('BEGIN');
	$holder->query_safe("SELECT lake.append('ds', 't', 'holder', '\\x01'::bytea)");

	my $c = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $c->query_safe('SELECT pg_backend_pid()');
	$c->query_until(qr/^$/, "SELECT lake.commit_append($stage);\n");
	ok( $node->poll_query_until(
			'postgres',
			"SELECT count(*) > 0 FROM pg_locks WHERE pid = $pid AND NOT granted"),
		'window 2: the commit waits for the append lock');

	kill 'KILL', $pid;
	$c->{run}->kill_kill;
	$holder->{run}->kill_kill;
	wait_restarted('window 2');

	is(versions_of('crash-2'), '0', 'window 2: no version for the staged operation');
	is(versions_of('holder'), '0', 'window 2: nor for the other open append');
	is($node->safe_psql('postgres', "SELECT count(*) FROM lake_data.chunk WHERE blob = $stage"),
		'2', 'window 2: the stage keeps its chunks');
	is($node->safe_psql('postgres', "SELECT lake.commit_append($stage)"),
		'2', 'window 2: the stage then commits as the next version');
	lineage_ok('window 2');
}

# --- Memory: a commit streams; 256 MB costs what 16 MB costs.
sub commit_peak_kb
{
	my ($op, $n) = @_;
	my $stage = upload($op, $n);
	my $s = $node->background_psql('postgres');
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	my $before = status_kb($pid, 'VmHWM');
	$s->query_safe("SELECT lake.commit_append($stage)");
	my $after = status_kb($pid, 'VmHWM');
	$s->quit;
	note("$op: $n MB stage, backend peak RSS $before kB before, $after kB after commit");
	return $after;
}

# A field of a process's /proc status, in kB.
sub status_kb
{
	my ($pid, $field) = @_;
	my $status = slurp_file("/proc/$pid/status");
	$status =~ /^$field:\s+(\d+) kB/m or die "no $field for $pid";
	return $1;
}

{
	my $small = commit_peak_kb('mem-16', 16);
	my $large = commit_peak_kb('mem-256', 256);
	cmp_ok($large, '<', 2 * $small,
		"commit peak memory: 256 MB stage ($large kB) within 2x of 16 MB ($small kB)");
	cmp_ok($large, '<', 128 * 1024,
		'commit of a 256 MB stage peaks well below the stage size');
	is( $node->safe_psql('postgres',
			"SELECT bytes FROM lake.versions('ds') WHERE operation_id = 'mem-256'"),
		256 * 1024 * 1024,
		'the 256 MB version is complete');
	is( $node->safe_psql('postgres',
			"SELECT digest FROM lake.versions('ds') WHERE operation_id = 'mem-256'"),
		expected_digest('mem-256', 256),
		'and its digest is the SHA-256 of the uploaded chunks');
}

# A chunk larger than the kept buffer is encoded with a zstd context of its
# own, which zstd allocates outside PostgreSQL's memory contexts: it is
# dropped after the chunk, so no backend keeps its size for good.
{
	my $s = $node->background_psql('postgres');
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	my $stage = $s->query_safe("SELECT lake.begin_append('ds', 't', 'large-chunk')");
	# A small chunk first: the backend's ordinary context and buffer exist.
	$s->query_safe("SET lake.compression_level = 19; SELECT lake.append_chunk($stage, 0, '\\x01'::bytea)");
	my $before = status_kb($pid, 'VmSize');
	# 8 MiB, compressible (incompressible data is stored raw, without zstd), one chunk.
	$s->query_safe("SELECT lake.append_chunk($stage, 1, "
		  . "(SELECT string_agg(int4send(i), '') FROM generate_series(1, 2097152) i))");
	my $after = status_kb($pid, 'VmSize');
	cmp_ok($after - $before, '<', 32 * 1024,
		"the large chunk's zstd context is not kept ($before kB -> $after kB)");
	$s->query_safe("SELECT lake.abort_append($stage)");
	$s->quit;
}

# --- Expiry: idle stages go, with their chunks; committed versions stay.
# The stage row goes at once (a client coming back finds no stage, not one
# with holes); its 40 MB of chunks go in two transactions (32 MB at most
# each): the worker seals between them, however much was abandoned.
{
	my $idle = upload('idle', 40);
	my $log_at = -s $node->logfile;
	my $kept = $node->safe_psql('postgres', 'SELECT count(*) FROM lake_data.chunk');
	my $before = $node->safe_psql('postgres', 'SELECT stages_expired FROM lake.stats()');
	# A stage that gets a chunk at every look stays: only idleness expires.
	my $busy = $node->safe_psql('postgres', "SELECT lake.begin_append('ds', 't', 'busy')");
	my $busy_chunks = 0;
	$node->append_conf('postgresql.conf', "lake.stage_ttl = '1s'");
	$node->reload;
	# The expiry pass runs every quarter of the TTL (at least every second):
	# a TTL lowered by a reload takes effect at once, not after the pass
	# the old TTL had scheduled (up to a minute later).
	my $took = wait_until(
		15,
		sub {
			$node->safe_psql('postgres', "SELECT lake.append_chunk($busy, " . $busy_chunks++ . ", '\\x01')");
			$node->safe_psql('postgres', "SELECT count(*) FROM lake_data.stage WHERE id = $idle") eq '0';
		});
	ok(defined $took && $took < 5,
		'the worker expires a stage idle longer than lake.stage_ttl, within seconds of the reload')
	  or diag('took ' . ($took // 'over 15') . ' s');
	is($node->safe_psql('postgres', "SELECT count(*) FROM lake_data.chunk WHERE blob = $busy"),
		$busy_chunks, "a stage busy all along is kept, with its $busy_chunks chunks");
	$node->safe_psql('postgres', "SELECT lake.abort_append($busy)");
	is((sql_error($node, "SELECT lake.append_chunk($idle, 40, '\\x01'::bytea)"))[0],
		'42704', 'a client coming back finds no stage');
	ok($node->poll_query_until('postgres',
			"SELECT count(*) = 0 FROM lake_data.chunk WHERE blob = $idle"),
		'its chunks go');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM lake_data.chunk'),
		$kept - 40, 'and no other chunk');
	# The worker logs a batch after its transaction commits: the chunks can
	# be gone before the line is written. Wait for the line.
	my $log = '';
	wait_until(60, sub { $log = substr(slurp_file($node->logfile), $log_at); $log =~ /expired 0 idle stages/ });
	like($log, qr/expired 1 idle stages \(32 chunks\), more to come/,
		'in batches: the stage and 32 chunks first');
	like($log, qr/expired 0 idle stages \(8 chunks\)$/m, 'then its last 8, and nothing more to come');
	ok($node->poll_query_until('postgres', 'SELECT count(*) = 0 FROM lake_data.blob_gone'),
		'and nothing is left to remove');
	ok( $node->poll_query_until(
			'postgres', "SELECT stages_expired > $before FROM lake.stats()"),
		'lake.stats() counts the expired stage');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM lake_data.stage'),
		'0', 'no stage is left open');
	lineage_ok('after expiry');
}

# A large staged chunk is compressed in steps that take interrupts: at
# zstd's slowest level (lake.compression_level is any role's to set) a
# 16 MB chunk used to hold its call, with its permit and its stage's lock,
# past statement_timeout for half a minute. The payload is made first, so
# only the call is timed.
$node->safe_psql('postgres', q{
CREATE TABLE slow_chunk AS
SELECT convert_to(string_agg(md5(i::text), ''), 'UTF8') AS b FROM generate_series(1, 500000) i;
});
my $slow = $node->safe_psql('postgres', "SELECT lake.begin_append('ds', 't', 'slow-chunk')");
my $t0 = Time::HiRes::time();
my ($slow_state) = sql_error($node,
	"SET lake.compression_level = 19; SET statement_timeout = '1s';
	 SELECT lake.append_chunk($slow, 0, b) FROM slow_chunk");
my $slow_secs = Time::HiRes::time() - $t0;
is($slow_state, '57014', 'statement_timeout ends a chunk being compressed at level 19');
cmp_ok($slow_secs, '<', 10, "within seconds ($slow_secs s), not when the compression ends");
is($node->safe_psql('postgres', 'SELECT slots_in_use, bytes_reserved FROM lake.admission()'),
	'0|0', 'and its permit is released');

# A stage id is handed out only once its stage is durable. begin_append
# draws it from lake_data.blob_seq, whose WAL record covers 32 values; a
# session committing with synchronous_commit = off used to get the id
# before that record was flushed, a crash took the stage and the
# sequence's advance back, and the next begin_append, of another
# operation, got the same id: the first client's chunks and commit then
# went into the other operation's stage. setval leaves the sequence at
# the point where the next nextval writes its record; the WAL writer is
# made slow so that nothing else flushes it before the crash.
$node->safe_psql('postgres', q{
ALTER SYSTEM SET wal_writer_delay = '10s';
SELECT pg_reload_conf();
SELECT setval('lake_data.blob_seq', pg_sequence_last_value('lake_data.blob_seq'));
});
my $async = $node->safe_psql('postgres',
	"SET synchronous_commit = off; SELECT lake.begin_append('ds', 't', 'async-begin')");
$node->stop('immediate');
$node->start;
my $other = $node->safe_psql('postgres', "SELECT lake.begin_append('ds', 't', 'after-crash')");
isnt($other, $async, 'a stage id begun asynchronously is not given again after a crash');
is($node->safe_psql('postgres',
		"SELECT operation_id FROM lake_data.stage WHERE id = $async"),
	'async-begin', 'and it still names the stage it was given for');
# Likewise a chunk (SPEC §3: durable once the caller's transaction
# commits): a crash after an asynchronous commit used to take it back, and
# a commit without a digest then made a version of the chunks before it.
$node->safe_psql('postgres',
	"SET synchronous_commit = off; SELECT lake.append_chunk($async, 0, '\\x0a0b')");
$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres',
		"SELECT chunks FROM lake_data.stage WHERE id = $async"),
	'1', 'a chunk stored asynchronously is still there after a crash');
# And an abort: taken back, it brought the stage back with the chunks its
# client was told were dropped, and the operation's next begin_append
# resumed it (a commit without a digest then kept a dropped chunk).
$node->safe_psql('postgres', "SET synchronous_commit = off; SELECT lake.abort_append($async)");
$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres', "SELECT count(*) FROM lake_data.stage WHERE id = $async"),
	'0', 'a stage aborted asynchronously stays aborted after a crash');
$node->safe_psql('postgres', q{
ALTER SYSTEM RESET wal_writer_delay;
SELECT pg_reload_conf();
});

$node->stop;

done_testing();
