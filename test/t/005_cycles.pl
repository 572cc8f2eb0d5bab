# Cycle-coalesced persistence under load (SPEC §4): 16 clients cast with
# cast_durable at once, each walking its own owner through kanban.
# - every coordinate a client was given is in that owner's trajectory, at
#   that position and cycle; positions per owner are 1..n, no gap, no twin;
# - the seals made one transaction per cycle, not one per cast (counted in
#   transaction ids consumed) and cycles hold many casts;
# - a restart (clean and immediate) grows the epoch and loses no sealed cast.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $CLIENTS = 16;
my $CASTS   = 120;

# The harness turns fsync off; a seal's durable write is what lets the
# casts of other sessions gather behind it, so measure with it on. No
# autovacuum: an ANALYZE takes a transaction id, which the count of the
# seals' transaction ids below would take for the worker's.
my $node = lake_node('cycles', conf => "fsync = on\nautovacuum = off");
$node->start;
$node->safe_psql('postgres',
	"CREATE EXTENSION lake; SELECT lake.create_owner('c' || i) FROM generate_series(1, $CLIENTS) i;");

# One statement per client: $CASTS durable casts around the kanban loop
# Planning -> CognitiveWork -> Evaluation -> Commit -> Planning, printing
# each coordinate it was given.
sub durable_loop_sql
{
	my ($i) = @_;
	return qq{
SELECT 'c$i', (c).position, (c).cycle, (c).lsn
FROM generate_series(0, $CASTS - 1) g,
     LATERAL (SELECT (ARRAY['Planning','CognitiveWork','Evaluation','Commit'])[g % 4 + 1] AS f,
                     (ARRAY['CognitiveWork','Evaluation','Commit','Planning'])[g % 4 + 1] AS t) m,
     LATERAL lake.cast_durable('c$i', m.f, m.t, convert_to('{"client": $i, "step": ' || g || '}', 'UTF8')) c
ORDER BY g};
}

my $xid_before = $node->safe_psql('postgres', 'SELECT pg_current_xact_id()');
my $cycles_before = $node->safe_psql('postgres', 'SELECT count(*) FROM lake.cycles()');

my (@runs, @out, @err);
for my $i (1 .. $CLIENTS)
{
	my ($o, $e) = ('', '');
	push @out, \$o;
	push @err, \$e;
	push @runs,
	  IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'),
		  '-c', durable_loop_sql($i) ],
		'>', \$o, '2>', \$e);
}
my $all_ok = 1;
for my $i (0 .. $#runs)
{
	$runs[$i]->finish;
	$all_ok = 0 if $runs[$i]->result != 0;
}
ok($all_ok, "$CLIENTS clients cast $CASTS durable casts each without error")
  or diag(join("\n", map { $$_ } @err));

my $xid_after = $node->safe_psql('postgres', 'SELECT pg_current_xact_id()');
my $cycles = $node->safe_psql('postgres', 'SELECT count(*) FROM lake.cycles()') - $cycles_before;

# What the clients were told.
my %told;
my $acks = 0;
for my $o (@out)
{
	for my $line (split /\n/, $$o)
	{
		my ($owner, $pos, $cycle, $lsn) = split /\|/, $line;
		$told{"$owner|$pos"} = "$cycle|$lsn";
		$acks++;
	}
}
is($acks, $CLIENTS * $CASTS, 'every cast returned a coordinate');
is(scalar(keys %told), $acks, 'no two casts were given the same (owner, position)');

# What the log holds.
my %held;
for my $line (split /\n/,
	$node->safe_psql('postgres',
		"SELECT t.owner, t.position, t.cycle, c.lsn FROM lake.log() t JOIN lake.cycles() c USING (cycle)"))
{
	my ($owner, $pos, $cycle, $lsn) = split /\|/, $line;
	$held{"$owner|$pos"} = "$cycle|$lsn";
}
is_deeply(\%held, \%told, 'the sealed log holds exactly the coordinates the clients were given');

my $gapless = $node->safe_psql(
	'postgres', qq{
SELECT bool_and(n = $CASTS AND lo = 1 AND hi = $CASTS)
FROM (SELECT o.name, count(*) AS n, min(t.position) AS lo, max(t.position) AS hi
      FROM lake_data.owner o, LATERAL lake.trajectory(o.name) t GROUP BY o.name) x});
is($gapless, 't', 'each owner holds positions 1..n in its trajectory, no gap and no twin');

my $states = $node->safe_psql('postgres',
	"SELECT bool_and(s.phase = 'Planning' AND s.lap = $CASTS / 4 AND s.position = $CASTS AND s.pending = 0) "
	  . "FROM lake_data.owner o, LATERAL lake.owner_state(o.name) s");
is($states, 't', 'every owner is back in Planning after its laps, live state = its trajectory');

# One transaction per cycle: the seals consumed about one transaction id
# each (the worker's other work may add a few), far fewer than the casts.
my $xids = $xid_after - $xid_before - 1;
note("$acks casts in $cycles cycles; $xids transaction ids consumed");
cmp_ok($cycles, '<', 0.8 * $acks, 'casts were coalesced: far fewer cycles than casts');
cmp_ok($xids, '<=', $cycles + 5, 'one transaction per cycle, not per cast');
cmp_ok($xids, '>=', $cycles, 'and every cycle was a transaction of its own');

my $mean = $node->safe_psql('postgres', 'SELECT round(mean_casts_per_cycle::numeric, 1) FROM lake.stats()');
cmp_ok($mean, '>', 1, "lake.stats() reports $mean casts per cycle");

# Restarts: the epoch grows, nothing sealed is lost.
my $snapshot = $node->safe_psql('postgres', 'SELECT owner, position, cycle, seq, epoch FROM lake.log() ORDER BY cycle, seq');
foreach my $mode ('fast', 'immediate')
{
	my $epoch = $node->safe_psql('postgres', 'SELECT epoch FROM lake.stats()');
	$node->stop($mode);
	$node->start;
	ok($node->poll_query_until('postgres', "SELECT epoch > $epoch FROM lake.stats()"),
		"after a $mode restart the epoch grew past $epoch");
	is($node->safe_psql('postgres', 'SELECT owner, position, cycle, seq, epoch FROM lake.log() ORDER BY cycle, seq'),
		$snapshot, "after a $mode restart the log is unchanged");
	is( $node->safe_psql('postgres',
			"SELECT bool_and(s.phase = 'Planning' AND s.position = $CASTS) "
			  . "FROM lake_data.owner o, LATERAL lake.owner_state(o.name) s"),
		't', "after a $mode restart every owner is recovered in Planning at position $CASTS");
}

# New casts carry the new epoch and continue the positions.
my $next = $node->safe_psql('postgres',
	"SELECT (c).position FROM lake.cast_durable('c1', 'Planning', 'CognitiveWork') c");
is($next, $CASTS + 1, 'positions continue across restarts');
is( $node->safe_psql('postgres',
		"SELECT epoch = (SELECT epoch FROM lake.stats()) FROM lake.trajectory('c1', $CASTS)"),
	't', 'and the new landing carries the current epoch');

# lake.cycle_max_casts: with the interval an hour away and nobody waiting,
# the fifth pending cast (of a maximum of 5) has the worker seal at once,
# and the cycle holds exactly those five.
my $reloads = $node->safe_psql('postgres', 'SELECT config_reloads FROM lake.stats()');
$node->append_conf('postgresql.conf', "lake.cycle_interval = '1h'\nlake.cycle_max_casts = 5");
$node->reload;
ok($node->poll_query_until('postgres', "SELECT config_reloads > $reloads FROM lake.stats()"),
	'the worker has reloaded lake.cycle_interval = 1h, lake.cycle_max_casts = 5');
my $before = $node->safe_psql('postgres', 'SELECT count(*) FROM lake.cycles()');
$node->safe_psql('postgres',
	"SELECT lake.cast('c2', NULL, NULL, convert_to('max ' || i, 'UTF8')) FROM generate_series(1, 5) i");
ok($node->poll_query_until('postgres', "SELECT count(*) > $before FROM lake.cycles()"),
	'five pending casts are sealed without waiting for the interval');
is($node->safe_psql('postgres', 'SELECT casts FROM lake.cycles() ORDER BY cycle DESC LIMIT 1'),
	'5', 'in one cycle of five');

$node->stop;
done_testing();
