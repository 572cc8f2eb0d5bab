# A statement that calls lake.recover() for several owners holds lake's
# sealing lock from its first call to its commit. If the worker restarts
# between two of its calls, the worker's recovery needs that lock: the next
# call cannot wait for the recovery (it would wait for itself, for all of
# lake.admission_queue_wait, and every cast with it). It is refused at once,
# 55000, and the recovery goes on once the statement has ended. gdb holds
# the statement at its second call while the worker is terminated.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

die 'gdb is required (scripts/setup.sh installs it)'
  unless grep { -x "$_/gdb" } split /:/, $ENV{PATH};

my $node = lake_node('lock_held_recovery', conf => "lake.admission_queue_wait = '20s'\n");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_owner('o1');
SELECT lake.create_owner('o2');
});
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the worker serves');
my $epoch = $node->safe_psql('postgres', 'SELECT epoch FROM lake.stats()');

my ($s, $pid, $g) = held_session($node, 'lake_recover',
	qq{\\set VERBOSITY verbose\nSELECT n, (lake.recover(n)).applied FROM unnest('{o1,o2}'::text[]) n;});
ok(gdb_stopped($g), 'the statement is held at its first call') or diag("gdb: $g->{out}");
ok(gdb($g, "continue\n", qr/Continuing/), 'let the first call run');
ok(gdb_stopped($g), 'the statement is held at its second call, the sealing lock held')
  or diag("gdb: $g->{out}");

# The worker ends; its successor starts a recovery, which waits for that lock.
my $wpid = $node->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()');
kill 'TERM', $wpid;
ok($node->poll_query_until('postgres',
		"SELECT worker_pid <> $wpid AND worker_state = 'recovering' FROM lake.stats()"),
	'a new worker is recovering');

my $t0 = time;
gdb_let_go($g);
$s->query_until(qr/done/, '');
my $elapsed = time - $t0;
like($s->{stderr}, qr/ERROR:  55000: lake owners are being recovered, and this transaction holds lake's sealing lock/,
	'the second call is refused (55000): it holds the lock the recovery needs');
cmp_ok($elapsed, '<', 10, 'at once, not after lake.admission_queue_wait');
$s->quit;

ok($node->poll_query_until('postgres', "SELECT epoch > $epoch AND worker_state = 'serving' FROM lake.stats()"),
	'the recovery ends once the statement has');
is($node->safe_psql('postgres',
		q{SELECT string_agg(r.owner || ' ' || r.applied, ', ') FROM unnest('{o1,o2}'::text[]) n, lake.recover(n) r}),
	'o1 0, o2 0', 'the same statement, run again, recovers both');

$node->stop;
done_testing();
