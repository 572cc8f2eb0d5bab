# A receipt that meets a recovery is judged by the epoch it was issued in,
# never by counters the recovery has reset:
# - an await of a sealed receipt that meets a recovery between its wait for
#   the owners and its look-up waits for the recovery and answers with the
#   coordinate (a recovery reset next_seq before it advanced the epoch, and
#   the look-up answered 22023 "never issued" for a durable step);
# - a cast_durable whose cast the drain before a recovery sealed answers
#   with its coordinate at once, while the recovery is still held: the
#   recovery reset sealed_seq under the old epoch, and the session waited
#   for the recovery to finish, however long it kept failing;
# - lake.owner_state meanwhile waits for the recovery, and never shows an
#   owner the recovery has not rebuilt yet.
#
# gdb holds the session (at the look-up, or just after its cast was
# accepted), then holds the worker just after cycle_begin_recovery in a
# recovery a lifecycle edit starts; the session is let go first.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

die 'gdb is required (scripts/setup.sh installs it)'
  unless grep { -x "$_/gdb" } split /:/, $ENV{PATH};

# The session's wait for the recovery must outlast the held worker; no
# statement logging (its LOG message would stop at a breakpoint first).
my $node = lake_node('receipt_recovery',
	conf => "lake.cycle_interval = 1h\nlake.admission_queue_wait = 60s\nlog_statement = none");
$node->start;
$node->safe_psql('postgres', "CREATE EXTENSION lake; SELECT lake.create_owner('w')");
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the worker serves');

# A durable step, and its receipt.
my $r = $node->safe_psql('postgres', "SELECT lake.cast('w', 'Planning', 'CognitiveWork')");
my $coord = $node->safe_psql('postgres', "SELECT lake.await_durable('$r'::lake.receipt)");
like($coord, qr/^\(1,1,/, 'the receipt is sealed at position 1');

# The awaiting session, held at the receipt's look-up.
my ($s, $spid, $gs) = held_session($node, 'cycle_receipt_state',
	"SELECT lake.await_durable('$r'::lake.receipt) AS got;");
ok(gdb_stopped($gs), 'the session is held at the look-up, past its wait for the owners')
  or diag("gdb: $gs->{out}");

# The worker, held right after a recovery (a lifecycle edit's) reset the ring.
sub hold_worker_in_recovery
{
	my $wpid = $node->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()');
	my $gw = gdb_hold($wpid, 'cycle_begin_recovery');
	$node->safe_psql('postgres', "UPDATE lake_data.lifecycle SET edges = edges WHERE name = 'kanban'");
	ok(gdb_stopped($gw), 'the worker begins a recovery')
	  or diag("gdb: $gw->{out}");
	ok(gdb($gw, "finish\n", qr/Run till exit/), 'the worker has reset the ring and is held');
	return $gw;
}
my $gw = hold_worker_in_recovery();
is($node->safe_psql('postgres', 'SELECT worker_state FROM lake.stats()'),
	'recovering', 'the owners are being recovered');

# The session looks the receipt up now; it must wait, not answer.
gdb_let_go($gs);
ok($node->poll_query_until('postgres',
		"SELECT wait_event = 'Extension' FROM pg_stat_activity WHERE pid = $spid"),
	'the session waits for the recovery');

gdb_let_go($gw);
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the recovery completes');
$s->quit;
like($s->{stdout}, qr/\Q$coord\E/, 'the await answers with the coordinate');
unlike($s->{stderr}, qr/ERROR/, '... and no error (it was 22023, "never issued")');

# A cast_durable, held just after its cast was accepted.
my ($s2, $spid2, $gs2) = held_session($node, 'cycle_receipt_settled',
	"SELECT lake.cast_durable('w', 'CognitiveWork', 'Evaluation') AS got;");
ok(gdb_stopped($gs2), 'the cast is accepted and its session held before it waits')
  or diag("gdb: $gs2->{out}");
my $cycles = $node->safe_psql('postgres', 'SELECT count(*) FROM lake_data.cycle');

# An owner_state, held past its wait for the owners.
my ($s3, $spid3, $gs3) = held_session($node, 'cycle_owner_table',
	"SELECT phase, position FROM lake.owner_state('w');");
ok(gdb_stopped($gs3), 'owner_state is held past its wait for the owners')
  or diag("gdb: $gs3->{out}");

# A recovery: its drain seals the cast, then the worker is held in it.
my $gw2 = hold_worker_in_recovery();
is($node->safe_psql('postgres', 'SELECT count(*) FROM lake_data.cycle'),
	$cycles + 1, 'the drain before the recovery sealed the cast');

gdb_let_go($gs2);
ok(defined wait_until(30, sub { $s2->{run}->pump_nb; $s2->{stdout} =~ /done/ }),
	'the cast_durable answers while the recovery is still held')
  or diag("stdout: $s2->{stdout}\nstderr: $s2->{stderr}");
like($s2->{stdout}, qr/^\(\d+,2,/m, '... with the coordinate of position 2');
is($node->safe_psql('postgres', 'SELECT worker_state FROM lake.stats()'),
	'recovering', '... and the worker was still held in the recovery');

# owner_state, held past its wait for the owners before the recovery
# began, looks at the owner table now: it waits, never shows the owner
# before the recovery has rebuilt it.
gdb_let_go($gs3);
ok($node->poll_query_until('postgres',
		"SELECT wait_event = 'Extension' FROM pg_stat_activity WHERE pid = $spid3"),
	'owner_state waits for the recovery')
  or diag("stdout: $s3->{stdout}\nstderr: $s3->{stderr}");

gdb_let_go($gw2);
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the recovery completes');
ok(defined wait_until(30, sub { $s3->{run}->pump_nb; $s3->{stdout} =~ /done/ }),
	'owner_state answers after it');
like($s3->{stdout}, qr/^Evaluation\|2$/m, '... with the recovered owner');
$s3->quit;
unlike($s3->{stderr}, qr/ERROR/, '... and no error');
$s2->quit;
unlike($s2->{stderr}, qr/ERROR/, 'no error');

$node->stop;
done_testing();
