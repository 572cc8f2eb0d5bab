# Readers never show a cycle a crash could still take away (SPEC §4,
# issue 11). gdb holds the lake worker at the entry of XLogFlush — its seal's
# commit record is in the WAL buffers, not yet written — while the test
# reads:
# - round 1 (hold, then release): no reader (cycles, log, trajectory,
#   owner_state) shows the cycle and no waiter is given a coordinate while the
#   flush is held; a waiter cancelled meanwhile returns at once and leaves no
#   queue entry; once the flush is let go, the cycle is visible and the waiter
#   gets a coordinate whose lsn is flushed;
# - round 2 (hold, then crash): the worker is SIGKILLed in the held flush
#   (the postmaster restarts the cluster; WAL buffers are lost); afterwards
#   the cycle is either wholly there or wholly absent — rows, owner
#   positions and lake.recover() agree — and the next cast continues the
#   owner's positions without a gap;
# - round 3: the flush of the seal a recovery starts with is held: an
#   await_durable with a timeout returns NULL on time meanwhile, and casts,
#   an await without one and owner_state are refused with 53000 once
#   lake.admission_queue_wait has passed, leaving nothing behind.
# The cluster runs with synchronous_commit = off: the seal must force its own
# commit to be synchronous. The test fails against a seal that commits
# asynchronously (no XLogFlush: the waiter gets its coordinate before any
# flush) and against one that publishes before its commit record is flushed
# (the waiter or a reader sees the cycle while the flush is held).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use LakeTAP;

die 'gdb is required (scripts/setup.sh installs it)'
  unless grep { -x "$_/gdb" } split /:/, $ENV{PATH};

my $node = lake_node('flush',
	conf => "fsync = on\nsynchronous_commit = off\nwal_writer_delay = 10s\n"
	  . "autovacuum = off\ncheckpoint_timeout = 1h\nrestart_after_crash = on\nlake.cycle_interval = 1h\n"
	  . "lake.admission_queue_wait = 100ms");
$node->start;
$node->safe_psql('postgres',
	"CREATE EXTENSION lake; SELECT lake.create_owner('h1'); SELECT lake.create_owner('h2');");
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the worker has recovered the owners');

# --- gdb on the worker --------------------------------------------------------

# Attaches gdb to the worker with a breakpoint at XLogFlush and lets it run.
sub hold_flushes
{
	return gdb_hold($node->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()'), 'XLogFlush');
}

# Ends the test early (the failures already reported) when a round could not
# hold the seal's flush: nothing after it would mean anything.
sub unless_held
{
	my ($ok, $g) = @_;
	return if $ok;
	gdb_let_go($g);
	done_testing();
	exit 0;
}

# The flush target of the held XLogFlush (its one argument, in rdi), as pg_lsn.
sub held_target
{
	my ($g) = @_;
	gdb($g, "p/x \$rdi\n", qr/\$\d+ = 0x[0-9a-f]+/) or die "no XLogFlush argument: $g->{out}";
	my ($v) = $g->{out} =~ /\$\d+ = 0x([0-9a-f]+)/;
	$v = hex($v);
	return sprintf('%X/%X', $v >> 32, $v & 0xffffffff);
}


# What the readers show: cycles, landings in the log, h1's trajectory,
# h1's position.
sub readers
{
	return $node->safe_psql('postgres', q{
SELECT (SELECT count(*) FROM lake.cycles()) || ' cycles, '
    || (SELECT count(*) FROM lake.log()) || ' landings, '
    || (SELECT count(*) FROM lake.trajectory('h1')) || ' in h1''s trajectory, h1 at '
    || (SELECT "position" FROM lake.owner_state('h1'))});
}

# --- round 1: hold the seal's flush, then let it go ---------------------------

# Nothing older than the seal is left to flush (a walwriter flushing an
# earlier asynchronous commit would write the seal's page too).
$node->safe_psql('postgres', 'CHECKPOINT');
my $r1 = $node->safe_psql('postgres', "SELECT lake.cast('h1', NULL, NULL, '\\x01'::bytea)");
my $r2 = $node->safe_psql('postgres', "SELECT lake.cast('h2', NULL, NULL, '\\x02'::bytea)");
is(readers(), '0 cycles, 0 landings, 0 in h1\'s trajectory, h1 at 0', 'two casts accepted, none sealed');

my $g = hold_flushes();
my $w1 = background($node, "SELECT (c).cycle, (c).position, (c).lsn <= pg_catalog.pg_current_wal_flush_lsn() "
	  . "FROM (SELECT lake.await_durable('$r1'::lake.receipt) c) x");
my $held = defined wait_until(60, sub { $g->{h}->pump_nb; $g->{out} =~ /Breakpoint 1,/ || finished($w1) });
unless_held(
	ok($held && $g->{out} =~ /Breakpoint 1,/ && !finished($w1),
		'the worker reaches its seal\'s flush before any coordinate is handed out')
	  || diag("waiter: $w1->{out} $w1->{err}; gdb: $g->{out}"), $g);
my $target = held_target($g);
is($node->safe_psql('postgres',
	"SELECT pg_current_wal_flush_lsn() < '$target' AND '$target' <= pg_current_wal_insert_lsn()"),
	't', "the held flush's target ($target) is inserted but not flushed");

my $w2 = $node->background_psql('postgres', on_error_stop => 0);
my $w2pid = $w2->query_safe('SELECT pg_backend_pid()');
$w2->query_until(qr/start/, "\\echo start\nSELECT lake.await_durable('$r2'::lake.receipt);\n");
ok($node->poll_query_until('postgres', 'SELECT sessions_waiting FROM lake.stats()', '2'),
	'two sessions wait on the cycle whose flush is held');
is(readers(), '0 cycles, 0 landings, 0 in h1\'s trajectory, h1 at 0',
	'while its flush is held, no reader shows the cycle');
ok(!finished($w1), '... and its waiter has no coordinate');

$node->safe_psql('postgres', "SELECT pg_cancel_backend($w2pid)");
ok($node->poll_query_until('postgres', 'SELECT sessions_waiting FROM lake.stats()', '1'),
	'a waiter cancelled while its cycle is being flushed leaves no queue entry');
like($w2->query('SELECT 1'), qr/^1$/m, '... and its session goes on');
is(readers(), '0 cycles, 0 landings, 0 in h1\'s trajectory, h1 at 0', 'the flush is still held');

gdb_let_go($g);
ok(defined wait_until(60, sub { finished($w1) }), 'the flush let go, the waiter returns');
is($w1->{out}, "1|1|t\n", '... with its coordinate, whose lsn is flushed');
is(readers(), '1 cycles, 2 landings, 1 in h1\'s trajectory, h1 at 1', 'the readers show the cycle now');
is($node->safe_psql('postgres', "SELECT (c).cycle || '|' || (c).position FROM (SELECT lake.await_durable('$r2'::lake.receipt) c) x"),
	'1|1', 'the cancelled waiter\'s cast was sealed in it');
$w2->quit;

# --- round 2: hold the seal's flush, then crash -------------------------------

$node->safe_psql('postgres', 'CHECKPOINT');
$g = hold_flushes();
my $wpid = $node->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()');
my $c = background($node, "SELECT (c).position FROM lake.cast_durable('h1', NULL, NULL, '\\x03'::bytea) c");
$held = defined wait_until(60, sub { $g->{h}->pump_nb; $g->{out} =~ /Breakpoint 1,/ || finished($c) });
unless_held(
	ok($held && $g->{out} =~ /Breakpoint 1,/ && !finished($c),
		'round 2: the worker reaches its seal\'s flush before cast_durable returns')
	  || diag("cast_durable: $c->{out} $c->{err}; gdb: $g->{out}"), $g);
$target = held_target($g);
is($node->safe_psql('postgres', "SELECT pg_current_wal_flush_lsn() < '$target'"),
	't', "... its commit record ($target) is not flushed");
is(readers(), '1 cycles, 2 landings, 1 in h1\'s trajectory, h1 at 1', '... and no reader shows the cycle');

# SIGKILL ends a traced, stopped process at once; gdb then has nothing to
# detach from that could run on.
kill 'KILL', $wpid;
$g->{in} .= "quit\n";
$g->{h}->finish;
ok(defined wait_until(60, sub { finished($c) }), 'the crash ends the durable cast');
is($c->{out}, '', '... without a coordinate');
ok($node->poll_query_until('postgres',
	"SELECT worker_state = 'serving' AND worker_pid <> $wpid FROM lake.stats()"),
	'the cluster restarted and the worker recovered');

my $after = readers();
ok($after eq '1 cycles, 2 landings, 1 in h1\'s trajectory, h1 at 1'
	  || $after eq '2 cycles, 3 landings, 2 in h1\'s trajectory, h1 at 2',
	"after the crash the cycle is wholly absent or wholly there ($after)");
is($node->safe_psql('postgres', q{
SELECT (SELECT count(*) FROM lake_data.owner_block b
         WHERE b.first_cycle > (SELECT coalesce(max(c.indexed_through), 0) FROM lake_data.cycle c))
    || '|' || (SELECT count(*) FROM unnest('{h1,h2}'::text[]) o
                WHERE (SELECT array_agg(t.position ORDER BY t.position) FROM lake.trajectory(o) t)
                      IS DISTINCT FROM
                      (SELECT array_agg(l.position ORDER BY l.position) FROM lake.log() l WHERE l.owner = o))}),
	'0|0', '... no owner index row for a block its cycles did not close, and each owner index agrees with the log');
is($node->safe_psql('postgres', 'SELECT coalesce(sum(applied), 0) FROM lake.recover()'),
	'0', '... and lake.recover() applies nothing');
my ($pos) = $after =~ /h1 at (\d+)/;
is($node->safe_psql('postgres',
	"SELECT (c).position FROM lake.cast_durable('h1', NULL, NULL, '\\x04'::bytea) c"),
	$pos + 1, 'the next durable cast continues h1\'s positions without a gap');

# --- round 3: a timed await while the worker is not ready ---------------------
# A lifecycle edit makes the worker close the ring and seal what is pending
# before it recovers; its flush held, sessions wait for the owners to be
# ready. lake.await_durable with timeout_ms returns NULL on time all the
# same, and the receipt's coordinate once the worker is through.
my $r3 = $node->safe_psql('postgres', "SELECT lake.cast('h1', NULL, NULL, '\\x05'::bytea)");
$node->safe_psql('postgres', 'CHECKPOINT');
$g = hold_flushes();
$node->safe_psql('postgres', "UPDATE lake_data.lifecycle SET edges = edges WHERE name = 'kanban'");
$held = defined wait_until(60, sub { $g->{h}->pump_nb; $g->{out} =~ /Breakpoint 1,/ });
unless_held(ok($held, 'round 3: the worker holds in the flush of its seal before recovery')
	  || diag("gdb: $g->{out}"), $g);
my $t = background($node, "SELECT lake.await_durable('$r3'::lake.receipt, 200) IS NULL");
ok(defined wait_until(20, sub { finished($t) }), 'round 3: await_durable with timeout_ms = 200 returns while the worker holds');
is($t->{out}, "t\n", '... with NULL');

# The calls with no timeout of their own wait for the owners up to
# lake.admission_queue_wait (100ms here), then 53000: nothing accepted.
is($node->safe_psql('postgres', 'SELECT worker_state FROM lake.stats()'),
	'recovering', 'round 3: lake.stats() says the worker is recovering');
for my $call (
	[ "SELECT lake.cast('h2', NULL, NULL, '\\x06'::bytea)", 'a cast' ],
	[ "SELECT lake.cast_durable('h2', NULL, NULL, '\\x06'::bytea)", 'a durable cast' ],
	[ "SELECT lake.await_durable('$r3'::lake.receipt)", 'await_durable without timeout_ms' ],
	[ "SELECT * FROM lake.owner_state('h2')", 'owner_state' ])
{
	my ($sql, $what) = @$call;
	my $b = background($node, "SET statement_timeout = '60s'; $sql");
	ok(defined wait_until(20, sub { finished($b) }), "round 3: $what returns while the worker holds");
	like($b->{err}, qr/ERROR:\s+53000: lake owners are not available yet: the worker has not recovered them/,
		'... refused with 53000: the recovery took longer than lake.admission_queue_wait');
}
gdb_let_go($g);
like($node->safe_psql('postgres', "SELECT (lake.await_durable('$r3'::lake.receipt, 60000)).position"),
	qr/^\d+$/, 'round 3: the flush let go, the receipt has its coordinate');
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'... the worker serves again');
is($node->safe_psql('postgres', q{
SELECT (lake.seal() IS NULL) || '|' || (SELECT count(*) FROM lake.log() WHERE payload = '\x06'::bytea)}),
	'true|0', '... and the refused casts left nothing to seal or read');

$node->stop;
done_testing();
