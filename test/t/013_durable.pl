# The durable path's promises (SPEC §4, issue 11):
# - a coordinate's lsn is flushed when it is handed out: in the statement
#   that received it, pg_current_wal_flush_lsn() >= lsn, for every one of
#   many durable casts from 8 clients;
# - await_durable with a timeout returns NULL on time when no seal can run
#   (a session holds lake_data.cycle), and no waiter is left queued;
# - a waiter's backend terminated while it waits leaves no queue entry;
# - the seal finds the tables of a re-created extension (it caches their
#   OIDs until a relcache invalidation names them), in the worker and in a
#   session's lake.seal().
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use LakeTAP;

my $CLIENTS = 8;
my $CASTS   = 60;

my $node = lake_node('durable',
	conf => "fsync = on\nlake.cycle_interval = 1h\nmax_connections = 100");
$node->start;
$node->safe_psql('postgres',
	"CREATE EXTENSION lake; SELECT lake.create_owner('d' || i) FROM generate_series(1, $CLIENTS) i;");

# At most one WAL flush per cycle (SPEC §4): a seal of a hundred owners'
# casts flushes once, at its commit, not once per landing or row
# (pg_stat_wal's wal_sync, with fsync on; the worker seals only when asked
# here). Another process's flush can only add to the count: the fewest of
# three seals is the seal's own.
$node->safe_psql('postgres', "SELECT count(lake.create_owner('f' || i)) FROM generate_series(1, 100) i");
my @syncs;
for my $round (1 .. 3)
{
	$node->safe_psql('postgres',
		"SELECT count(lake.cast('f' || i, NULL, NULL, '\\x01'::bytea)) FROM generate_series(1, 100) i");
	my ($syncs, $landed) = split /\|/, (split /\n/, $node->safe_psql('postgres', q{
SELECT pg_stat_force_next_flush();
SELECT wal_sync AS s0 FROM pg_stat_wal \gset
SELECT lake.seal() IS NOT NULL AS sealed;
SELECT pg_stat_force_next_flush();
SELECT 1;
SELECT wal_sync - :s0, (SELECT casts FROM lake.cycles() ORDER BY cycle DESC LIMIT 1) FROM pg_stat_wal;
}))[-1];
	is($landed, '100', "round $round: one seal wrote the hundred casts");
	push @syncs, $syncs;
}
is((sort { $a <=> $b } @syncs)[0], 1, 'a seal flushes the WAL once (counted: ' . join(', ', @syncs) . ')');

# Each client checks, right after each cast_durable returned, that the
# coordinate's lsn is at or below the flushed WAL position.
my (@runs, @out);
for my $i (1 .. $CLIENTS)
{
	my $o = '';
	push @out, \$o;
	push @runs,
	  IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'),
		  '-c', qq{
SELECT count(*), count(*) FILTER (WHERE lsn <= flushed)
FROM (SELECT (c).lsn AS lsn, pg_catalog.pg_current_wal_flush_lsn() AS flushed
      FROM generate_series(1, $CASTS) g,
           LATERAL lake.cast_durable('d$i', NULL, NULL, '\\x01'::bytea) c
      OFFSET 0) x} ],
		'>', \$o, '2>', \my $e);
}
$_->finish for @runs;
my $flushed = 0;
$flushed += (split /\|/, ${$_})[1] // 0 for @out;
is($flushed, $CLIENTS * $CASTS,
	'every coordinate handed out had pg_current_wal_flush_lsn() >= its lsn');

# No seal can write while a session holds lake_data.cycle in SHARE mode.
my $holder = $node->background_psql('postgres');
$holder->query_safe('BEGIN; LOCK TABLE lake_data.cycle IN SHARE MODE;');
my $r = $node->safe_psql('postgres', "SELECT lake.cast('d1', NULL, NULL, '\\x02'::bytea)");
# Timed on the server (from the statement's start to the call's return),
# not with psql's start and connection; statement_timeout turns a timeout
# that is not honoured into a failure rather than a hang.
my ($res, $took) = split /\|/, $node->safe_psql('postgres',
	"SET statement_timeout = '20s'; SELECT x.r, extract(epoch FROM clock_timestamp() - statement_timestamp()) "
	  . "FROM (SELECT lake.await_durable('$r'::lake.receipt, 400) IS NULL AS r OFFSET 0) x");
is($res, 't', 'await_durable with a timeout returns NULL while no seal can run');
ok($took >= 0.4 && $took < 1.4, "... on time (${took}s for 400 ms)");
is($node->safe_psql('postgres', 'SELECT sessions_waiting FROM lake.stats()'), '0',
	'... and leaves no waiter queued');

# A waiter terminated (FATAL) while it waits leaves no queue entry.
my $waiter = $node->background_psql('postgres', on_error_stop => 0);
$waiter->query_until(qr/start/, "\\echo start\nSELECT lake.await_durable('$r'::lake.receipt);\n");
ok($node->poll_query_until('postgres', 'SELECT sessions_waiting FROM lake.stats()', '1'),
	'a session waits for the held receipt');
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'SELECT lake.await_durable(%' AND pid <> pg_backend_pid()");
ok($node->poll_query_until('postgres', 'SELECT sessions_waiting FROM lake.stats()', '0'),
	'terminating it removes its queue entry');
eval { $waiter->quit };    # its backend is gone

# A cast_durable whose wait is cut short (statement_timeout here) has had
# its cast accepted: the error names the receipt, the cast is sealed once
# seals can run, and a retry of its operation id gets its coordinate.
my ($rc, $out, $err) = $node->psql('postgres',
	"\\set VERBOSITY verbose\nSET statement_timeout = '300ms';\n"
	  . "SELECT lake.cast_durable('d1', NULL, NULL, '\\x05'::bytea, NULL, 'cut-short')");
like($err, qr/ERROR:  57014: canceling statement due to statement timeout/, 'a cast_durable cut short fails (57014)');
my ($accepted) = $err =~ /accepted as receipt (\(\d+,\d+\)); lake.await_durable tells/;
ok(defined $accepted, '... naming the receipt it was accepted as') or diag($err);
is($node->safe_psql('postgres',
	"SELECT lake.cast('d1', NULL, NULL, '\\x05'::bytea, NULL, 'cut-short')::text"),
	$accepted // '', '... which its operation id replays');

# Released, the held cast is sealed and its coordinate is flushed too.
$holder->query_safe('COMMIT');
is($node->safe_psql('postgres',
	"SELECT (c).lsn <= pg_current_wal_flush_lsn() FROM (SELECT lake.await_durable('$r'::lake.receipt) c) x"),
	't', 'the held receipt becomes durable once seals can run');
$holder->quit;
is($node->safe_psql('postgres',
	"SELECT (c).position = (SELECT max(position) FROM lake.trajectory('d1')) "
	  . "FROM (SELECT lake.cast_durable('d1', NULL, NULL, '\\x05'::bytea, NULL, 'cut-short') c) x"),
	't', 'the cast cut short is sealed, and a retry gets its coordinate');

# Re-created: new tables, new OIDs; the worker and a session both seal into them.
$node->safe_psql('postgres', 'SELECT lake.seal()');
$node->safe_psql('postgres', "DROP EXTENSION lake; CREATE EXTENSION lake; SELECT lake.create_owner('again');");
is($node->safe_psql('postgres',
	"SELECT (c).cycle, (c).position FROM (SELECT lake.cast_durable('again', NULL, NULL, '\\x03'::bytea) c) x"),
	'1|1', 'after DROP and CREATE EXTENSION the worker seals into the new tables');
is($node->safe_psql('postgres',
	"SELECT lake.cast('again', NULL, NULL, '\\x04'::bytea) IS NOT NULL; SELECT lake.seal();"),
	"t\n2", 'and so does lake.seal() in a session');
is($node->safe_psql('postgres', 'SELECT count(*) FROM lake.trajectory(\'again\')'), '2',
	'both landings are in the new log');

# $ddl, holding lake_data.cycle, drops the extension, which queues behind
# the locks of the durable cast $tw waits in: the waiter must give up
# (57014) so that the drop completes.
sub drop_ends_the_wait
{
	my ($ddl, $tw, $what) = @_;
	$ddl->query_safe('DROP EXTENSION lake');
	$ddl->query_safe('COMMIT');
	$ddl->quit;
	$tw->query('SELECT 1');
	like($tw->{stderr}, qr/ERROR:\s+57014: stopped waiting for receipt \(\d+,\d+\): another session waits for a lock this transaction holds on lake's tables/,
		$what);
}

# A waiter whose transaction holds a lock on lake's tables that another
# session waits for (here a tenant's grant check, and the DROP EXTENSION
# that must wait for it while its own lock keeps every seal out) gives up at
# its next tick (57014, as a cancel), rather than wait with the other
# session for ever: the deadlock detector cannot see a latch wait. (The
# worker's seals meanwhile give up on their own lock_timeout of 500 ms,
# before any deadlock_timeout.)
$node->safe_psql('postgres', q{
CREATE ROLE tw LOGIN;
GRANT USAGE ON SCHEMA lake TO tw;
SELECT lake.grant_tenant('tw', 'tw');
SELECT lake.create_owner('tw_o', 'kanban', 'tw');
});
my $ddl = $node->background_psql('postgres');
$ddl->query_safe('BEGIN; LOCK TABLE lake_data.cycle IN SHARE MODE;');
my $tw = $node->background_psql('postgres', on_error_stop => 0, extra_params => [ '-U', 'tw' ]);
$tw->query_until(qr/start/,
	"\\echo start\n\\set VERBOSITY verbose\nSELECT lake.cast_durable('tw_o', NULL, NULL, '\\x07'::bytea, NULL, 'tw-1');\n");
ok($node->poll_query_until('postgres', 'SELECT sessions_waiting FROM lake.stats()', '1'),
	'a tenant waits for a cast no seal can write');
drop_ends_the_wait($ddl, $tw,
	'the waiter gives up (57014) for the DROP EXTENSION queued behind its lock, which then completes');
$tw->quit;
$node->safe_psql('postgres', 'CREATE EXTENSION lake');
$node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()")
  or die 'the worker does not serve the new extension';

# The same, while the waiter's transaction also holds 65 contended locks of
# an application's tables, all in the lock manager's first partition (the
# one scanned first): the look-up kept at most 64 contended locks, and lake's
# own was not among them. Each table's partition is computed as the lock
# manager does (hash_bytes of the relation's LOCKTAG, modulo 16).
sub lock_partition
{
	my ($db, $rel) = @_;
	my $M   = 0xffffffff;
	my $rot = sub { my ($x, $k) = @_; (($x << $k) | ($x >> (32 - $k))) & $M };
	my @k = unpack('V4', pack('VVVvCC', $db, $rel, 0, 0, 0, 1));
	my $a = my $b = my $c = (0x9e3779b9 + 16 + 3923095) & $M;
	$a = ($a + $k[0]) & $M;
	$b = ($b + $k[1]) & $M;
	$c = ($c + $k[2]) & $M;
	$a = ($a - $c) & $M; $a ^= $rot->($c, 4);  $c = ($c + $b) & $M;
	$b = ($b - $a) & $M; $b ^= $rot->($a, 6);  $a = ($a + $c) & $M;
	$c = ($c - $b) & $M; $c ^= $rot->($b, 8);  $b = ($b + $a) & $M;
	$a = ($a - $c) & $M; $a ^= $rot->($c, 16); $c = ($c + $b) & $M;
	$b = ($b - $a) & $M; $b ^= $rot->($a, 19); $a = ($a + $c) & $M;
	$c = ($c - $b) & $M; $c ^= $rot->($b, 4);  $b = ($b + $a) & $M;
	$a = ($a + $k[3]) & $M;
	$c ^= $b; $c = ($c - $rot->($b, 14)) & $M;
	$a ^= $c; $a = ($a - $rot->($c, 11)) & $M;
	$b ^= $a; $b = ($b - $rot->($a, 25)) & $M;
	$c ^= $b; $c = ($c - $rot->($b, 16)) & $M;
	$a ^= $c; $a = ($a - $rot->($c, 4))  & $M;
	$b ^= $a; $b = ($b - $rot->($a, 14)) & $M;
	$c ^= $b; $c = ($c - $rot->($b, 24)) & $M;
	return $c % 16;
}
$node->safe_psql('postgres', q{
SELECT lake.grant_tenant('tw', 'tw');
SELECT lake.create_owner('tw_o', 'kanban', 'tw');
CREATE SCHEMA app AUTHORIZATION tw;
SET ROLE tw;
DO $$ BEGIN FOR i IN 1..1600 LOOP EXECUTE format('CREATE TABLE app.t%s ()', i); END LOOP; END $$;
});
my $db = $node->safe_psql('postgres', 'SELECT oid FROM pg_database WHERE datname = current_database()');
my @first = grep { lock_partition($db, $_->[1]) == 0 }
  map { [ split /\|/ ] } split /\n/,
  $node->safe_psql('postgres', "SELECT relname, oid FROM pg_class WHERE relnamespace = 'app'::regnamespace ORDER BY oid");
cmp_ok(scalar @first, '>=', 65, 'enough application tables fall in the first lock partition')
  or BAIL_OUT('too few tables to hold 65 contended locks');
@first = map { $_->[0] } @first[0 .. 64];
$ddl = $node->background_psql('postgres');
$ddl->query_safe('BEGIN; LOCK TABLE lake_data.cycle IN SHARE MODE;');
$tw = $node->background_psql('postgres', on_error_stop => 0, extra_params => [ '-U', 'tw' ]);
$tw->query_safe("SET statement_timeout = '30s'; BEGIN; "
	  . join(' ', map { "LOCK TABLE app.$_ IN ACCESS EXCLUSIVE MODE;" } @first));
$tw->query_until(qr/start/,
	"\\echo start\n\\set VERBOSITY verbose\nSELECT lake.cast_durable('tw_o', NULL, NULL, '\\x08'::bytea, NULL, 'tw-2');\n");
my @readers = map {
	my $r = $node->background_psql('postgres', on_error_stop => 0);
	$r->query_until(qr/start/, "\\echo start\nSELECT count(*) FROM app.$_;\n");
	$r
} @first;
ok($node->poll_query_until('postgres',
		"SELECT count(*) FROM pg_locks WHERE NOT granted AND relation::regclass::text LIKE 'app.%'", '65'),
	'65 sessions wait for the tenant\'s locks on application tables')
  or diag($node->safe_psql('postgres', 'SELECT locktype, relation::regclass, mode, granted, pid FROM pg_locks'));
ok($node->poll_query_until('postgres', 'SELECT sessions_waiting FROM lake.stats()', '1'),
	'and the tenant waits for a cast no seal can write');
drop_ends_the_wait($ddl, $tw, 'the waiter still gives up for the DROP EXTENSION, among 65 contended locks of its own');
$tw->query('ROLLBACK');
$tw->quit;
$_->quit for @readers;
$node->safe_psql('postgres', 'CREATE EXTENSION lake');
$node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()")
  or die 'the worker does not serve the new extension';

# A receipt whose extension is dropped before its cycle is sealed can never
# become durable: its waiter is told so (LK006) within about a second of
# the drop, instead of waiting until the extension is created again.
$node->safe_psql('postgres', "SELECT lake.create_owner('dropped')");
my $dropper = $node->background_psql('postgres');
$dropper->query_safe('BEGIN; LOCK TABLE lake_data.cycle IN SHARE MODE;');
my $lost = $node->safe_psql('postgres', "SELECT lake.cast('dropped', NULL, NULL, '\\x06'::bytea)");
my $lost_waiter = $node->background_psql('postgres', on_error_stop => 0);
$lost_waiter->query_until(qr/start/,
	"\\echo start\n\\set VERBOSITY verbose\nSELECT lake.await_durable('$lost'::lake.receipt);\n");
ok($node->poll_query_until('postgres', 'SELECT sessions_waiting FROM lake.stats()', '1'),
	'a session waits for a receipt no seal can write');
$dropper->query_safe('DROP EXTENSION lake; COMMIT;');
$dropper->quit;
$lost_waiter->query('SELECT 1');    # returns once the wait has ended
like($lost_waiter->{stderr}, qr/ERROR:\s+LK006: receipt \(\d+,\d+\) can never become durable/,
	'after DROP EXTENSION the waiter gets LK006');
$lost_waiter->quit;

$node->stop;
done_testing();
