# Configuration (SPEC §2, §0): the byte-pair rule at start and at reload,
# per-parameter validation at start, and a library that was not preloaded.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node(
	'config',
	conf => "restart_after_crash = on\n"
	  . "lake.max_stream_bytes = 2MB\n"
	  . "lake.max_buffered_bytes = 1MB");

# Offset of the end of the node's log, for reading only what comes next.
sub log_end { my $f = $_[0]->logfile; return -e $f ? -s $f : 0; }

# The (stream, buffered) pair in force, as lake.admission() shows it.
sub pair
{
	return $node->safe_psql('postgres',
		'SELECT max_stream_bytes, max_buffered_bytes FROM lake.admission()');
}

# Append a payload of $n bytes under a new operation id; the SQLSTATE it
# fails with, or '' when it succeeds.
my $op = 0;
sub append_bytes
{
	my ($n) = @_;
	$op++;
	my ($state) = sql_error($node,
		"SELECT lake.append('ds', 't', 'cfg-$op', decode(repeat('ab', $n), 'hex'))");
	return $state;
}

my $MB = 1024 * 1024;

# --- max_buffered_bytes < max_stream_bytes refuses start -----------------
my $off = log_end($node);
ok(!$node->start(fail_ok => 1),
	'server refuses to start with max_buffered_bytes (1MB) < max_stream_bytes (2MB)');
like(
	slurp_file($node->logfile, $off),
	qr/(?:FATAL|ERROR):[^\n]*lake\.max_buffered_bytes[^\n]*1048576[^\n]*lake\.max_stream_bytes[^\n]*2097152/,
	'the refusal names both parameters and both values');

# --- a valid pair starts ---------------------------------------------------
$node->append_conf('postgresql.conf',
	"lake.max_stream_bytes = 1MB\nlake.max_buffered_bytes = 4MB");
ok($node->start(fail_ok => 1), 'server starts with a valid pair (1MB, 4MB)');
$node->safe_psql('postgres',
	"CREATE EXTENSION lake; SELECT lake.create_dataset('ds');");
is(pair(), "$MB|" . 4 * $MB, 'lake.admission() shows the pair from postgresql.conf');
is(append_bytes(1.5 * $MB), '54000', 'a 1.5MB append exceeds max_stream_bytes = 1MB');
is(append_bytes(1000), '', 'a small append is admitted');

# --- a reload with a bad pair keeps the old pair ---------------------------
$node->append_conf('postgresql.conf',
	"lake.max_stream_bytes = 8MB\nlake.max_buffered_bytes = 2MB");
$off = log_end($node);
$node->reload;
ok( eval {
		$node->wait_for_log(
			qr/WARNING:[^\n]*lake\.max_buffered_bytes[^\n]*2097152[^\n]*lake\.max_stream_bytes[^\n]*8388608/,
			$off);
		1;
	},
	'a reload with max_buffered_bytes (2MB) < max_stream_bytes (8MB) logs a WARNING naming both values'
);
like(
	slurp_file($node->logfile, $off),
	qr/WARNING:[^\n]*keeping lake\.max_stream_bytes = 1048576 and lake\.max_buffered_bytes = 4194304/,
	'the WARNING says which pair stays in force');
is(pair(), "$MB|" . 4 * $MB, 'after the bad reload the old pair (1MB, 4MB) is still in force');
is(append_bytes(1.5 * $MB), '54000',
	'the old stream limit is still enforced (1.5MB refused although the file says 8MB)');

# --- a later good reload takes effect --------------------------------------
$node->append_conf('postgresql.conf',
	"lake.max_stream_bytes = 2MB\nlake.max_buffered_bytes = 8MB");
$node->reload;
ok( $node->poll_query_until(
		'postgres',
		'SELECT max_stream_bytes, max_buffered_bytes FROM lake.admission()',
		2 * $MB . '|' . 8 * $MB),
	'a later good reload (2MB, 8MB) takes effect');
is(append_bytes(1.5 * $MB), '', 'a 1.5MB append is now admitted');
is(append_bytes(3 * $MB), '54000', 'a 3MB append exceeds the new max_stream_bytes = 2MB');

# A stage is measured against the limit in force at its commit: 1.4 MB
# staged under 2MB is refused (54000, no version) once a reload lowers the
# limit to 1MB.
{
	my $stage = $node->safe_psql('postgres', "SELECT lake.begin_append('ds', 't', 'cfg-staged')");
	$node->safe_psql('postgres',
		"SELECT count(lake.append_chunk($stage, i, decode(repeat('ab', 700000), 'hex'))) "
		  . 'FROM generate_series(0, 1) i');
	my $big = "decode(repeat('cd', 1500000), 'hex')";
	my $big_version = $node->safe_psql('postgres', "SELECT lake.append('ds', 't', 'cfg-replay', $big)");
	$node->append_conf('postgresql.conf',
		"lake.max_stream_bytes = 1MB\nlake.max_buffered_bytes = 8MB");
	$node->reload;
	$node->poll_query_until('postgres', 'SELECT max_stream_bytes FROM lake.admission()', $MB)
	  or die 'the 1MB limit did not take effect';
	is((sql_error($node, "SELECT lake.commit_append($stage)"))[0],
		'54000', 'a 1.4 MB stage is refused at commit once the limit is lowered to 1MB');
	is($node->safe_psql('postgres', "SELECT count(*) FROM lake.versions('ds') WHERE operation_id = 'cfg-staged'"),
		'0', 'and makes no version');
	# A retry of an append stored under the higher limit still gets its
	# version (a client that lost the answer must not be told to split it).
	is($node->safe_psql('postgres', "SELECT lake.append('ds', 't', 'cfg-replay', $big)"),
		$big_version, 'a 1.5 MB append stored under 2MB is replayed under the 1MB limit');
	is((sql_error($node, "SELECT lake.append('ds', 't', 'cfg-replay', decode(repeat('ce', 1500000), 'hex'))"))[0],
		'LK001', 'other content under its operation id is a conflict, not 54000');
	is((sql_error($node, "SELECT lake.append('ds', 't', 'cfg-replay-new', $big)"))[0],
		'54000', 'a new operation of that size is refused');
	is($node->safe_psql('postgres', 'SELECT slots_in_use, bytes_reserved FROM lake.admission()'),
		'0|0', 'and no permit is left');
	$node->append_conf('postgresql.conf',
		"lake.max_stream_bytes = 2MB\nlake.max_buffered_bytes = 8MB");
	$node->reload;
	$node->poll_query_until('postgres', 'SELECT max_stream_bytes FROM lake.admission()', 2 * $MB)
	  or die 'the 2MB limit did not come back';
}

# --- a crash restart re-validates the configuration -------------------------
# After a bad reload, the pair in force is the last valid one (2MB, 8MB).
# A crash restart re-creates shared memory from the configuration, which
# still holds the refused pair: it falls back to the pair validated at
# server start (1MB, 4MB) and says so — never to the refused pair.
$node->append_conf('postgresql.conf',
	"lake.max_stream_bytes = 16MB\nlake.max_buffered_bytes = 8MB");
$off = log_end($node);
$node->reload;
ok( eval {
		$node->wait_for_log(
			qr/WARNING:[^\n]*lake\.max_buffered_bytes[^\n]*8388608[^\n]*lake\.max_stream_bytes[^\n]*16777216/,
			$off);
		1;
	},
	'a second bad reload (16MB, 8MB) is refused with a WARNING');
is(pair(), 2 * $MB . '|' . 8 * $MB, 'the last valid pair (2MB, 8MB) stays in force');

my $victim = $node->background_psql('postgres', on_error_stop => 0);
my $victim_pid = $victim->query_safe('SELECT pg_backend_pid()');
$off = log_end($node);
kill 'KILL', $victim_pid;
ok( eval {
		$node->wait_for_log(
			qr/\(PID $victim_pid\) was terminated by signal 9.*database system is ready to accept connections.*WARNING:[^\n]*lake\.max_buffered_bytes/s,
			$off);
		1;
	},
	'crash restart after SIGKILL of a backend; the new worker refuses the bad pair again'
);
$victim->quit;
$node->poll_query_until('postgres', 'SELECT true');
is(pair(), "$MB|" . 4 * $MB,
	'after the crash restart the pair validated at server start (1MB, 4MB) is in force');
like(slurp_file($node->logfile, $off),
	qr/WARNING:[^\n]*using the pair in force at server start/,
	'and the log says the start pair is used');

# --- zero, negative, non-integer, out-of-range values refuse start ---------
# Back to the defaults first, so that only the one bad value is wrong.
$node->append_conf('postgresql.conf',
	"lake.max_stream_bytes = 64MB\nlake.max_buffered_bytes = 256MB");
$node->stop;

my @bad = (
	[ 'lake.max_concurrent_appends', '0', '8' ],
	[ 'lake.max_concurrent_appends', "'eight'", '8' ],
	[ 'lake.admission_queue_wait', "'-5ms'", '100ms' ],
	[ 'lake.max_stream_bytes', '0', '64MB' ],
	[ 'lake.max_stream_bytes', "'4GB'", '64MB' ],
	[ 'lake.max_buffered_bytes', '-1', '256MB' ],
	[ 'lake.compression_level', '20', '3' ],
	[ 'lake.compression_level', '0', '3' ],
	[ 'lake.cycle_interval', '0', '10ms' ],
	[ 'lake.cycle_max_casts', '0', '10000' ],
	[ 'lake.cycle_buffer_size', '0', '16MB' ],
	# A full ring is sealed as one record, which must stay under 1 GB.
	[ 'lake.cycle_buffer_size', "'512MB'", '16MB' ],
	[ 'lake.max_owners', '0', '100000' ],
	[ 'lake.checkpoint_cycles', '-1', '1000' ],
	[ 'lake.checkpoint_cycles', '0', '1000' ],
	[ 'lake.stage_ttl', '0', '1h' ],
	# A name PostgreSQL would cut to 63 bytes, or none: no database to serve.
	[ 'lake.database', "'" . ('d' x 64) . "'", 'postgres' ],
	[ 'lake.database', "''", 'postgres' ],
	# A fraction is refused, not rounded (SPEC §2).
	[ 'lake.max_concurrent_appends', '1.5', '8' ],
	[ 'lake.admission_queue_wait', "'100.5ms'", '100ms' ],
	[ 'lake.max_owners', '99999.5', '100000' ],
);
foreach my $case (@bad)
{
	my ($name, $value, $good) = @$case;

	$node->append_conf('postgresql.conf', "$name = $value");
	$off = log_end($node);
	my $started = $node->start(fail_ok => 1);
	ok(!$started, "server refuses to start with $name = $value");
	like(slurp_file($node->logfile, $off), qr/"\Q$name\E"/,
		"the log names $name");
	if ($started)
	{
		isnt($node->safe_psql('postgres', "SHOW $name"),
			$value =~ s/'//gr, "$name = $value is not in force");
		$node->stop;
	}
	$node->append_conf('postgresql.conf', "$name = $good");
}

# A misspelled name under lake's prefix stops the start as a bad value
# does: PostgreSQL would drop it with a WARNING, and lake would run with a
# default nobody chose.
my $conf = $node->data_dir . '/postgresql.conf';
my $conf_before = slurp_file($conf);
$node->append_conf('postgresql.conf', 'lake.max_concurent_appends = 2');
$off = log_end($node);
my $typo_started = $node->start(fail_ok => 1);
ok(!$typo_started, 'server refuses to start with a misspelled lake.max_concurent_appends');
like(slurp_file($node->logfile, $off),
	qr/unrecognized configuration parameter "lake\.max_concurent_appends"/,
	'the log names the misspelled parameter');
$node->stop if $typo_started;
open(my $fh, '>', $conf) or die "could not write $conf: $!";
print $fh $conf_before;
close($fh);
ok($node->start(fail_ok => 1), 'server starts again once every value is valid');

# --- a reload with a fraction keeps the value in force ---------------------
$node->append_conf('postgresql.conf', "lake.max_concurrent_appends = 2.5");
$off = log_end($node);
$node->reload;
ok( eval {
		$node->wait_for_log(
			qr/invalid value for parameter "lake\.max_concurrent_appends": 2\.5\b/, $off);
		1;
	},
	'a reload with lake.max_concurrent_appends = 2.5 is refused in the log');
is($node->safe_psql('postgres', 'SHOW lake.max_concurrent_appends'),
	'8', 'and the value in force stays 8, not 3 or 2');
$node->append_conf('postgresql.conf', "lake.max_concurrent_appends = 8");
$node->stop;

# --- without shared_preload_libraries: 55000, never a crash ----------------
my $plain = lake_node('nopreload', preload => 0);
$plain->start;
$plain->safe_psql('postgres', 'CREATE EXTENSION lake');
my $plain_pm = $plain->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
$off = log_end($plain);
foreach my $sql (
	'SELECT * FROM lake.admission()',
	'SELECT * FROM lake.stats()',
	"SELECT lake.create_dataset('ds')",
	"SELECT lake.append('ds', 't', 'op', '\\x01'::bytea)",
	"SELECT lake.read('ds', 1)",
	"SELECT * FROM lake.versions('ds')",
	"SELECT lake.read_operation('ds', 't', 'op')",
	"SELECT lake.train_dictionary('ds')",
	"SELECT lake.begin_append('ds', 't', 'op')",
	"SELECT lake.append_chunk(1, 0, '\x01'::bytea)",
	"SELECT lake.commit_append(1)",
	"SELECT lake.abort_append(1)",
	"SELECT lake.grant_tenant('postgres', 't')",
	"SELECT lake.revoke_tenant('postgres', 't')",
	"SELECT lake.define_lifecycle('lc', 'A', '{{A,B}}')",
	"SELECT lake.create_owner('o')",
	"SELECT lake.cast('o', NULL, NULL)",
	"SELECT lake.cast_durable('o', NULL, NULL)",
	"SELECT lake.await_durable('(1,1)')",
	"SELECT * FROM lake.owner_state('o')",
	'SELECT lake.seal()',
	'SELECT lake.checkpoint()',
	'SELECT * FROM lake.recover()',
	"SELECT lake.release_owner('o')",
	'SELECT lake.rebuild_owner_index()',
	"SELECT * FROM lake.trajectory('o')",
	'SELECT * FROM lake.log()',
	'SELECT * FROM lake.cycles()')
{
	my ($state, $msg) = sql_error($plain, $sql);
	is($state, '55000', "without preload: $sql fails with 55000");
	like($msg, qr/shared_preload_libraries/, "without preload: $sql says to preload");
}
is($plain->safe_psql('postgres', 'SELECT 1'), '1', 'the server is still up');
is($plain->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'),
	$plain_pm, 'and did not restart');
unlike(slurp_file($plain->logfile, $off), qr/terminated by signal|PANIC/,
	'no backend crashed');
$plain->stop;

# --- the defaults (SPEC §2), with nothing but the preload set -------------
my $bare = lake_node('defaults', preload => 0, conf => "shared_preload_libraries = 'lake'");
$bare->start;
is( $bare->safe_psql('postgres', q{
SELECT string_agg(name || '=' || current_setting(name), ' ' ORDER BY name) FROM pg_settings
WHERE name IN ('lake.database', 'lake.max_concurrent_appends', 'lake.admission_queue_wait',
               'lake.max_stream_bytes', 'lake.max_buffered_bytes', 'lake.cycle_interval',
               'lake.cycle_max_casts', 'lake.cycle_buffer_size', 'lake.max_owners',
               'lake.checkpoint_cycles', 'lake.stage_ttl', 'lake.compression_level')}),
	# In the parameters' base units: ms, bytes, s.
	'lake.admission_queue_wait=100 lake.checkpoint_cycles=1000 lake.compression_level=3 '
	  . 'lake.cycle_buffer_size=16777216 lake.cycle_interval=10 lake.cycle_max_casts=10000 '
	  . 'lake.database=postgres lake.max_buffered_bytes=268435456 lake.max_concurrent_appends=8 '
	  . 'lake.max_owners=100000 lake.max_stream_bytes=67108864 lake.stage_ttl=3600',
	'every parameter has the default SPEC §2 gives');
$bare->stop;

done_testing();
