# An await of a sealed receipt that meets a recovery between its wait for
# the owners and its look-up of the receipt waits for the recovery and
# answers with the coordinate. A recovery resets the ring's counters
# (next_seq) before it advances the epoch: the look-up judged the receipt
# by them and answered 22023 "never issued" for a durable step.
#
# gdb holds the awaiting session at the look-up (after its wait for the
# owners), then holds the worker just after cycle_begin_recovery in a
# recovery a lifecycle edit starts; the session is let go first.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

plan skip_all => 'gdb is not installed' unless grep { -x "$_/gdb" } split /:/, $ENV{PATH};

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
my $s = $node->background_psql('postgres', on_error_stop => 0);
my $spid = $s->query_safe('SELECT pg_backend_pid()');
my $gs = gdb_hold($spid, 'cycle_receipt_state');
$s->query_until(qr/start/, "\\echo start\nSELECT lake.await_durable('$r'::lake.receipt) AS got;\n");
ok(defined wait_until(30, sub { $gs->{h}->pump_nb; $gs->{out} =~ /Breakpoint 1,/ }),
	'the session is held at the look-up, past its wait for the owners')
  or diag("gdb: $gs->{out}");

# The worker, held right after a recovery reset the ring.
my $wpid = $node->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()');
my $gw = gdb_hold($wpid, 'cycle_begin_recovery');
$node->safe_psql('postgres', "UPDATE lake_data.lifecycle SET edges = edges WHERE name = 'kanban'");
ok(defined wait_until(30, sub { $gw->{h}->pump_nb; $gw->{out} =~ /Breakpoint 1,/ }),
	'the worker begins a recovery')
  or diag("gdb: $gw->{out}");
ok(gdb($gw, "finish\n", qr/Run till exit/), 'the worker has reset the ring and is held');
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

$node->stop;
done_testing();
