# A seal's commit waits for the synchronous standbys; PostgreSQL lets a
# cancel or a termination cut that wait, with a warning, the transaction
# committed locally. The seal's waiters must not be answered then: a
# coordinate is acknowledged only once the standbys have its cycle. They
# were: a pg_cancel_backend or pg_terminate_backend of the worker during the
# wait handed out coordinates the standby did not have, which a promotion
# would then lose. Now a cancel is waited through, and after a termination
# the next worker recovers (its own commit waiting for the standbys) before
# the receipts are answered from the durable log.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $primary = lake_node('cut_primary', init => { allows_streaming => 1 });
$primary->start;
$primary->safe_psql('postgres', "CREATE EXTENSION lake; SELECT lake.create_owner('o')");
ok($primary->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the primary serves');

my $standby = sync_standby($primary, 'cut_standby');
like($primary->safe_psql('postgres', "SELECT lake.cast_durable('o', 'Planning', 'CognitiveWork')"),
	qr/^\(\d+,1,/, 'a durable cast is answered while the standby is there');

# The standby goes away: the next seal's commit waits for it.
$standby->stop;
my $worker_waits = q{SELECT count(*) = 1 FROM pg_stat_activity
	WHERE backend_type = 'lake worker' AND wait_event = 'SyncRep'};
my $cast = background($primary, "SELECT lake.cast_durable('o', 'CognitiveWork', 'Evaluation')");
ok($primary->poll_query_until('postgres', $worker_waits), "the seal waits for the standby");

# A cancel of the worker cuts PostgreSQL's wait; the seal waits again.
my $offset = -s $primary->logfile;
my $pid = $primary->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()');
$primary->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
ok($primary->wait_for_log(qr/canceling wait for synchronous replication due to user request/, $offset),
	"PostgreSQL's wait was cut");
ok(defined wait_until(60, sub {
			finished($cast) || $primary->safe_psql('postgres', $worker_waits) eq 't' }),
	'the worker waits again, or the durable cast was answered');
ok(!finished($cast), 'the durable cast is not answered after the cancel')
  or diag("answered: $cast->{out}$cast->{err}");
is($primary->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()'), $pid,
	'by the same worker');
ok($primary->log_contains(qr/lake keeps waiting for the synchronous standbys/, $offset),
	'the worker says it keeps waiting');
# A cast accepted while the seal waits, after its cut: lost if the seal is
# terminated (README), as in a crash.
my $later = $primary->safe_psql('postgres', "SELECT lake.cast('o', 'Evaluation', 'Commit')");

# Whether the client is still waiting once a worker ('which': an SQL
# condition on lake.stats()) waits for the standby in its recovery.
sub unanswered_while_recovery_waits
{
	my ($client, $which, $what) = @_;
	(my $query = $client->{sql}) =~ s/'/''/g;

	ok(defined wait_until(60, sub {
				finished($client) || $primary->safe_psql('postgres',
					"SELECT $which AND worker_state = 'recovering' FROM lake.stats()") eq 't'
				  && $primary->safe_psql('postgres', $worker_waits) eq 't' }),
		"$what: a worker waits for the standby in its recovery, or the client was answered");
	ok(!finished($client) && $primary->poll_query_until('postgres',
			"SELECT count(*) = 1 FROM pg_stat_activity WHERE state = 'active' AND query = '$query'")
		  && !defined wait_until(2, sub { finished($client) }),
		"$what: the client waits, unanswered")
	  or diag("answered: $client->{out}$client->{err}");
}

# Terminates worker 'pid' while it waits for the standby; then a worker
# that is none of 'gone' waits for the standby in its recovery, and the
# durable cast is still not answered. Returns the log offset before.
sub terminate_waiting_worker
{
	my ($pid, $what, @gone) = @_;
	my $offset = -s $primary->logfile;

	$primary->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
	ok($primary->wait_for_log(qr/canceling the wait for synchronous replication and terminating connection/, $offset),
		"$what: PostgreSQL's wait was cut");
	unanswered_while_recovery_waits($cast, 'worker_pid NOT IN (' . join(',', @gone) . ')', $what);
	return $offset;
}

# A termination cuts it too: that worker leaves without answering, and the
# next one's recovery commits, waiting for the standby in turn.
my $terminated = terminate_waiting_worker($pid, 'the seal terminated', $pid);
ok($primary->log_contains(qr/(was|were) not published: its seal.s commit is durable here but not yet on the synchronous standbys/, $terminated),
	'the leaving worker says what it did not publish');

# The recovery's commit is cut the same way: that worker leaves without
# ending the recovery (which would answer the receipt from the log), and
# the next one recovers again.
my $second = $primary->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()');
terminate_waiting_worker($second, 'the recovery terminated', $pid, $second);

# The standby is back: the cast is answered, and the standby has its cycle.
$standby->start;
ok(defined wait_until(120, sub { finished($cast) }), 'the durable cast is answered once the standby is back');
like($cast->{out}, qr/^\(\d+,2,[0-9A-F]+\/[0-9A-F]+\)$/, 'with its coordinate, the next position')
  or diag($cast->{err});
my ($cycle, $lsn) = $cast->{out} =~ /^\((\d+),2,(\S+)\)$/;
ok($standby->poll_query_until('postgres', "SELECT count(*) = 1 FROM lake_data.cycle WHERE cycle = $cycle"),
	'the standby holds the acknowledged cycle');
ok($primary->log_contains(qr/the 1 cast of cycle $cycle is durable but was not published; it is answered from the durable log/, $terminated),
	'the next worker says so');
ok($primary->log_contains(qr/lake worker: 1 pending casts cannot be sealed on the durable log and are lost/, $terminated),
	'and gives up as lost only the cast accepted after the cut');
my ($lost) = sql_error($primary, "SELECT lake.await_durable('$later'::lake.receipt)");
is($lost, 'LK006', 'whose receipt is LK006');

# A session's own lake.seal() is published the same way. The worker seals
# only when asked, so the session's seal is the one that waits.
my $reloads = $primary->safe_psql('postgres', 'SELECT config_reloads FROM lake.stats()');
$primary->safe_psql('postgres', "ALTER SYSTEM SET lake.cycle_interval = '1h'; SELECT pg_reload_conf()");
ok($primary->poll_query_until('postgres', "SELECT config_reloads > $reloads FROM lake.stats()"),
	'the worker seals once an hour');
$standby->stop;
my $receipt = $primary->safe_psql('postgres', "SELECT lake.cast('o', 'Evaluation', 'Commit')");
my $sealer = background($primary, 'SELECT lake.seal()');
my $session_waits = q{SELECT count(*) = 1 FROM pg_stat_activity
	WHERE query = 'SELECT lake.seal()' AND wait_event = 'SyncRep'};
ok($primary->poll_query_until('postgres', $session_waits), "the session's seal waits for the standby");
$pid = $primary->safe_psql('postgres', "SELECT pid FROM pg_stat_activity WHERE query = 'SELECT lake.seal()'");
$offset = -s $primary->logfile;
$primary->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
ok($primary->wait_for_log(qr/lake keeps waiting for the synchronous standbys/, $offset),
	'a cancel of it is waited through');
ok($primary->poll_query_until('postgres', $session_waits), 'it waits again');
is($primary->safe_psql('postgres', "SELECT lake.await_durable('$receipt'::lake.receipt, 0) IS NULL"),
	't', 'its cast is not durable yet');
$primary->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok($primary->wait_for_log(qr/the 1 cast of cycle \d+ was not published/, $offset),
	'terminated, it publishes nothing');
ok(defined wait_until(60, sub { finished($sealer) }), 'and leaves');
# The live states are behind the durable log now: the worker recovers at
# once (it seals only once an hour here), and nothing is applied to them
# meanwhile: lake.recover() waits for that recovery. It applied the
# unpublished cycle to the live state, which a promotion would then lose.
ok($primary->poll_query_until('postgres',
		"SELECT worker_state = 'recovering' FROM lake.stats()")
	  && $primary->poll_query_until('postgres', $worker_waits),
	'the worker recovers at once, waiting for the standby');
my ($state) = sql_error($primary, "SET statement_timeout = '1s'; SELECT * FROM lake.recover('o')");
is($state, '57014', 'lake.recover() waits for that recovery meanwhile');
my $awaiter = background($primary, "SELECT lake.await_durable('$receipt'::lake.receipt)");
unanswered_while_recovery_waits($awaiter, 'true', "the worker's recovery waits");
$standby->start;
ok(defined wait_until(120, sub { finished($awaiter) }), 'it is answered once the standby is back');
like($awaiter->{out}, qr/^\(\d+,3,[0-9A-F]+\/[0-9A-F]+\)$/, 'with its coordinate')
  or diag($awaiter->{err});

is($primary->safe_psql('postgres',
		"SELECT string_agg(position || ':' || to_phase, ',' ORDER BY position) FROM lake.trajectory('o')"),
	'1:CognitiveWork,2:Evaluation,3:Commit', 'each cast landed once, gap-free');
is($primary->safe_psql('postgres', "SELECT applied FROM lake.recover('o')"),
	'0', 'recovery applies nothing');

# A reload that names no synchronous standby ends PostgreSQL's wait
# without cutting it: the seal is published, and its cast answered (the
# asynchronous guarantee, README).
$standby->stop;
my $before = $primary->safe_psql('postgres', 'SELECT worker_pid || \' \' || epoch FROM lake.stats()');
$cast = background($primary, "SELECT lake.cast_durable('o', 'Commit', 'Planning')");
ok($primary->poll_query_until('postgres', $worker_waits), 'a seal waits for the standby away');
ok(!defined wait_until(1, sub { finished($cast) }), 'its durable cast waits');
$primary->safe_psql('postgres',
	"ALTER SYSTEM RESET synchronous_standby_names; SELECT pg_reload_conf()");
ok(defined wait_until(60, sub { finished($cast) }),
	'no synchronous standby named: the durable cast is answered');
like($cast->{out}, qr/^\(\d+,4,[0-9A-F]+\/[0-9A-F]+\)$/, 'with its coordinate')
  or diag($cast->{err});
is($primary->safe_psql('postgres', 'SELECT worker_pid || \' \' || epoch FROM lake.stats()'),
	$before, 'by the worker that waited, in its epoch: its seal published, no recovery');

$primary->stop;
done_testing();
