# A refused cast lets the cycle lock go before its error is reported (SPEC
# §3: no tenant can stall another; every wait is bounded). PostgreSQL sends
# an error to the client, and writes it to the log, before the abort that
# releases LWLocks, and a client that stops reading its replies blocks that
# send for as long as it likes: a cast refused with the lock held would
# stall every cast, owner state and seal, of every tenant, meanwhile. Here
# gdb holds a session in EmitErrorReport after each kind of refusal (LK002,
# LK003, LK004, LK007) while another session casts durably (the worker
# seals) and reads an owner's state; on the old code it waited on the lock.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

die 'gdb is required (scripts/setup.sh installs it)'
  unless grep { -x "$_/gdb" } split /:/, $ENV{PATH};

# No statement logging: its LOG message would stop at the breakpoint first.
my $node = lake_node('refusal', conf => "lake.cycle_interval = 1h\nlog_statement = none");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_owner(o) FROM unnest('{a,b,q}'::text[]) o;
UPDATE lake_data.owner SET quarantine_position = 0, quarantine_reason = 'held for the test' WHERE name = 'q';
UPDATE lake_data.lifecycle SET edges = edges WHERE name = 'kanban';});
ok($node->poll_query_until('postgres', "SELECT quarantined FROM lake.owner_state('q')"),
	'the worker has recovered the owners, q quarantined');

my $position = 0;
for my $refusal (
	[ 'LK002', "SELECT lake.cast('a', 'Commit', 'Planning')" ],
	[ 'LK003', "SELECT lake.cast('a', 'Planning', 'Commit')" ],
	[ 'LK004', "SELECT lake.cast('a', NULL, NULL, NULL, 7)" ],
	[ 'LK007', "SELECT lake.cast('q', 'Planning', 'CognitiveWork')" ])
{
	my ($code, $sql) = @$refusal;
	my $a = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $a->query_safe('SELECT pg_backend_pid()');
	$a->query_safe('\set VERBOSITY verbose');
	my $g = gdb_hold($pid, 'EmitErrorReport');
	$a->query_until(qr/start/, "\\echo start\n$sql;\n");
	ok(defined wait_until(30, sub { $g->{h}->pump_nb; $g->{out} =~ /Breakpoint 1,/ }),
		"$code: the refused session is held in its error report")
	  or diag("gdb: $g->{out}");

	my $b = background($node,
		"SELECT (c).position || '|' || s.phase FROM lake.cast_durable('b', NULL, NULL) c, lake.owner_state('a') s");
	my $took = wait_until(20, sub { finished($b) });
	ok(defined $took, "$code: meanwhile another session casts durably and reads an owner's state")
	  or diag("waited: $b->{out} $b->{err}");
	$position++;
	is($b->{out}, "$position|Planning\n", '... and gets its coordinate and the state');

	gdb_let_go($g);
	$a->quit;
	like($a->{stderr}, qr/ERROR:\s+$code:/, "$code: the held session got its refusal once let go");
}

# A cancel that reaches a cast while it waits for the cycle lock refuses it
# before it is accepted (SPEC §1: an error leaves no enqueued cast). gdb
# holds the cast just after it took the lock; the cancel is delivered when
# gdb lets go.
{
	my $a = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $a->query_safe('SELECT pg_backend_pid()');
	$a->query_safe('\set VERBOSITY verbose');
	# A refused cast first: the session's caches of the owner's lifecycle
	# and tenant are warm, so the next cast is accepted on its first pass.
	$a->query("SELECT lake.cast('a', 'Commit', 'Planning')");
	like($a->{stderr}, qr/ERROR:\s+LK002: owner "a" is in phase "Planning", not "Commit"/, 'a first cast is refused (LK002)');
	$a->{stderr} = '';
	my $g = gdb_hold($pid, 'cycle_owners_live');
	$a->query_until(qr/start/, "\\echo start\nSELECT lake.cast('a', 'Planning', 'CognitiveWork');\n");
	ok(gdb_stopped($g), 'a cast is held with the cycle lock taken') or diag("gdb: $g->{out}");
	$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
	gdb_let_go($g);
	$a->quit;
	like($a->{stderr}, qr/ERROR:\s+57014: canceling statement due to user request/, 'the cast is cancelled (57014)');
}
is($node->safe_psql('postgres', "SELECT position, pending FROM lake.owner_state('a')"),
	'0|0', 'the refused and the cancelled casts queued nothing');

# The sealing lock is waited for at most lake.admission_queue_wait (100 ms
# here), then refused with 53000 (SPEC §3): a lifecycle edit left open
# holds it. (The
# administrative calls refuse subtransactions, so no regress or isolation
# test can show this code.)
{
	$node->append_conf('postgresql.conf', "lake.admission_queue_wait = '100ms'");
	$node->reload;
	ok($node->poll_query_until('postgres', "SELECT current_setting('lake.admission_queue_wait') = '100'"),
		'lake.admission_queue_wait is 100 ms');
	my $editor = $node->background_psql('postgres');
	$editor->query_safe("BEGIN; UPDATE lake_data.lifecycle SET edges = edges WHERE name = 'kanban'");
	for my $call ('SELECT lake.seal()', 'SELECT lake.checkpoint()')
	{
		my ($state, $msg) = sql_error($node, $call);
		is($state, '53000', "$call while a lifecycle edit holds the sealing lock: 53000")
		  or diag($msg);
		like($msg, qr/lake's sealing lock is busy/, '... saying the sealing lock is busy');
	}
	$editor->query_safe('ROLLBACK');
	$editor->quit;
}

$node->stop;
done_testing();
