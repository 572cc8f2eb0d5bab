# A clean stop keeps the casts it finds pending (SPEC §1: LK006 is a
# receipt lost with a crash; §4: each cast gets a durable coordinate once
# its cycle is sealed). The open cycle waits for lake.cycle_interval (an
# hour here), so the casts below are pending in shared memory when the
# stop comes; the worker seals them on its SIGTERM before it leaves:
# - after a fast and after a smart stop and a start, every receipt answers
#   its coordinate, positions run gap-free, lake.recover() applies nothing;
# - pg_terminate_backend of the worker alone: they are sealed before it
#   exits; and while its seal waits for a lock it still leaves within a
#   second (the seal cut short), the casts kept for the next worker;
# - with a synchronous standby, the seal at a fast stop waits for it, and
#   the receipts answer their coordinates; with the standby away the
#   worker closes the door and seals, the timer cuts the seal's wait (the
#   stop does not hang), the seal is left unpublished, and its casts are
#   answered after the start; terminated alone, it loses nothing either.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use LakeTAP;

# WAL senders allowed: a synchronous standby can be named (the last part).
my $node = lake_node('clean_stop',
	init => { allows_streaming => 1 },
	conf => "lake.cycle_interval = 1h");
$node->start;
$node->safe_psql('postgres', "CREATE EXTENSION lake; SELECT lake.create_owner('o')");

# Three fire-and-forget casts; their receipts as "epoch,seq".
sub cast_three
{
	my @r = split /\n/, $node->safe_psql('postgres', q{
SELECT r.epoch || ',' || r.seq
FROM generate_series(1, 3) i, LATERAL lake.cast('o', NULL, NULL, pg_catalog.int4send(i)) r
ORDER BY i});
	is($node->safe_psql('postgres', 'SELECT casts_pending FROM lake.stats()'),
		'3', 'three casts are pending');
	# Asleep between seals, where a SIGTERM waits for its seal (not in a
	# pass of its own, where it is die() at once).
	ok($node->poll_query_until('postgres', q{
SELECT wait_event = 'Extension' FROM pg_stat_activity WHERE backend_type = 'lake worker'}),
		'the worker sleeps between seals');
	return @r;
}

# Each receipt's position (await_durable), or its error's SQLSTATE.
sub positions
{
	my @p;
	for my $r (@_)
	{
		my ($e, $s) = split /,/, $r;
		my ($state) = sql_error($node,
			"SELECT lake.await_durable(($e, $s)::lake.receipt, 10000)");
		push @p, $state ne '' ? $state : $node->safe_psql('postgres',
			"SELECT position FROM lake.await_durable(($e, $s)::lake.receipt, 10000)");
	}
	return join(' ', @p);
}

my $landed = 0;
for my $mode ('fast', 'smart')
{
	my @r = cast_three();
	my $t0 = time();
	$node->stop($mode);
	cmp_ok(time() - $t0, '<', 10, "$mode stop: done within seconds");
	$node->start;
	is(positions(@r), join(' ', map { $landed + $_ } 1 .. 3),
		"$mode stop: every receipt answers its coordinate after the start");
	$landed += 3;
	is($node->safe_psql('postgres',
		"SELECT count(*) || ' ' || max(position) || ' ' || pg_catalog.string_agg(position::text, ',' ORDER BY position) FROM lake.trajectory('o')"),
		"$landed $landed " . join(',', 1 .. $landed),
		"$mode stop: the trajectory runs gap-free");
	is($node->safe_psql('postgres', 'SELECT coalesce(sum(applied), 0) FROM lake.recover()'),
		'0', "$mode stop: recovery applies nothing afterwards");
}

# The worker alone: it seals before it exits. The postmaster starts
# another a second later, which would seal them too ("sealing before
# recovery"): the cycle holding them was sealed before that one started.
{
	my @r   = cast_three();
	my $pid = $node->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()');
	$node->safe_psql('postgres', "SELECT pg_catalog.pg_terminate_backend($pid)");
	ok(defined wait_until(30, sub { !kill(0, $pid) }), 'terminated worker: it exits');
	ok($node->poll_query_until('postgres',
			"SELECT worker_state = 'serving' AND worker_pid NOT IN (0, $pid) FROM lake.stats()"),
		'terminated worker: a new one serves');
	is(positions(@r), join(' ', map { $landed + $_ } 1 .. 3),
		'terminated worker: every receipt answers its coordinate');
	my ($e, $s) = split /,/, $r[-1];
	is( $node->safe_psql('postgres', qq{
SELECT c.sealed_at < s.worker_started_at
FROM lake.cycles() c, lake.stats() s
WHERE c.cycle = (SELECT cycle FROM lake.await_durable(($e, $s)::lake.receipt))}),
		't', 'terminated worker: it sealed them itself, before it left');
	$landed += 3;
}

# The worker terminated while its seal waits for a lock (a session holds
# the cycle table): it leaves within a second all the same (SPEC §6), the
# seal and the seals before exit cut short by the timer its SIGTERM armed;
# the next worker seals the casts once the lock is gone.
{
	my @r = cast_three();
	my $holder = $node->background_psql('postgres');
	$holder->query_safe('BEGIN; LOCK TABLE lake_data.cycle IN SHARE MODE');
	my $pid = $node->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()');
	# A waiter has the worker seal at once: it waits for the lock.
	my ($e, $s) = split /,/, $r[-1];
	my $waiter = background($node, "SELECT lake.await_durable(($e, $s)::lake.receipt, 60000)");
	ok($node->poll_query_until('postgres',
			"SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $pid"),
		'held lock: the worker\'s seal waits for it');
	my $t0 = time();
	kill 'TERM', $pid;
	my $gone = wait_until(30, sub { !kill(0, $pid) });
	ok(defined $gone, 'held lock: the terminated worker exits');
	cmp_ok($gone // 99, '<', 1.0,
		sprintf('held lock: ... within a second (%.3f s)', $gone // 99));
	$holder->query_safe('COMMIT');
	$holder->quit;
	ok(defined wait_until(60, sub { finished($waiter) }), 'held lock: the waiter is answered');
	like($waiter->{out}, qr/^\(\d+,\d+,/, 'held lock: ... with its coordinate');
	is(positions(@r), join(' ', map { $landed + $_ } 1 .. 3),
		'held lock: every receipt answers its coordinate');
	$landed += 3;
}

# A synchronous standby: the seals before the stop wait for it, as every
# seal does. The postmaster keeps its WAL senders up until the backends and
# the worker have left, so the standby still answers: the casts pending at
# a fast stop are sealed (they were lost, LK006, while lake left at once
# whenever a synchronous standby was named).
my $standby = sync_standby($node, 'clean_stop_standby');
{
	my @r = cast_three();
	my $t0 = time();
	$node->stop('fast');
	cmp_ok(time() - $t0, '<', 10, 'synchronous standby: a fast stop is done within seconds');
	$node->start;
	is(positions(@r), join(' ', map { $landed + $_ } 1 .. 3),
		'synchronous standby: every receipt answers its coordinate after the start');
	$landed += 3;
	$node->wait_for_catchup($standby, 'replay');
	is($standby->safe_psql('postgres', 'SELECT max(position) FROM lake.trajectory(\'o\')'),
		$landed, 'synchronous standby: it has the cycle sealed at the stop');
}

# The synchronous standby away: the worker closes the door (casts arriving
# now would be accepted against states the seal moves past, and lost with
# it if the timer cuts its wait) and seals; the timer cuts the seal's wait,
# so the stop is quick, and the seal is left unpublished, committed here:
# after the start, its casts are answered from the durable log once the
# recovery's commit has the standby's answer.
$standby->stop;
{
	my @r = cast_three();
	my $t0 = time();
	my $log = -s $node->logfile;
	$node->stop('fast');
	cmp_ok(time() - $t0, '<', 10, 'synchronous standby away: a fast stop does not wait for it');
	ok($node->log_contains(qr/were not published: its seal.s commit is durable here but not yet on the synchronous standbys/, $log),
		'synchronous standby away: the seal at the stop was left unpublished');
	$node->start;
	# Still named: the start's recovery waits for it.
	$standby->start;
	is(positions(@r), join(' ', map { $landed + $_ } 1 .. 3),
		'synchronous standby away: every receipt answers its coordinate after the start');
	$landed += 3;
}

# The worker terminated alone, the standby away, the served database
# committing locally (a seal waits for the standbys all the same, so the
# worker looks for them whatever its own synchronous_commit says): the
# casts pending are sealed, unpublished, and a cast arriving while that
# seal waits is held back until the next worker's recovery. Once the standby is
# back, every receipt answers its coordinate. The casts accepted while a
# seal at the termination waited were lost (LK006).
{
	my $pid = $node->safe_psql('postgres', q{
ALTER DATABASE postgres SET synchronous_commit = local;
SELECT worker_pid FROM lake.stats()});
	$node->safe_psql('postgres', "SELECT pg_catalog.pg_terminate_backend($pid)");
	ok($node->poll_query_until('postgres',
			"SELECT worker_state = 'serving' AND worker_pid NOT IN (0, $pid) FROM lake.stats()"),
		'a worker of a database that commits locally serves');
}
$standby->stop;
{
	my @r   = cast_three();
	my $pid = $node->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()');
	my $log = -s $node->logfile;
	# gdb holds the worker where its seal's commit starts to wait for the
	# standby, the door already closed.
	my $g = gdb_hold($pid, 'SyncRepWaitForLSN');
	$node->safe_psql('postgres', "SELECT pg_catalog.pg_terminate_backend($pid)");
	ok(gdb_stopped($g), "terminated alone, standby away: its seal's commit waits for the standby")
	  or diag("gdb: $g->{out}");
	my $late = background($node, q{
SELECT r.epoch || ',' || r.seq FROM lake.cast('o', NULL, NULL, '\x02'::bytea) r});
	ok(!defined wait_until(1, sub { finished($late) }),
		'terminated alone, standby away: a cast made meanwhile is held back')
	  or diag("answered: $late->{out}$late->{err}");
	gdb_let_go($g);
	ok(defined wait_until(30, sub { !kill(0, $pid) }), 'terminated alone, standby away: the worker has left');
	ok($node->log_contains(qr/were not published: its seal.s commit is durable here but not yet on the synchronous standbys/, $log),
		'terminated alone, standby away: its seal was left unpublished');
	$standby->start;
	ok(defined wait_until(120, sub { finished($late) }), 'terminated alone, standby away: the late cast is taken');
	like($late->{out}, qr/^\d+,\d+$/, 'terminated alone, standby away: ... with a receipt') or diag($late->{err});
	push @r, $late->{out};
	is(positions(@r), join(' ', map { $landed + $_ } 1 .. 4),
		'terminated alone, standby away: every receipt answers its coordinate');
	$landed += 4;
	is($node->safe_psql('postgres', 'SELECT coalesce(sum(applied), 0) FROM lake.recover()'),
		'0', 'terminated alone, standby away: recovery applies nothing afterwards');
}

$node->stop;
done_testing();
