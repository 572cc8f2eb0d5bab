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

# Two holders, each with an append in an open transaction: 1000 + 400 of
# the 1500 bytes.
my %holder;
foreach my $h ([ 'h1', 1000 ], [ 'h2', 400 ])
{
	my ($name, $bytes) = @$h;
	my $s = $node->background_psql('postgres');
	$s->query_safe('BEGIN');
	$s->query_safe("SELECT lake.append('$name', 't', '$name', decode(repeat('ab', $bytes), 'hex'))");
	$holder{$name} = $s;
}
is(usage(), '2|1400', 'the holders reserve 1400 of the 1500 bytes');

# Two waiters, the large one first: neither fits in the 100 bytes left.
my %waiter;
foreach my $w ([ 'w1', 1000 ], [ 'w2', 300 ])
{
	my ($name, $bytes) = @$w;
	my $s   = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	$s->query_until(qr/waiting/,
		"\\echo waiting\nSELECT lake.append('$name', 't', '$name', decode(repeat('cd', $bytes), 'hex'));\n\\echo appended\n");
	ok( $node->poll_query_until('postgres',
			"SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $pid"),
		"$name ($bytes bytes) sleeps waiting for admission");
	$waiter{$name} = [ $s, $pid ];
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
$node->stop;
done_testing();
