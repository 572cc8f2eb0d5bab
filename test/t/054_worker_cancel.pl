# pg_cancel_backend of lake's worker (a "cancel every backend" script
# catches it too) cancels what it is doing, as it would a session's
# statement, and nothing more:
# - idle, there is nothing to cancel: the worker goes on, same process,
#   same epoch (it used to raise the cancel outside any pass, exit, and be
#   restarted a second later into a new epoch, casts waiting meanwhile);
# - in a recovery waiting for a lock, the attempt is cut short and tried
#   again, as when its lock_timeout runs out: a recovery still under way,
#   for which casts wait (it used to count as a failed recovery, and every
#   cast got 55000 "the worker could not recover them" at once).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('worker_cancel');
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_owner('wc');
});
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the worker serves');

# --- idle ----------------------------------------------------------------------
my ($pid, $epoch, $starts, $reloads) = split /\|/, $node->safe_psql('postgres',
	'SELECT worker_pid, epoch, worker_starts, config_reloads FROM lake.stats()');
# The reload that follows the cancel is served after it, by the same
# worker; a worker that exited instead shows as a new start.
$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid), pg_reload_conf()");
ok($node->poll_query_until('postgres',
		"SELECT config_reloads > $reloads OR worker_starts > $starts FROM lake.stats()"),
	'the worker went on past the cancel');
is($node->safe_psql('postgres', 'SELECT worker_pid, epoch, worker_starts FROM lake.stats()'),
	"$pid|$epoch|$starts", 'an idle worker ignores a cancel: same process, same epoch, no restart');
is($node->safe_psql('postgres', "SELECT (lake.cast_durable('wc', 'Planning', 'CognitiveWork')).position"),
	'1', 'and seals as before');

# --- a recovery waiting for a lock ---------------------------------------------
# The next worker's recovery waits for lake_data.writer, held here; it gives
# up at its lock_timeout and tries again each second until the lock is free.
my $holder = $node->background_psql('postgres');
$holder->query_safe('BEGIN; LOCK TABLE lake_data.writer IN ACCESS EXCLUSIVE MODE;');
$node->safe_psql('postgres', 'SELECT pg_terminate_backend(worker_pid) FROM lake.stats()');
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'lake worker'"
		  . " AND pid <> $pid AND wait_event_type = 'Lock'"),
	'a new worker recovers and waits for the lock');
my ($rpid, $rstarts) = split /\|/, $node->safe_psql('postgres',
	"SELECT pid, (SELECT worker_starts FROM lake.stats()) FROM pg_stat_activity WHERE backend_type = 'lake worker'");
my $log_at = -s $node->logfile;
# Cancelled while it waits. A cancel that crosses the end of that wait (its
# lock_timeout running out) finds it between attempts, where it is
# dropped: then it is sent again, during the next wait.
my $cut_short;
for (1 .. 10)
{
	$node->poll_query_until('postgres',
		"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE pid = $rpid AND wait_event_type = 'Lock'")
	  or last;
	last if defined($cut_short = wait_until(3, sub {
		slurp_file($node->logfile, $log_at) =~ /canceling statement due to user request/ }));
}
ok(defined $cut_short, 'a cancel cut the recovery attempt short');
is($node->safe_psql('postgres', 'SELECT worker_state FROM lake.stats()'), 'recovering',
	'the recovery is still under way, not failed');
my $cast = background($node, "SELECT (lake.cast('wc', 'CognitiveWork', 'Evaluation')).seq > 0");
wait_until(60, sub {
	finished($cast) || $node->safe_psql('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE query LIKE '%''CognitiveWork'', ''Evaluation''%'}
		  . q{ AND wait_event_type = 'Extension'}) eq 't' });
ok(!finished($cast), 'a cast meanwhile waits for the recovery, not refused') or diag($cast->{err});
$holder->query_safe('COMMIT');
$holder->quit;
ok(defined wait_until(60, sub { finished($cast) }), 'the cast ends once the lock is free');
is($cast->{out} . $cast->{err}, "t\n", 'accepted once the owners are recovered');
is($node->safe_psql('postgres', "SELECT worker_pid = $rpid AND worker_starts = $rstarts FROM lake.stats()"),
	't', 'by the same worker: the cancel did not end it');

$node->stop;
done_testing();
