# Recovery from snapshots, and quarantine (SPEC §5).
# - Four rounds of casts, a snapshot (lake.checkpoint(), or the worker's
#   own every lake.checkpoint_cycles) and a restart (immediate, fast,
#   SIGKILL of the worker, immediate): each time every owner's live state
#   equals the replay of its trajectory, lake.recover() applies nothing,
#   recovery started from the newest snapshot and read only the landings
#   sealed after it (recovery_tail), a small part of the log.
# - Quarantine: kanban loses its Prune phase (lake_data.lifecycle updated by
#   hand) and the server restarts. The owner whose tail moves to Prune is
#   quarantined at the prefix it could apply, with a reason naming the
#   move; owners whose Prune moves are inside the snapshot, and owners
#   that never pruned, recover normally. Casts to the quarantined owner
#   get LK007 and queue nothing; lake.release_owner gets LK007 while the
#   lifecycle is still broken; the quarantine survives a restart; once
#   the lifecycle is restored, release_owner applies the rest of its
#   tail and the owner continues (Prune included), also after a restart.
#   An owner whose snapshot puts it in Prune is quarantined as well, and
#   released to its durable state once Prune is back.
# - Damaged stored bytes: a snapshot that does not decode, or whose row
#   names another cycle than its record, is passed over (the whole log
#   replays to the same states); a damaged cycle record
#   quarantines the owners with landings in it, at their prefix, while the
#   others recover, and release_owner applies it once repaired.
# - A quarantine put in lake_data.owner by hand without a reason is a
#   quarantine all the same, and a tenant role's lake.log() reads its row.
#
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node(
	'quarantine',
	conf => "restart_after_crash = on\n" . "lake.checkpoint_cycles = 5\n");
$node->start;

my @rounders = map { sprintf('r%02d', $_) } 1 .. 12;
my @others   = qw(v1 v2 v3 h1 h2);
# The registry's ids have a gap between the rounders and the others (an
# owner removed by hand before it had a cast), so recovery cannot find an
# owner by its id's rank alone.
$node->safe_psql('postgres',
	"CREATE EXTENSION lake; SELECT count(lake.create_owner(o)) FROM unnest('{@{[ join(',', @rounders) ]}}'::text[]) o");
my ($dup_state) = sql_error($node, "SELECT lake.create_owner('$rounders[0]')");
is($dup_state, '42710', 'a second owner of the same name is refused');
$node->safe_psql('postgres',
	"SELECT lake.create_owner('gap'); "
	  . "SELECT count(lake.create_owner(o)) FROM unnest('{@{[ join(',', @others) ]}}'::text[]) o; "
	  . "DELETE FROM lake_data.owner WHERE name = 'gap'");
is( $node->safe_psql('postgres',
		"SELECT max(id) - min(id) + 1 - count(*) FROM lake_data.owner"),
	'1', 'the owner ids have a gap');



# owner -> "phase|lap|position|pending|quarantined" replayed from the
# trajectories (kanban, from Planning); dies on a landing that does not fit.
sub replayed
{
	my %s;
	my %l;
	for my $line (
		split /\n/,
		$node->safe_psql(
			'postgres',
			"SELECT o.name, t.position, coalesce(t.from_phase, ''), coalesce(t.to_phase, ''), t.lap "
			  . "FROM lake_data.owner o, LATERAL lake.trajectory(o.name) t ORDER BY o.name, t.position"))
	{
		my %x;
		my $o;
		($o, @x{qw(position from to lap)}) = split /\|/, $line, -1;
		push @{ $l{$o} }, \%x;
	}
	for my $o (@rounders, @others)
	{
		my ($phase, $lap, $pos) = kanban_replay($o, $l{$o} // []);
		$s{$o} = "$phase|$lap|$pos|0|f";
	}
	return \%s;
}

# Durable casts walking the given owners $n steps each from their live
# state, every fifth a no-step cast; one session, one cycle per cast.
sub walk
{
	my ($n, @owners) = @_;
	my $state = live_states($node);
	my @sql;
	my %m;
	for my $o (@owners)
	{
		my ($phase, $lap) = split /\|/, $state->{$o};
		$m{$o} = [ $phase, $lap ];
	}
	for my $i (0 .. $n - 1)
	{
		for my $o (@owners)
		{
			my ($phase, $lap) = @{ $m{$o} };
			if ($i % 5 == 2)
			{
				push @sql, "SELECT lake.cast_durable('$o', NULL, NULL, '\\x01'::bytea, $lap);";
				next;
			}
			my $to = kanban_next($o, $phase, $lap);
			push @sql, "SELECT lake.cast_durable('$o', '$phase', '$to', NULL, $lap);";
			$m{$o} = [ $to, $to eq 'Planning' ? $lap + 1 : $lap ];
		}
	}
	$node->safe_psql('postgres', join("\n", @sql));
}

# A single durable cast; returns its position.
sub cast
{
	my ($o, $from, $to) = @_;
	my $move = defined $from ? "'$from', '$to'" : 'NULL, NULL';
	return $node->safe_psql('postgres', "SELECT (lake.cast_durable('$o', $move)).position");
}

sub epoch { return $node->safe_psql('postgres', 'SELECT epoch FROM lake.stats()'); }

sub restart
{
	my ($how) = @_;
	my $e = epoch();
	if ($how eq 'kill-worker')
	{
		my $pid = $node->safe_psql('postgres', 'SELECT worker_pid FROM lake.stats()');
		die "no worker pid" unless $pid =~ /^[1-9]\d*$/;
		kill 'KILL', $pid;
	}
	else
	{
		$node->stop($how);
		$node->start;
	}
	ok($node->poll_query_until('postgres', "SELECT epoch > $e FROM lake.stats()"),
		"$how restart: the worker has recovered under a new epoch");
}

sub states_replay
{
	my ($what) = @_;
	my $want = replayed();
	my $got  = live_states($node);
	is_deeply($got, $want, "$what: every owner's live state is the replay of its trajectory");
	is( $node->safe_psql('postgres',
			'SELECT sum(applied), count(*) FILTER (WHERE quarantined) FROM lake.recover()'),
		'0|0', "$what: lake.recover() applies nothing");
}

# ----------------------------------------------------------------------
# Four rounds: casts, a snapshot, a restart.
# ----------------------------------------------------------------------
my @rounds = (
	[ 'immediate',   'checkpoint' ],
	[ 'fast',        'worker' ],
	[ 'kill-worker', 'checkpoint' ],
	[ 'immediate',   'worker' ]);
my $r = 0;
for my $round (@rounds)
{
	my ($how, $snap) = @$round;
	$r++;
	walk(3, @rounders);    # 36 cycles: the worker snapshots on the way
	my $covered;
	if ($snap eq 'checkpoint')
	{
		$covered = $node->safe_psql('postgres', 'SELECT lake.checkpoint()');
		is($covered, $node->safe_psql('postgres', 'SELECT max(cycle) FROM lake.cycles()'),
			"round $r: lake.checkpoint() covers the sealed head (cycle $covered)");
		walk(1, @rounders[ 0 .. 2 ]);    # a 3-cycle tail, below lake.checkpoint_cycles
	}
	else
	{
		# Wait until the worker owes no snapshot: the newest is final.
		ok( $node->poll_query_until(
				'postgres',
				'SELECT sealed_cycle - last_snapshot < 5 AND last_snapshot = (SELECT max(cycle) FROM lake_data.snapshot) '
				  . 'FROM lake.stats()'),
			"round $r: the worker has taken its snapshots");
		$covered = $node->safe_psql('postgres', 'SELECT max(cycle) FROM lake_data.snapshot');
	}
	my $total = $node->safe_psql('postgres', 'SELECT count(*) FROM lake.log()');
	my $tail  = $node->safe_psql('postgres', "SELECT count(*) FROM lake.log($covered)");
	restart($how);

	my ($rs, $rt, $ra, $rq) = split /\|/,
	  $node->safe_psql('postgres',
		'SELECT recovery_snapshot, recovery_tail, recovery_applied, recovery_quarantined FROM lake.stats()');
	is($rs, $covered, "round $r: recovery started from the newest snapshot (cycle $covered)");
	is("$rt|$ra|$rq", "$tail|$tail|0",
		"round $r: it read and applied only the $tail landings after it, of $total");
	cmp_ok($rt * 4, '<', $total, "round $r: the tail is a small part of the log");
	states_replay("round $r");
}
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM lake_data.snapshot'),
	'<=', 2, 'at most the two newest snapshots are kept');

# ----------------------------------------------------------------------
# Quarantine.
# ----------------------------------------------------------------------
{
	my $reloads = $node->safe_psql('postgres', 'SELECT config_reloads FROM lake.stats()');
	$node->append_conf('postgresql.conf', 'lake.checkpoint_cycles = 1000');
	$node->reload;
	ok( $node->poll_query_until(
			'postgres', "SELECT config_reloads > $reloads FROM lake.stats()"),
		'the worker snapshots only every 1000 cycles now');
}

# Before the snapshot: v1 commits a lap, v2 and v3 prune one, h1 and h2
# commit; v3 stops in Prune.
cast($_, 'Planning', 'CognitiveWork'), cast($_, 'CognitiveWork', 'Evaluation') for @others;
cast($_, 'Evaluation', 'Commit'), cast($_, 'Commit', 'Planning') for qw(v1 h1 h2);
cast($_, 'Evaluation', 'Prune') for qw(v2 v3);
cast('v2', 'Prune', 'Planning');
my $snapshot = $node->safe_psql('postgres', 'SELECT lake.checkpoint()');

# After it: v1 prunes — the move that is about to become illegal.
my @v1 = (
	[ 'Planning',      'CognitiveWork' ],
	[ undef,           undef ],
	[ 'CognitiveWork', 'Evaluation' ],
	[ 'Evaluation',    'Prune' ],
	[ 'Prune',         'Planning' ],
	[ 'Planning',      'CognitiveWork' ]);
my @pos = map { cast('v1', @$_) } @v1;
is("@pos", '5 6 7 8 9 10', 'v1 cast positions 5..10 after the snapshot; 8 is Evaluation -> Prune');
cast($_, 'Planning', 'CognitiveWork') for qw(v2 h1);
cast('h1', 'CognitiveWork', 'Evaluation');
my $before = live_states($node);

# Break kanban: no Prune any more.
my $kanban = $node->safe_psql('postgres', "SELECT phases, edges FROM lake_data.lifecycle WHERE name = 'kanban'");
$node->safe_psql(
	'postgres', q{
UPDATE lake_data.lifecycle
   SET phases = '{Planning,CognitiveWork,Evaluation,Commit}',
       edges = '{{Planning,CognitiveWork},{CognitiveWork,Evaluation},{Evaluation,Commit},{Commit,Planning}}'
 WHERE name = 'kanban'});
restart('immediate');

my $reason_re = qr/landing 8 moves Evaluation -> Prune/;
sub v1_quarantined
{
	my ($what) = @_;
	my ($phase, $lap, $pos, $pending, $q, $reason) = split /\|/,
	  $node->safe_psql('postgres', "SELECT * FROM lake.owner_state('v1')");
	is("$phase|$lap|$pos|$pending|$q", 'Evaluation|1|7|0|t',
		"$what: v1 is quarantined at its applied prefix, position 7 (Evaluation, lap 1)");
	like($reason, $reason_re, "$what: the reason names the move ($reason)");
	my ($qpos, $qreason) = split /\|/,
	  $node->safe_psql('postgres', "SELECT quarantine_position, quarantine_reason FROM lake_data.owner WHERE name = 'v1'");
	is($qpos, 7, "$what: the quarantine is durable, at position 7");
	like($qreason, $reason_re, "$what: with its reason");
}
is($node->safe_psql('postgres', 'SELECT recovery_snapshot FROM lake.stats()'),
	$snapshot, "recovery started from the snapshot of cycle $snapshot: v1's Prune move was in the tail");
like(slurp_file($node->logfile), qr/lake recovery: epoch \d+, \d+ owners registered, the snapshot of cycle $snapshot, /,
	'the server log names that snapshot');
like(slurp_file($node->logfile), qr/lake recovery: epoch \d+, \d+ owners registered, no snapshot, /,
	'and said that the first recovery, of a new installation, had none');
v1_quarantined('after the restart');
{
	my ($q, $reason, $pos) = split /\|/,
	  $node->safe_psql('postgres', "SELECT quarantined, reason, position FROM lake.owner_state('v3')");
	is($q, 't', 'v3, in Prune in the snapshot, is quarantined too');
	like($reason, qr/Prune/, "with a reason naming the phase ($reason)");
	note("v3 is quarantined at position $pos (its snapshot watermark is 3)");
}
is($node->safe_psql('postgres', 'SELECT recovery_quarantined FROM lake.stats()'),
	'2', 'recovery quarantined those two owners, no other');
{
	my $now = live_states($node);
	is_deeply({ map { ($_ => $now->{$_}) } grep { $_ ne 'v1' && $_ ne 'v3' } @rounders, @others },
		{ map { ($_ => $before->{$_}) } grep { $_ ne 'v1' && $_ ne 'v3' } @rounders, @others },
		'every other owner recovered to its state before the restart (v2 pruned inside the snapshot)');
	my $want = replayed();
	is_deeply({ map { ($_ => $now->{$_}) } grep { $_ ne 'v1' && $_ ne 'v3' } @rounders, @others },
		{ map { ($_ => $want->{$_}) } grep { $_ ne 'v1' && $_ ne 'v3' } @rounders, @others },
		'and that state is the replay of its trajectory');
	note("v3 (in Prune in the snapshot): $now->{v3}");
}

for my $call (
	"SELECT lake.cast('v1', 'Evaluation', 'Commit')",
	"SELECT lake.cast('v1', NULL, NULL)",
	"SELECT lake.cast_durable('v1', 'Evaluation', 'Commit')")
{
	my ($state, $msg) = sql_error($node, $call);
	is($state, 'LK007', "$call: LK007 ($msg)");
}
is($node->safe_psql('postgres', "SELECT pending, position FROM lake.owner_state('v1')"),
	'0|7', 'the refused casts queued nothing');
is( $node->safe_psql('postgres',
		"SELECT applied, position, quarantined FROM lake.recover('v1')"),
	'0|7|t', 'lake.recover(v1) applies nothing to a quarantined owner');

my ($state, $msg) = sql_error($node, "SELECT lake.release_owner('v1')");
is($state, 'LK007', "release_owner while the lifecycle is still broken: LK007 ($msg)");
v1_quarantined('after the refused release');

restart('fast');
v1_quarantined('after another restart, lifecycle still broken');

# Restore kanban, release v1: it applies 8..10 and continues.
my ($phases, $edges) = split /\|/, $kanban;
$node->safe_psql('postgres', "UPDATE lake_data.lifecycle SET phases = '$phases', edges = '$edges' WHERE name = 'kanban'");
{
	# A release its transaction does not commit is not logged as one.
	my ($rc, $out, $err) = $node->psql('postgres', "SELECT lake.release_owner('v1'), 1 / (0 * random())::int");
	isnt($rc, 0, 'a release whose statement then fails is rolled back');
	v1_quarantined('after the rolled-back release');
	unlike(slurp_file($node->logfile), qr/owner "v1" released from quarantine/,
		'and the server log does not say it was released');
}
{
	my ($rc, $out, $err) = $node->psql('postgres', "SELECT lake.release_owner('v1')");
	is($rc, 0, 'release_owner succeeds once the lifecycle is restored') or diag($err);
	like($err, qr/owner "v1" released at position 10 \(3 landings applied\)/, 'and says what it applied');
	my @lines = slurp_file($node->logfile) =~ /LOG:  lake: owner "v1" released from quarantine at position 10 by role "\w+"/g;
	is(scalar(@lines), 1, 'the server log, which has the quarantine, has the release too, once');
}
{
	my ($rc, $out, $err) = $node->psql('postgres', "SELECT lake.release_owner('v3')");
	is($rc, 0, 'v3 is released too') or diag($err);
	is($node->safe_psql('postgres', "SELECT phase, lap, position, quarantined FROM lake.owner_state('v3')"),
		'Prune|0|3|f', 'v3 is back in Prune at position 3, where its log leaves it');
}
is($node->safe_psql('postgres', "SELECT phase, lap, position, pending, quarantined, reason IS NULL FROM lake.owner_state('v1')"),
	'CognitiveWork|2|10|0|f|t', 'v1 is live again at position 10, where its log leaves it');
is( $node->safe_psql('postgres', "SELECT count(*) FROM lake_data.owner WHERE name = 'v1' AND quarantine_reason IS NULL AND quarantine_position IS NULL"),
	'1', 'the durable quarantine is cleared');

# v1 continues — through Prune, the phase that came back.
is(cast('v1', 'CognitiveWork', 'Evaluation'), 11, 'v1 continues at position 11');
is(cast('v1', 'Evaluation', 'Prune'), 12, 'and prunes again at 12');
{
	is( $node->safe_psql('postgres', "SELECT phase, lap, position FROM lake.owner_state('v1')"),
		'Prune|2|12', 'its live state follows the restored lifecycle');
}
is(cast('v1', 'Prune', 'Planning'), 13, 'and it returns to Planning at 13');
is( $node->safe_psql('postgres', "SELECT phase, lap, position FROM lake.owner_state('v1')"),
	'Planning|3|13', 'starting lap 3');

restart('immediate');
states_replay('after the release and a restart');

# ----------------------------------------------------------------------
# Damaged stored bytes (the decoders fuzzed in test/fuzz).
#
# A newest snapshot that does not decode is passed over: recovery warns
# and replays the whole log, to the same states.
{
	my $snap = $node->safe_psql('postgres', 'SELECT lake.checkpoint()');
	$node->safe_psql('postgres', "UPDATE lake_data.snapshot SET data = '\\x5a00000000' WHERE cycle = $snap");
	my $offset = -s $node->logfile;
	restart('fast');
	like(slurp_file($node->logfile, $offset),
		qr/the snapshot of cycle $snap is damaged; replaying the whole log/,
		'a damaged snapshot is reported');
	is($node->safe_psql('postgres', 'SELECT recovery_snapshot, recovery_quarantined FROM lake.stats()'),
		'0|0', 'and recovery started from the beginning of the log, quarantining nobody');
	states_replay('after a damaged snapshot');
}

# A snapshot row whose cycle was altered (moved past landings it does not
# hold) no longer matches the cycle its record was taken at: it is passed
# over like a damaged one, where recovery used to skip those landings.
{
	push @others, 's1';
	$node->safe_psql('postgres', "SELECT lake.create_owner('s1')");
	my $snap = $node->safe_psql('postgres', 'SELECT lake.checkpoint()');
	is(cast('s1', 'Planning', 'CognitiveWork'), 1, 's1 cast after the snapshot');
	my $past = $node->safe_psql('postgres', 'SELECT sealed_cycle FROM lake.stats()');
	cmp_ok($past, '>', $snap, "a cycle ($past) sealed after the snapshot of cycle $snap");
	$node->safe_psql('postgres', "UPDATE lake_data.snapshot SET cycle = $past WHERE cycle = $snap");
	my $offset = -s $node->logfile;
	restart('fast');
	like(slurp_file($node->logfile, $offset),
		qr/the snapshot of cycle $past is damaged; replaying the whole log\n.*DETAIL:  The check of the snapshot found: the record was written for another cycle/,
		'the moved snapshot is reported as damaged');
	is($node->safe_psql('postgres', "SELECT phase, position FROM lake.owner_state('s1')"),
		'CognitiveWork|1', "s1's landing after the snapshot's true cycle is applied");
	states_replay('after a snapshot row was moved');
	$node->safe_psql('postgres', "DELETE FROM lake_data.snapshot WHERE cycle = $past");
}

# A damaged cycle record: the owners with landings in it are quarantined
# at their applied prefix, none of its landings (nor their later ones) is
# applied, every other owner recovers. With the bytes repaired,
# release_owner applies the rest.
{
	push @others, qw(d1 d2);
	$node->safe_psql('postgres', "SELECT lake.create_owner(o) FROM unnest('{d1,d2}'::text[]) o");
	is(cast('d2', 'Planning', 'CognitiveWork'), 1, 'd2 at 1 before the damaged cycle');
	my $bad = $node->safe_psql('postgres',
		"SELECT (lake.cast_durable('d2', 'CognitiveWork', 'Evaluation')).cycle");
	is(cast('d2', 'Evaluation', 'Commit'),   3, 'd2 at 3 after it');
	is(cast('d1', 'Planning', 'CognitiveWork'), 1, 'd1 cast in a later cycle');
	# Enough cycles after it to close their block of 64: d2's replay then
	# walks the block's entry and decodes its cycle after the damaged one.
	push @others, 'fill';
	$node->safe_psql('postgres',
		"SELECT lake.create_owner('fill');\n"
		  . "SELECT lake.cast_durable('fill', NULL, NULL);\n" x 70);
	cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM lake_data.owner_block'),
		'>', 0, 'the block holding the damaged cycle is closed');
	my $good = $node->safe_psql('postgres', "SELECT encode(data, 'hex') FROM lake_data.cycle WHERE cycle = $bad");
	# Recovery must read the damaged cycle: no snapshot may cover it.
	$node->safe_psql('postgres',
		"DELETE FROM lake_data.snapshot WHERE cycle >= $bad; UPDATE lake_data.cycle SET data = '\\x5a0000000028b52ffd00' WHERE cycle = $bad");
	restart('immediate');
	is( $node->safe_psql('postgres',
			"SELECT o, s.phase, s.position, s.quarantined, s.reason FROM unnest('{d1,d2}'::text[]) o, lake.owner_state(o) s ORDER BY o"),
		"d1|CognitiveWork|1|f|\n"
		  . "d2|CognitiveWork|1|t|cycle $bad is damaged: corrupt compressed frame",
		'the owner of the damaged cycle is quarantined at its prefix; d1 recovers');
	my ($state) = sql_error($node, "SELECT lake.cast('d2', 'CognitiveWork', 'Evaluation')");
	is($state, 'LK007', 'a cast to it is LK007');
	my $msg;
	($state, $msg) = sql_error($node, "SELECT lake.release_owner('d2')");
	is($state, 'LK007', 'release_owner is refused while the cycle is still damaged');
	like($msg, qr/owner "d2" still cannot be recovered/, 'saying the owner still cannot be recovered');
	my (undef, undef, $err) = $node->psql('postgres', "SELECT lake.release_owner('d2')");
	like($err, qr/DETAIL:  Its recovery stopped at position 1: cycle $bad is damaged: corrupt compressed frame\./,
		'with the reason of its replay, intact');
	is($node->safe_psql('postgres', "SELECT reason FROM lake.owner_state('d2')"),
		"cycle $bad is damaged: corrupt compressed frame", 'and the quarantine keeps its reason');
	$node->safe_psql('postgres', "UPDATE lake_data.cycle SET data = decode('$good', 'hex') WHERE cycle = $bad");
	$node->safe_psql('postgres', "SELECT lake.release_owner('d2')");
	is($node->safe_psql('postgres', "SELECT phase, position, quarantined FROM lake.owner_state('d2')"),
		'Commit|3|f', 'with the bytes repaired, release_owner applies the rest of its log');
	restart('fast');
	states_replay('after the damaged cycle was repaired');
}

# --- a quarantine put in by hand, without a reason ---------------------------
# lake_data.owner's quarantine_position is the durable quarantine; its
# reason goes with it. A row with the position and no reason (an edit by
# hand) is still a quarantine: recovery holds the owner at that position and
# casts get LK007, where the owner used to come back live at the limit (its
# next cast took a position already in the log); and a tenant role's
# lake.log() reads the row, where its backend crashed on the NULL reason.
{
	$node->safe_psql('postgres', "SELECT lake.create_owner('nr')");
	is(cast('nr', 'Planning', 'CognitiveWork') . cast('nr', 'CognitiveWork', 'Evaluation'),
		'12', 'nr has two durable landings');
	$node->safe_psql('postgres', q{
CREATE ROLE nr_reader;
GRANT USAGE ON SCHEMA lake TO nr_reader;
SELECT lake.grant_tenant('nr_reader', 'default');
UPDATE lake_data.owner SET quarantine_position = 1 WHERE name = 'nr';});
	restart('immediate');
	is($node->safe_psql('postgres', "SELECT phase, position, quarantined, reason FROM lake.owner_state('nr')"),
		'CognitiveWork|1|t|quarantined in lake_data.owner with no reason recorded',
		'recovery holds nr quarantined at position 1, saying no reason was recorded');
	my ($state) = sql_error($node, "SELECT lake.cast('nr', 'CognitiveWork', 'Evaluation')");
	is($state, 'LK007', 'a cast to it is LK007');
	is($node->safe_psql('postgres',
			"SET ROLE nr_reader; SELECT string_agg(position::text, ',' ORDER BY position) FROM lake.log() WHERE owner = 'nr'"),
		'1,2', "a tenant role's lake.log() reads nr's landings");
	$node->safe_psql('postgres', "SELECT lake.release_owner('nr')");
	is($node->safe_psql('postgres', "SELECT phase, position, quarantined FROM lake.owner_state('nr')"),
		'Evaluation|2|f', 'released, nr applies the rest of its log');
}

$node->stop;
done_testing();
