# A full disk under the worker's seals (SPEC §3: every wait has a bound;
# §1: nothing half done). The server runs with a preloaded library
# (disk_full.c, built here) that refuses, while a flag file exists, every
# write that would make a relation file longer (ENOSPC); the cycle table
# keeps a tenth of each page (fillfactor), so a seal soon needs a new one.
# - While the seals fail, a cast_durable and an await_durable with no
#   timeout of their own end in the seals' error (53100), naming the
#   receipt, after lake.admission_queue_wait and a failed retry, instead of
#   waiting for as long as the disk is full; an await_durable with a
#   timeout returns NULL at it; a seal that gives up a lock wait is no
#   failure: once there is room, a durable cast waits for the lock. One
#   failure is not yet a stretch (the retry may succeed), and a seal that
#   succeeds ends one: the worker stopped then, a durable cast waits on.
# - Once there is room again, every accepted cast is sealed once: the
#   receipts answer their coordinates, the cast_durable retried with its
#   operation id answers the one landing, positions run gap-free.
# - A snapshot that fails so is tried again after pauses that double.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use LakeTAP;

my $dir  = PostgreSQL::Test::Utils::tempdir;
my $so   = preload_library($dir, 'disk_full');
my $flag = "$dir/full";

my $node = lake_node('disk_full', conf => "lake.admission_queue_wait = '2s'");
with_preload($so, { LAKE_DISK_FULL => $flag }, sub { $node->start });
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_owner('o');
ALTER TABLE lake_data.cycle SET (fillfactor = 10);
});
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the worker serves');
$node->safe_psql('postgres', "SELECT lake.cast_durable('o', NULL, NULL, '\\x00')");

sub cast
{
	my $r = $node->safe_psql('postgres',
		"SELECT r.epoch || ',' || r.seq FROM lake.cast('o', NULL, NULL, '\\x01') r");
	return split /,/, $r;
}

# The disk fills: cast until a seal fails for want of a page.
open my $fh, '>', $flag or die "cannot create $flag: $!";
close $fh;
my $off = -s $node->logfile;
my @r;
ok( defined wait_until(60, sub {
			@r = cast();
			slurp_file($node->logfile, $off) =~ /could not extend file/;
		}),
	'full disk: a seal fails (could not extend file)');
my ($e, $s) = @r;

# No deadline of their own: the seals' error within seconds (the bound
# here is 2 s after a failed retry; statement_timeout only keeps a build
# without the bound from hanging this test).
my $t0 = time();
my ($state, $msg) = sql_error($node,
	"SET statement_timeout = '30s'; SELECT lake.cast_durable('o', NULL, NULL, '\\x02', operation_id => 'cd-1')");
my $took = time() - $t0;
is($state, '53100', 'full disk: cast_durable ends in the seals\' error (disk full)');
like($msg, qr/^receipt \(\d+,\d+\) is not durable yet: the lake worker's seals keep failing/,
	'full disk: the error names its receipt');
cmp_ok($took, '<', 10, sprintf('full disk: cast_durable told within seconds (%.1f s)', $took));

$t0 = time();
($state, $msg) = sql_error($node,
	"SET statement_timeout = '30s'; SELECT lake.await_durable(($e, $s)::lake.receipt)");
$took = time() - $t0;
is($state, '53100', 'full disk: await_durable without timeout_ms ends in the seals\' error');
like($msg, qr/^receipt \($e,$s\) is not durable yet/, 'full disk: it names the receipt awaited');
cmp_ok($took, '<', 10, sprintf('full disk: await_durable told within seconds (%.1f s)', $took));

is($node->safe_psql('postgres', "SELECT lake.await_durable(($e, $s)::lake.receipt, 500) IS NULL"),
	't', 'full disk: await_durable with a timeout returns NULL at it');
cmp_ok($node->safe_psql('postgres', 'SELECT casts_pending FROM lake.stats()'),
	'>=', 2, 'full disk: the casts stay accepted, pending');

# A seal that gives up a lock wait is no failure that lasts: with the
# cycle table held by a session the worker's tries are cut short, and once
# the disk has room again a durable cast waits for the lock, longer than
# lake.admission_queue_wait, instead of being told of the full disk.
my $holder = $node->background_psql('postgres');
$holder->query_safe('BEGIN; LOCK TABLE lake_data.cycle IN SHARE MODE');
$off = -s $node->logfile;
ok( defined wait_until(30, sub {
			slurp_file($node->logfile, $off) =~ /lake worker waits for a lock another transaction holds/;
		}),
	'held lock: a seal gives up its lock wait');
unlink $flag or die "cannot remove $flag: $!";
my $waiter = background($node,
	"SET statement_timeout = '30s'; SELECT position FROM lake.cast_durable('o', NULL, NULL, '\\x03', operation_id => 'cd-2')");
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%cd-2%' AND pid <> pg_backend_pid()"),
	'held lock, room again: the durable cast waits');
is($node->safe_psql('postgres', q{SELECT pg_sleep(4);
SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%cd-2%' AND pid <> pg_backend_pid()}),
	"\n1", 'held lock, room again: ... and still waits 4 s later') or diag($waiter->{err});
$holder->query_safe('COMMIT');
$holder->quit;
ok(defined wait_until(60, sub { finished($waiter) }), 'held lock gone: the durable cast is answered');
like($waiter->{out}, qr/^\d+$/, 'held lock gone: ... with its coordinate') or diag($waiter->{err});

# Room again: everything accepted is sealed, once.
ok($node->poll_query_until('postgres', 'SELECT casts_pending = 0 FROM lake.stats()'),
	'room again: the pending casts are sealed');
like($node->safe_psql('postgres', "SELECT lake.await_durable(($e, $s)::lake.receipt)"),
	qr/^\(\d+,\d+,/, 'room again: the receipt answers its coordinate');
my $retry = $node->safe_psql('postgres',
	"SELECT position FROM lake.cast_durable('o', NULL, NULL, '\\x02', operation_id => 'cd-1')");
is( $node->safe_psql('postgres',
		"SELECT count(*) || ' ' || min(position) FROM lake.trajectory('o') WHERE operation_id = 'cd-1'"),
	"1 $retry",
	'room again: the cast_durable retried with its operation id answers its one landing');
is($node->safe_psql('postgres',
		'SELECT count(*) = max(position) AND min(position) = 1 FROM lake.trajectory(\'o\')'),
	't', 'room again: positions run gap-free');
is($node->safe_psql('postgres', 'SELECT coalesce(sum(applied), 0) FROM lake.recover()'),
	'0', 'room again: recovery applies nothing');

# One failed seal is not yet a stretch of failures: a waiter with no
# deadline waits for the retry, which may well succeed. The worker is
# stopped (SIGSTOP) right after a failure, so the stretch stays at one
# failure for longer than lake.admission_queue_wait; a waiter that gave up
# after one failure would end in 53100 about 3 s later.
my $wpid = $node->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()');
my $worker_idle = q{SELECT casts_pending = 0 AND wait_event = 'Extension'
	FROM lake.stats(), pg_stat_activity WHERE backend_type = 'lake worker'};

# Fills the disk until a seal fails and stops the worker at once, before
# its retry a second later. Where a retry failed first (a slow machine),
# the worker goes on with room again until a seal ends the stretch, and
# it is tried again.
sub stop_after_one_failure
{
	for (1 .. 5)
	{
		open my $full, '>', $flag or die "cannot create $flag: $!";
		close $full;
		my $from = -s $node->logfile;
		defined wait_until(60, sub {
				if (slurp_file($node->logfile, $from) =~ /ERROR:.*could not extend file/)
				{
					kill 'STOP', $wpid or die "cannot stop the worker: $!";
					return 1;
				}
				cast();
				return 0;
			}) or die 'no seal failed on the full disk';
		my $failed = () = slurp_file($node->logfile, $from) =~ /ERROR:.*could not extend file/g;
		return 1 if $failed == 1;
		unlink $flag or die "cannot remove $flag: $!";
		kill 'CONT', $wpid or die "cannot continue the worker: $!";
		$node->poll_query_until('postgres', $worker_idle) or die 'no seal succeeded';
	}
	return 0;
}
ok(stop_after_one_failure(), 'one failure: the worker is stopped before its retry');
my $one = background($node,
	"SET statement_timeout = '30s'; SELECT position FROM lake.cast_durable('o', NULL, NULL, '\\x04')");
ok(!defined wait_until(6, sub { finished($one) }),
	'one failure: a durable cast with no deadline still waits 6 s later (3 x lake.admission_queue_wait)')
  or diag("answered: $one->{out}$one->{err}");
unlink $flag or die "cannot remove $flag: $!";
kill 'CONT', $wpid or die "cannot continue the worker: $!";
ok(defined wait_until(60, sub { finished($one) }), 'one failure: the retry seals, and the durable cast is answered');
like($one->{out}, qr/^\d+$/, 'one failure: ... with its coordinate') or diag($one->{err});

# A seal that succeeds ends a stretch of failures: two failures, room
# again, one seal; then, the worker stopped, a durable cast waits on. A
# stretch left standing would end it in 53100 about 3 s later.
open $fh, '>', $flag or die "cannot create $flag: $!";
close $fh;
$off = -s $node->logfile;
ok(defined wait_until(60, sub {
			cast();
			my $n = () = slurp_file($node->logfile, $off) =~ /ERROR:.*could not extend file/g;
			$n >= 2;
		}),
	'full disk again: two seals fail');
unlink $flag or die "cannot remove $flag: $!";
# Idle: past the seal's end, where the stretch is ended.
ok($node->poll_query_until('postgres', $worker_idle), 'room again: a seal succeeds');
kill 'STOP', $wpid or die "cannot stop the worker: $!";
my $after = background($node,
	"SET statement_timeout = '30s'; SELECT position FROM lake.cast_durable('o', NULL, NULL, '\\x05')");
ok(!defined wait_until(6, sub { finished($after) }),
	'after a success: a durable cast with no deadline still waits 6 s later')
  or diag("answered: $after->{out}$after->{err}");
kill 'CONT', $wpid or die "cannot continue the worker: $!";
ok(defined wait_until(60, sub { finished($after) }), 'after a success: the durable cast is answered');
like($after->{out}, qr/^\d+$/, 'after a success: ... with its coordinate') or diag($after->{err});

# Snapshots that fail on a full disk are tried again after pauses that
# double (1, 2, 4 s, ...), not each second: a try holds the sealing lock
# while it encodes every owner. The snapshot table is still empty, so a
# snapshot needs a new page; nothing is cast meanwhile, so no seal does.
is($node->safe_psql('postgres', "SELECT pg_catalog.pg_relation_size('lake_data.snapshot')"),
	'0', 'no snapshot written yet: the next one needs a new page');
open $fh, '>', $flag or die "cannot create $flag: $!";
close $fh;
$off = -s $node->logfile;
$node->safe_psql('postgres', 'ALTER SYSTEM SET lake.checkpoint_cycles = 1; SELECT pg_reload_conf()');
$node->safe_psql('postgres', 'SELECT pg_sleep(8)');
my $tries = () = slurp_file($node->logfile, $off) =~ /^\s+lake: snapshotting owners|CONTEXT:\s+lake: snapshotting owners/mg;
cmp_ok($tries, '>=', 2, "full disk: a failed snapshot is tried again ($tries tries in 8 s)");
cmp_ok($tries, '<=', 5, "full disk: ... after pauses that double, not each second ($tries tries in 8 s)");
unlink $flag or die "cannot remove $flag: $!";
is($node->safe_psql('postgres', 'SELECT lake.checkpoint() > 0'), 't',
	'room again: a snapshot is taken');

$node->stop;
done_testing();
