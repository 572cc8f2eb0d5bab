# A fenced seal is told from a seal that failed for another reason. After a
# real fence (the durable writer epoch moved under the worker: its pending
# casts are lost, LK006, and it recovers), a later seal that fails before
# it reaches the fence check (a cancel, a lock timeout) must not be taken
# for a fence again: that made the worker give up the pending casts of its
# new epoch as "lost" and recover, though nothing had fenced them. gdb
# cancels the worker's next two seal passes at their start.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

die 'gdb is required (scripts/setup.sh installs it)'
  unless grep { -x "$_/gdb" } split /:/, $ENV{PATH};

my $node = lake_node('fence_once', conf => "lake.cycle_interval = '1h'\n");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.define_lifecycle('ab', 'A', '{{A,B},{B,A}}');
SELECT lake.create_owner('o', 'ab');
});
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the worker serves');

# A real fence: the durable epoch moves past the worker's, and a waiter
# makes it seal at once.
my $epoch0 = $node->safe_psql('postgres', 'SELECT epoch FROM lake.stats()');
my $log0 = -s $node->logfile;
$node->safe_psql('postgres', 'UPDATE lake_data.writer SET epoch = epoch + 1');
my ($state, $msg) = sql_error($node, q{SELECT lake.cast_durable('o', 'A', 'B')});
is($state, 'LK006', 'the fenced cast is lost (LK006)') or diag($msg);
ok($node->poll_query_until('postgres',
		"SELECT epoch > $epoch0 + 1 AND worker_state = 'serving' FROM lake.stats()"),
	'the worker recovered past the durable epoch');
like(slurp_file($node->logfile, $log0), qr/seal refused: its base is not the sealed head/,
	'the seal was fenced');
my $epoch1 = $node->safe_psql('postgres', 'SELECT epoch FROM lake.stats()');

# Two casts of the new epoch, pending (a cycle is due only in an hour).
my $r1 = $node->safe_psql('postgres', q{SELECT lake.cast('o', 'A', 'B')});
my $r2 = $node->safe_psql('postgres', q{SELECT lake.cast('o', 'B', 'A')});

# The worker's next two seal passes are cancelled as they start.
my $wpid = $node->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()');
my $g = gdb_hold($wpid,
	'run_in_transaction if $_streq(activity, "lake: sealing a cycle") || '
	  . '$_streq(activity, "lake: sealing before recovery")');
my $log1 = -s $node->logfile;
$node->append_conf('postgresql.conf', "lake.cycle_interval = '10ms'\n");
$node->reload;
for my $n (1, 2)
{
	ok(gdb_stopped($g), "seal pass $n held") or diag("gdb: $g->{out}");
	like($g->{out}, qr/lake: sealing a cycle/, "seal pass $n is a seal, not a drain before a recovery");
	ok(gdb($g, "set var *(int *) &InterruptPending = 1\nset var *(int *) &QueryCancelPending = 1\n"
			  . "continue\n", qr/Continuing/),
		"seal pass $n cancelled");
}
ok(defined wait_until(30, sub {
			my @c = slurp_file($node->logfile, $log1) =~ /canceling statement due to user request/g;
			scalar(@c) >= 2 }),
	'both passes failed on the cancel');
gdb_let_go($g);

is($node->safe_psql('postgres', qq{SELECT (lake.await_durable('$r1', 60000)).position}), '1',
	'the first pending cast became durable');
is($node->safe_psql('postgres', qq{SELECT (lake.await_durable('$r2', 60000)).position}), '2',
	'the second too');
is($node->safe_psql('postgres', 'SELECT epoch FROM lake.stats()'), $epoch1,
	'no recovery: the epoch is the one recovered after the fence');
my $after = slurp_file($node->logfile, $log1);
unlike($after, qr/cannot be sealed on the durable log and are lost/, 'no cast given up as lost');
unlike($after, qr/seal refused/, 'no seal fenced');
is($node->safe_psql('postgres', q{SELECT phase || ' ' || position FROM lake.owner_state('o')}),
	'A 2', 'the owner is in A at position 2');

$node->stop;
done_testing();
