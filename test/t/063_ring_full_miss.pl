# A cast that finds the cycle buffer full while a seal is being published.
# The seal frees room, too little for it; the cast counts its miss and
# wakes the worker, which seals early for it. A seal that counted the
# misses as answered after it let the cycle lock go could count that later
# miss too: the worker then waited for lake.cycle_interval, and the cast
# for its lake.admission_queue_wait, to a 53000. gdb holds a session's
# lake.seal() right after it let the lock go; the worker is stopped until
# the cast has missed.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

die 'gdb is required (scripts/setup.sh installs it)'
  unless grep { -x "$_/gdb" } split /:/, $ENV{PATH};

# The first statement after cycle_apply_seal lets the cycle lock go.
my ($line, $in, $freed, $released) = (0, 0, 0, 0);
open(my $src, '<', 'src/cycle.c') or die "src/cycle.c: $!";
while (<$src>)
{
	$in = 1 if /^cycle_apply_seal\(/;
	next unless $in;
	$freed = 1 if /cs->room_freed\+\+;/;
	$released = 1 if $freed && /LWLockRelease\(&cs->lock\);/;
	if ($released && $. && !/LWLockRelease/ && /\S/ && !m{^\s*(/\*|\*)})
	{
		$line = $.;
		last;
	}
}
close $src;
ok($line > 0, "the line after the seal lets the cycle lock go: cycle.c:$line");

my $node = lake_node('ring_full_miss',
	conf => "lake.cycle_buffer_size = '64kB'\nlake.cycle_interval = '60s'\n"
	  . "lake.admission_queue_wait = '3s'\n");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_owner('m1');
SELECT lake.create_owner('m2');
});
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the worker serves');
my $wpid = $node->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()');
my $big = q{decode(repeat('ab', 16000), 'hex')};

# A small cast for a session's seal to cut; the seal is held as it publishes.
$node->safe_psql('postgres', q{SELECT lake.cast('m1', NULL, NULL, '\x01'::bytea)});
my ($s, $spid, $g) = held_session($node, 'cycle_apply_seal', 'SELECT lake.seal();');
ok(gdb_stopped($g), 'the seal is held before it publishes') or diag("gdb: $g->{out}");

# The buffer fills behind it; the worker is stopped.
for my $i (1 .. 4)
{
	$node->safe_psql('postgres', "SELECT lake.cast('m2', NULL, NULL, $big)");
}
kill 'STOP', $wpid;
ok(gdb($g, "break cycle.c:$line\ncontinue\n", qr/Continuing/), 'the seal goes on');
ok(defined wait_until(30, sub { $g->{h}->pump_nb; $g->{out} =~ /Breakpoint 2[,.]/ }),
	'it has freed its room and let the cycle lock go') or diag("gdb: $g->{out}");

# A large cast misses now: the room freed is too little.
my $c = background($node, "SELECT lake.cast('m2', NULL, NULL, $big) IS NOT NULL");
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE query LIKE 'SELECT lake.cast(''m2''%' AND wait_event = 'Extension'}),
	'the cast found the buffer full and waits for room');
gdb_let_go($g);
kill 'CONT', $wpid;

ok(defined wait_until(30, sub { finished($c) }), 'the cast returns');
is("$c->{out}$c->{err}", "t\n", 'accepted: the worker sealed early for it, within the queue wait');
$s->query_until(qr/done/, '');
$s->quit;

$node->stop;
done_testing();
