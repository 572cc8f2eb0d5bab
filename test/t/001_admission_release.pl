# Admission permits are released however the holding backend ends
# (SPEC §3 Admission): cancel, terminate (FATAL), a FATAL the backend raises
# itself, and SIGKILL with crash restart. After each, the counters are back
# to zero, the interrupted operation left no version and no partial lineage,
# a replay from a fresh session succeeds and converges, and another session
# takes the freed slot (max_concurrent_appends = 1).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes;
use LakeTAP;

my $node = lake_node(
	'admission',
	conf => "restart_after_crash = on\n"
	  . "lake.max_concurrent_appends = 1\n"
	  . "lake.admission_queue_wait = '100ms'");
$node->start;

# payload(tag, n): n * 32 bytes that do not compress, the same for the same
# tag; 40000 gives 1,280,000 bytes, two stored chunks.
my $N       = 40000;
my $BYTES   = 32 * $N;
$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION lake;
SELECT lake.create_dataset('ds');
CREATE FUNCTION payload(tag text, n int) RETURNS bytea LANGUAGE sql IMMUTABLE AS
\$\$ SELECT string_agg(sha256(convert_to(tag || ':' || i, 'UTF8')), ''::bytea ORDER BY i)
   FROM generate_series(1, n) i \$\$;
SELECT lake.append('ds', 't', 'base-1', '\\x01'::bytea);
SELECT lake.append('ds', 't', 'base-2', payload('base-2', $N));
SELECT lake.append('ds', 't', 'base-3', decode(repeat('00', 3000000), 'hex'));
});

sub usage
{
	return $node->safe_psql('postgres',
		'SELECT slots_in_use, bytes_reserved FROM lake.admission()');
}

# Every version reads back whole and matches its digest and size, versions
# are 1..n without gaps: no partial lineage anywhere in the dataset.
sub lineage_ok
{
	my ($what) = @_;
	my $res = $node->safe_psql(
		'postgres', q{
SELECT count(*) = max(version)
   AND bool_and(digest = sha256(lake.read('ds', version)))
   AND bool_and(bytes = length(lake.read('ds', version)))
FROM lake.versions('ds')});
	is($res, 't', "$what: every version reads whole and matches its digest");
}

# After the holder of op is gone: no version for op, intact lineage; then a
# replay from a fresh session creates exactly one version and a second
# replay returns the same one.
sub check_after
{
	my ($what, $op) = @_;

	ok( $node->poll_query_until(
			'postgres',
			'SELECT slots_in_use, bytes_reserved FROM lake.admission()', '0|0'),
		"$what: slots_in_use and bytes_reserved return to 0");
	is( $node->safe_psql('postgres',
			"SELECT count(*) FROM lake.versions('ds') WHERE operation_id = '$op'"),
		'0', "$what: the interrupted operation has no version");
	lineage_ok($what);

	my $max = $node->safe_psql('postgres', "SELECT max(version) FROM lake.versions('ds')");
	my $v1 = $node->safe_psql('postgres',
		"SELECT lake.append('ds', 't', '$op', payload('$op', $N))");
	is($v1, $max + 1, "$what: a replay from a fresh session takes the slot and creates the next version");
	my $v2 = $node->safe_psql('postgres',
		"SELECT lake.append('ds', 't', '$op', payload('$op', $N))");
	is($v2, $v1, "$what: a second replay converges on the same version");
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*), bool_and(digest = sha256(payload('$op', $N))) "
			  . "FROM lake.versions('ds') WHERE operation_id = '$op'"),
		'1|t', "$what: exactly one version of the operation, with the payload's digest");
	is(usage(), '0|0', "$what: nothing held after the replays");
}

# A session that appends op in an open transaction and then sleeps in
# pg_sleep: it holds the only slot and the payload's bytes.
sub start_holder
{
	my ($what, $op, $sleeper) = @_;
	my $h   = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $h->query_safe('SELECT pg_backend_pid()');

	$h->query_safe($sleeper->{setup}) if $sleeper && $sleeper->{setup};
	$h->query_safe('BEGIN');
	my $v = $h->query_safe("SELECT lake.append('ds', 't', '$op', payload('$op', $N))");
	like($v, qr/^\d+$/, "$what: the holder appended (uncommitted version $v)");
	if ($sleeper)
	{
		$h->query_until(qr/blocking/, "\\echo blocking\n$sleeper->{sql};\n");
		ok( $node->poll_query_until('postgres',
				"SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $pid"),
			"$what: the holder is blocked in $sleeper->{sql}");
	}
	else
	{
		$h->query_until(qr/sleeping/, "\\echo sleeping\nSELECT pg_sleep(600);\n");
		ok( $node->poll_query_until('postgres',
				"SELECT wait_event = 'PgSleep' FROM pg_stat_activity WHERE pid = $pid"),
			"$what: the holder sleeps in pg_sleep");
	}
	is(usage(), "1|$BYTES", "$what: the holder holds one slot and the payload's $BYTES bytes");
	my ($state, $msg) = sql_error($node,
		"SELECT lake.append('ds', 't', 'contender', '\\x02'::bytea)");
	is("$state $msg", '53000 append admission limit reached',
		"$what: another session cannot get the slot meanwhile");
	return ($h, $pid);
}

# A session whose backend was ended under it: its psql sees the connection
# go and exits; reap it without writing to its closed input.
sub end_lost_session
{
	my ($what, $h) = @_;
	ok( pump_until(
			$h->{run}, $h->{timeout}, \$h->{stderr},
			qr/server closed the connection unexpectedly|connection to server was lost/),
		"$what: the holder's client lost its connection");
	eval { $h->{run}->finish; };
}

sub pid_gone
{
	my ($pid) = @_;
	return $node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid");
}

# --- (a) pg_cancel_backend ---------------------------------------------------
{
	my $what = 'cancel';
	my ($h, $pid) = start_holder($what, 'op-cancel');
	$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
	ok( $node->poll_query_until('postgres',
			"SELECT state FROM pg_stat_activity WHERE pid = $pid",
			'idle in transaction (aborted)'),
		"$what: the holder's transaction is aborted, the session lives on");
	check_after($what, 'op-cancel');
	ok( pump_until(
			$h->{run}, $h->{timeout}, \$h->{stderr},
			qr/ERROR:\s+canceling statement due to user request/),
		"$what: the holder's client got the cancel error");
	$h->{stderr} = '';
	my ($out, $ret) = $h->query('ROLLBACK');
	is($ret, 0, "$what: the cancelled session rolls back cleanly");
	is($h->query_safe("SELECT count(*) FROM lake.versions('ds') WHERE operation_id = 'op-cancel'"),
		'1', "$what: the cancelled session sees the replayed version");
	$h->quit;
}

# --- (b) pg_terminate_backend (FATAL) -------------------------------------
{
	my $what = 'terminate';
	my ($h, $pid) = start_holder($what, 'op-terminate');
	my $off = -s $node->logfile;
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
	ok(pid_gone($pid), "$what: the holder is gone");
	like(slurp_file($node->logfile, $off),
		qr/\[$pid\][^\n]*FATAL:\s+terminating connection due to administrator command/,
		"$what: the holder ended with FATAL");
	check_after($what, 'op-terminate');
	end_lost_session($what, $h);
}

# --- (c) a FATAL the backend raises itself: idle-in-transaction timeout ----
# The holder first blocks on an advisory lock (so the checks run while it
# still holds its permit), then goes idle in its transaction and is ended
# by idle_in_transaction_session_timeout.
{
	my $what = 'idle timeout';
	my $locker = $node->background_psql('postgres');
	$locker->query_safe('SELECT pg_advisory_lock(4242)');
	my ($h, $pid) = start_holder(
		$what, 'op-idle',
		{
			setup => "SET idle_in_transaction_session_timeout = '1s'",
			sql   => 'SELECT pg_advisory_xact_lock(4242)'
		});
	my $off = -s $node->logfile;
	$locker->query_safe('SELECT pg_advisory_unlock(4242)');
	ok(pid_gone($pid), "$what: the holder is gone");
	like(slurp_file($node->logfile, $off),
		qr/\[$pid\][^\n]*FATAL:\s+terminating connection due to idle-in-transaction timeout/,
		"$what: the holder ended with FATAL");
	check_after($what, 'op-idle');
	$h->quit;
	$locker->quit;
}

# --- a sleeping waiter takes the slot the moment it is freed ----------------
# With a long queue wait, a second append waits on the condition variable;
# cancelling or terminating the holder must wake it, not let it time out.
$node->append_conf('postgresql.conf', "lake.admission_queue_wait = '60s'");
$node->reload;
ok($node->poll_query_until('postgres', 'SHOW lake.admission_queue_wait', '60000'),
	'admission_queue_wait is now 60s');
foreach my $end ('pg_cancel_backend', 'pg_terminate_backend')
{
	my $what = "waiter ($end)";
	my $op   = "op-wait-$end";
	my $h    = $node->background_psql('postgres', on_error_stop => 0);
	my $pid  = $h->query_safe('SELECT pg_backend_pid()');
	$h->query_safe('BEGIN');
	$h->query_safe("SELECT lake.append('ds', 't', '$op', payload('$op', $N))");
	$h->query_until(qr/sleeping/, "\\echo sleeping\nSELECT pg_sleep(600);\n");
	ok( $node->poll_query_until('postgres',
			"SELECT wait_event = 'PgSleep' FROM pg_stat_activity WHERE pid = $pid"),
		"$what: the holder sleeps in pg_sleep");

	my $w     = $node->background_psql('postgres', on_error_stop => 0);
	my $wpid  = $w->query_safe('SELECT pg_backend_pid()');
	my ($waited, $rejected) = split /\|/,
	  $node->safe_psql('postgres', 'SELECT waited, rejected FROM lake.admission()');
	$w->query_until(qr/waiting/,
		"\\echo waiting\nSELECT lake.append('ds', 't', 'w-$end', '\\x03'::bytea);\n\\echo appended\n");
	ok( $node->poll_query_until(
			'postgres',
			"SELECT a.waited > $waited AND s.wait_event_type = 'Extension' "
			  . "FROM lake.admission() a, pg_stat_activity s WHERE s.pid = $wpid"),
		"$what: the second append sleeps waiting for admission");

	my $t0 = Time::HiRes::time();
	$node->safe_psql('postgres', "SELECT $end($pid)");
	my $out = $w->query_until(qr/appended/, '');
	my $took = Time::HiRes::time() - $t0;
	like($out, qr/^\d+\n/, "$what: the waiter got the freed slot and appended");
	cmp_ok($took, '<', 30, "$what: woken by the release (${took}s), not by its 60s timeout");
	is($node->safe_psql('postgres', 'SELECT rejected FROM lake.admission()'),
		$rejected, "$what: the waiter was not counted as rejected");
	ok($node->poll_query_until('postgres',
			'SELECT slots_in_use, bytes_reserved FROM lake.admission()', '0|0'),
		"$what: nothing held afterwards");
	$w->quit;
	if ($end eq 'pg_terminate_backend') { end_lost_session($what, $h); }
	else { $h->quit; }
}
$node->append_conf('postgresql.conf', "lake.admission_queue_wait = '100ms'");
$node->reload;
ok($node->poll_query_until('postgres', 'SHOW lake.admission_queue_wait', '100'),
	'admission_queue_wait is back to 100ms');

# --- (d) SIGKILL: crash restart ---------------------------------------------
{
	my $what = 'SIGKILL';
	my ($h, $pid) = start_holder($what, 'op-kill');
	my $off = -s $node->logfile;
	kill 'KILL', $pid;
	ok( eval {
			$node->wait_for_log(
				qr/server process \(PID $pid\) was terminated by signal 9.*all server processes terminated; reinitializing.*database system is ready to accept connections/s,
				$off);
			1;
		},
		"$what: the server crash-restarted");
	ok($node->poll_query_until('postgres', 'SELECT true'), "$what: the server accepts connections again");
	check_after($what, 'op-kill');
	end_lost_session($what, $h);
}

done_testing();
