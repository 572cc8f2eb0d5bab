# Admission's wake-up goes round the sleepers (SPEC §3 Admission): a
# release wakes the longest-waiting append; when what was freed is too
# little for it (a large reservation ahead of a small one), it passes the
# wake-up on instead of swallowing it, so the small append behind it is
# admitted at once, not at the end of its lake.admission_queue_wait.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes;
use LakeTAP;

my $node = lake_node(
	'handoff',
	conf => "lake.max_concurrent_appends = 4\n"
	  . "lake.max_stream_bytes = 1000\n"
	  . "lake.max_buffered_bytes = 1500\n"
	  . "lake.admission_queue_wait = '60s'");
$node->start;
# Each append to a dataset of its own: appends to one dataset queue on its
# lock, not on admission.
$node->safe_psql('postgres',
	"CREATE EXTENSION lake; SELECT lake.create_dataset(d) FROM unnest('{h1,h2,w1,w2}'::text[]) d;");

sub usage { return $node->safe_psql('postgres', 'SELECT slots_in_use, bytes_reserved FROM lake.admission()'); }

# Background session $s (backend $pid) appends $bytes bytes as operation
# $name of dataset $name, printing "appended" once admitted; checks that
# the append sleeps waiting for admission.
sub append_waits
{
	my ($s, $pid, $name, $bytes, $what) = @_;
	$s->query_until(qr/waiting/,
		"\\echo waiting\nSELECT lake.append('$name', 't', '$name', decode(repeat('ab', $bytes), 'hex'));\n\\echo appended\n");
	ok( $node->poll_query_until('postgres',
			"SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $pid"),
		$what);
}

# A session holding an append of $bytes bytes to dataset $name (operation
# $name) in an open transaction.
sub holder
{
	my ($name, $bytes) = @_;
	my $s = $node->background_psql('postgres');
	$s->query_safe('BEGIN');
	$s->query_safe("SELECT lake.append('$name', 't', '$name', decode(repeat('ab', $bytes), 'hex'))");
	return $s;
}

# A session whose append of $bytes bytes to $name sleeps waiting for
# admission: (session, its backend pid).
sub sleeper
{
	my ($name, $bytes, $what) = @_;
	my $s   = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	append_waits($s, $pid, $name, $bytes, $what);
	return ($s, $pid);
}

# Two holders, each with an append in an open transaction: 1000 + 400 of
# the 1500 bytes.
my %holder = (h1 => holder('h1', 1000), h2 => holder('h2', 400));
is(usage(), '2|1400', 'the holders reserve 1400 of the 1500 bytes');

# Two waiters, the large one first: neither fits in the 100 bytes left.
my %waiter;
foreach my $w ([ 'w1', 1000 ], [ 'w2', 300 ])
{
	my ($name, $bytes) = @$w;
	$waiter{$name} = [ sleeper($name, $bytes, "$name ($bytes bytes) sleeps waiting for admission") ];
}

# The small holder ends: 500 bytes free. The release wakes w1, which
# cannot use them; w2 can, and must not wait out its 60 s.
my $t0 = Time::HiRes::time();
$holder{h2}->query_safe('COMMIT');
my $out  = $waiter{w2}[0]->query_until(qr/appended/, '');
my $took = Time::HiRes::time() - $t0;
like($out, qr/^\d+\n/, 'w2 is admitted and appends');
cmp_ok($took, '<', 30, "w2 was woken by the release (${took}s), not by its 60 s timeout");
is( $node->safe_psql('postgres',
		"SELECT wait_event_type FROM pg_stat_activity WHERE pid = $waiter{w1}[1]"),
	'Extension', 'w1 still waits: 1000 bytes do not fit beside h1');

# The large holder ends: w1 fits now.
$holder{h1}->query_safe('COMMIT');
like($waiter{w1}[0]->query_until(qr/appended/, ''), qr/^\d+\n/, 'w1 is admitted once h1 ends');
ok($node->poll_query_until('postgres', 'SELECT slots_in_use, bytes_reserved FROM lake.admission()', '0|0'),
	'nothing is held afterwards');
is( $node->safe_psql('postgres',
		"SELECT string_agg(v.operation_id, ',' ORDER BY v.operation_id) FROM unnest('{h1,h2,w1,w2}'::text[]) d, lake.versions(d) v"),
	'h1,h2,w1,w2', 'every append made its version');
is($node->safe_psql('postgres', 'SELECT rejected FROM lake.admission()'), '0', 'nobody was refused');

$_->quit for (values %holder);
$_->[0]->quit for (values %waiter);

# The limits in force are the ones the worker published at its reload: a
# statement that began before the reload is held to them at once, without
# reading the configuration itself (a session inside a long CALL).
# (It waits for admission the queue wait its session started with: 200 ms.)
sub queue_wait
{
	my ($ms) = @_;
	$node->safe_psql('postgres', "ALTER SYSTEM SET lake.admission_queue_wait = '${ms}ms'; SELECT pg_reload_conf();");
	$node->poll_query_until('postgres', "SELECT current_setting('lake.admission_queue_wait')::float8 = $ms")
	  or die "lake.admission_queue_wait did not become $ms ms";
}
queue_wait(200);
$node->safe_psql('postgres', q{
CREATE FUNCTION wait_limit(n int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE stop timestamptz := clock_timestamp() + interval '60 s'; got int;
BEGIN
    LOOP
        SELECT max_concurrent INTO got FROM lake.admission();
        EXIT WHEN got = n OR clock_timestamp() > stop;
        PERFORM pg_sleep(0.01);
    END LOOP;
    PERFORM lake.append('g0', 't', 'g0', '\x01'::bytea);
    RETURN got || ' admitted';
EXCEPTION WHEN insufficient_resources THEN
    RETURN got || ' refused';
END $$;
SELECT lake.create_dataset(d) FROM unnest('{g0,g1,g2,g3,g4,g5,k1,k2}'::text[]) d;});
my @keep;
for my $k (qw(k1 k2))
{
	my $s = $node->background_psql('postgres');
	$s->query_safe("BEGIN; SELECT lake.append('$k', 't', '$k', '\\x01'::bytea)");
	push @keep, $s;
}
my $long = $node->background_psql('postgres');
$long->query_until(qr/polling/, "\\echo polling\nSELECT wait_limit(2);\n\\echo polled\n");
$node->safe_psql('postgres', 'ALTER SYSTEM SET lake.max_concurrent_appends = 2; SELECT pg_reload_conf();');
like($long->query_until(qr/polled/, ''), qr/^2 refused\n/,
	'a statement begun before the reload sees the published limit of 2 slots, and is held to it');
$long->quit;
$_->query_safe('COMMIT') for @keep;
$_->quit for @keep;
queue_wait(60000);

# A savepoint rolled back gives back what the permit grew by in it, and
# that counts as a release: the waiter it wakes first, which needs a slot
# and finds none, passes the wake-up on to the one the bytes are enough for.
my $c = $node->background_psql('postgres');
$c->query_safe('BEGIN');
$c->query_safe("SELECT lake.append('g1', 't', 'g1', decode(repeat('ab', 100), 'hex'))");
$c->query_safe('SAVEPOINT s');
$c->query_safe("SELECT lake.append('g2', 't', 'g2', decode(repeat('ab', 1000), 'hex'))");
my $b = $node->background_psql('postgres', on_error_stop => 0);
my $bpid = $b->query_safe('SELECT pg_backend_pid()');
$b->query_safe('BEGIN');
$b->query_safe("SELECT lake.append('g3', 't', 'g3', decode(repeat('ab', 300), 'hex'))");
is(usage(), '2|1300', 'both slots held: one grown to 1000 bytes in a savepoint, one of 300');
my $a = $node->background_psql('postgres', on_error_stop => 0);
my $apid = $a->query_safe('SELECT pg_backend_pid()');
append_waits($a, $apid, 'g4', 10, 'an append needing a slot waits');
append_waits($b, $bpid, 'g5', 600, 'behind it, a permit growing to 600 bytes waits: 1600 do not fit');
$t0 = Time::HiRes::time();
$c->query_safe('ROLLBACK TO SAVEPOINT s');
$out  = $b->query_until(qr/appended/, '');
$took = Time::HiRes::time() - $t0;
like($out, qr/^\d+\n/, 'the savepoint rolled back, the grown permit is admitted');
cmp_ok($took, '<', 30, "woken by the give-back (${took}s), not by a 60 s timeout");
is( $node->safe_psql('postgres', "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $apid"),
	'Extension', 'the append needing a slot still waits');
is(usage(), '2|700', 'what is held: 100 and 600 bytes');
$c->query_safe('COMMIT');
$b->query_safe('COMMIT');
like($a->query_until(qr/appended/, ''), qr/^\d+\n/, 'and it is admitted once a slot is free');
is( $node->safe_psql('postgres',
		"SELECT string_agg(v.operation_id, ',' ORDER BY v.operation_id) FROM unnest('{g1,g2,g3,g4,g5}'::text[]) d, lake.versions(d) v"),
	'g1,g3,g4,g5', 'the rolled-back append left no version, every other one did');
$_->quit for ($a, $b, $c);

# A call counts once in lake.admission().waited, however often it waits:
# a commit_append waits for a slot, then for the bytes of its largest
# chunk (600 beside a holder's 1000 of the 1500).
$node->safe_psql('postgres', "SELECT lake.create_dataset(d) FROM unnest('{cw,ca,cb}'::text[]) d");
my $stage = $node->safe_psql('postgres', "SELECT lake.begin_append('cw', 't', 'cw')");
$node->safe_psql('postgres', "SELECT lake.append_chunk($stage, 0, decode(repeat('ab', 600), 'hex'))");
my $waited = $node->safe_psql('postgres', 'SELECT waited FROM lake.admission()');
my %hold = (ca => holder('ca', 1000), cb => holder('cb', 1));
my $cm = $node->background_psql('postgres', on_error_stop => 0);
my $cmpid = $cm->query_safe('SELECT pg_backend_pid()');
$cm->query_until(qr/waiting/, "\\echo waiting\nSELECT lake.commit_append($stage);\n\\echo committed\n");
ok($node->poll_query_until('postgres', "SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $cmpid"),
	'a commit_append waits for a slot');
$hold{cb}->query_safe('COMMIT');
ok($node->poll_query_until('postgres', 'SELECT slots_in_use, bytes_reserved FROM lake.admission()', '2|1000'),
	'then, with a slot, for the bytes of its largest chunk');
$hold{ca}->query_safe('COMMIT');
like($cm->query_until(qr/committed/, ''), qr/^\d+\n/, 'and commits once they are free');
is($node->safe_psql('postgres', 'SELECT waited FROM lake.admission()'), $waited + 1,
	'lake.admission().waited counts it once');
$_->quit for ($cm, values %hold);

# A sleeper the release woke, ended before it ran again (cancelled, or
# terminated), passes the wake-up on as it leaves: the append behind it,
# which the freed bytes fit, is admitted at once.
foreach my $end ('pg_cancel_backend', 'pg_terminate_backend')
{
	my $r = $end eq 'pg_cancel_backend' ? 'xc' : 'xt';
	$node->safe_psql('postgres',
		"SELECT lake.create_dataset(d) FROM unnest('{${r}h1,${r}h2,${r}a,${r}b}'::text[]) d");
	my %h = ("${r}h1" => holder("${r}h1", 1000), "${r}h2" => holder("${r}h2", 400));
	my ($sa, $sapid) = sleeper("${r}a", 300, "$end: the first sleeper waits");
	my ($sb) = sleeper("${r}b", 150, "$end: the second sleeper waits behind it");

	# Stopped, the first sleeper is woken by the release and ended before
	# it runs again.
	kill 'STOP', $sapid;
	$t0 = Time::HiRes::time();
	$h{"${r}h2"}->query_safe('COMMIT');
	$node->safe_psql('postgres', "SELECT $end($sapid)");
	kill 'CONT', $sapid;
	$out  = $sb->query_until(qr/appended/, '');
	$took = Time::HiRes::time() - $t0;
	like($out, qr/^\d+\n/, "$end: the second sleeper is admitted");
	cmp_ok($took, '<', 30, "$end: passed the wake-up on (${took}s), not at its 60 s timeout");
	ok($node->poll_query_until('postgres', 'SELECT slots_in_use, bytes_reserved FROM lake.admission()', '1|1000'),
		"$end: only the remaining holder's bytes are held");
	$h{"${r}h1"}->query_safe('COMMIT');
	$_->quit for ($sb, values %h);
	eval { $sa->quit };
}
is( $node->safe_psql('postgres',
		"SELECT string_agg(v.operation_id, ',' ORDER BY v.operation_id) FROM unnest('{xca,xcb,xta,xtb}'::text[]) d, lake.versions(d) v"),
	'xcb,xtb', 'the ended sleepers made no version');
$node->stop;
done_testing();
