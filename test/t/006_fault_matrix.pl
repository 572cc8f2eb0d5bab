# A fault matrix for cast_durable under load (SPEC §4, §5, §6), in the
# spirit of Kafka's transaction tests. 8 clients, each one psql session
# running separate cast_durable statements (so every coordinate it was
# given is printed before it dies), walk 13 owners each (104 in all)
# round-robin through kanban — Commit and Prune laps, no-step casts, an
# operation id and the expected lap on every cast. While they cast, one
# fault strikes per round:
#   (a) immediate shutdown + start     (b) fast shutdown + start
#   (c) SIGKILL of the lake worker     (d) SIGKILL of one casting backend
#   (e) SIGTERM of the lake worker (it comes back; the server stays up)
#   (f) pg_terminate_backend of one casting backend (nothing restarts)
# After each fault:
# - every coordinate a client was told (owner, position, cycle) is in
#   lake.log() with the payload of the statement that got it, from this
#   and every earlier round; no (owner, position) twice, no cast sealed
#   twice; every landing in the log was acknowledged or was the one
#   statement its client had in flight at a fault: nothing invented;
# - each owner's positions are 1..n; its live state (lake.owner_state)
#   equals the state computed here by replaying its trajectory from
#   Planning, checking every edge and lap; lake.trajectory agrees with
#   lake.log; lake.recover() then applies nothing;
# - the epoch grew (faults that restart the server or the worker);
#   recovery started from a snapshot and read exactly the landings above
#   it (recovery_tail = landings after its cycle), applying each;
# - half the statements are lake.cast + await_durable (the receipt is
#   printed first): the receipt of a cast in flight at the fault, awaited
#   after recovery, gives at once the coordinate the log holds for it, or
#   LK006 when it is not in the log — never a hang, never a lie;
# - the statement in flight, re-sent with its operation id, returns the
#   coordinate it was sealed at, or lands once if it was lost.
# Also: a receipt accepted but never sealed (lake.cycle_interval = 1h,
# nobody awaiting) fails await_durable with LK006 at once after an
# immediate shutdown; and a session terminated while it awaits leaves no
# waiter behind (the worker waits out lake.cycle_interval again).
#
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes;
use LakeTAP;

my $CLIENTS = 8;
my $PER     = 13;     # owners per client
# Statements per owner and round, which the fault cuts short: enough that
# the clients are still casting when it strikes, however slowly the test's
# own polls start on a busy machine (30 were all done before it, once).
my $STEPS   = 150;
my $RUNTHROUGH = 30;  # ... in rounds the clients survive, and run to the end
my $AFTER   = 250;    # casts sealed in a round before the fault strikes

# fsync on: a seal's flush is what lets casts gather (and what a crash
# tests). Snapshots every 5 cycles, so recovery starts from one.
my $node = lake_node(
	'faults',
	conf => "fsync = on\n"
	  . "restart_after_crash = on\n"
	  . "lake.checkpoint_cycles = 5\n");
$node->start;
my $scripts = PostgreSQL::Test::Utils::tempdir();    # the clients' statement files

my @owners = map { sprintf('o%03d', $_) } 1 .. $CLIENTS * $PER;
$node->safe_psql('postgres',
	"CREATE EXTENSION lake; SELECT count(lake.create_owner(format('o%s', lpad(i::text, 3, '0')))) "
	  . "FROM generate_series(1, "
	  . scalar(@owners) . ") i");

# await_durable of a receipt, as (position, cycle, 'ok') or the SQLSTATE it
# fails with; a NULL position with 'ok' would be a timeout (a hang).
$node->safe_psql(
	'postgres', q{
CREATE FUNCTION await_or_state(r lake.receipt, OUT got_position bigint, OUT got_cycle bigint, OUT state text)
LANGUAGE plpgsql AS $$
BEGIN
	SELECT (c).position, (c).cycle INTO got_position, got_cycle FROM lake.await_durable(r, 10000) c;
	state := 'ok';
EXCEPTION WHEN OTHERS THEN
	state := SQLSTATE;
END $$});

# ----------------------------------------------------------------------
# kanban, as the test understands it
# ----------------------------------------------------------------------



# ----------------------------------------------------------------------
# reading the node
# ----------------------------------------------------------------------
# lake.stats() as a hash, in one query.
sub lake_stats
{
	my @cols = qw(worker_pid worker_state worker_starts config_reloads epoch casts_sealed
	  casts_pending recovery_snapshot recovery_tail recovery_applied recovery_quarantined);
	my %s;
	@s{@cols} = split /\|/,
	  $node->safe_psql('postgres', 'SELECT ' . join(', ', @cols) . ' FROM lake.stats()'), -1;
	return \%s;
}



# ----------------------------------------------------------------------
# what the clients were told, over all rounds
# ----------------------------------------------------------------------
my %acked;      # "owner|position" -> { cycle, payload }
my %allowed;    # payload -> 1: acknowledged, or in flight at a fault
my %sent;       # payload -> the statement

# Client c's statements for a round, from the owners' current states;
# every ninth statement is a no-step cast.
sub client_statements
{
	my ($c, $round, $state, $steps) = @_;
	my @mine = map { $owners[$_] } grep { $_ % $CLIENTS == $c } 0 .. $#owners;
	my $stmts = kanban_statements($round, \@mine, $state, $steps, sub { $_[0] % 9 == 4 });
	$sent{ $_->{payload} } = $_ for @$stmts;
	return $stmts;
}

# Every owner's (phase, lap), which must agree with its live state.
sub current_state
{
	my $live = live_states($node);
	my %state;
	for my $o (@owners)
	{
		my ($phase, $lap) = split /\|/, $live->{$o};
		$state{$o} = { phase => $phase, lap => $lap };
	}
	return \%state;
}

# Start the clients of a round; returns their handles and buffers.
sub start_clients
{
	my ($round, $steps) = @_;
	my $state = current_state();
	my @clients;
	for my $c (0 .. $CLIENTS - 1)
	{
		my $stmts = client_statements($c, $round, $state, $steps);
		my $file = "$scripts/faults_${round}_$c.sql";
		open my $fh, '>', $file or die "$file: $!";
		print $fh "\\set ON_ERROR_STOP 0\n";
		print $fh client_sql($_), "\n" for @$stmts;
		close $fh;
		my %cl = (stmts => $stmts, out => '', err => '');
		$cl{h} = IPC::Run::start(
			[ 'psql', '-XAtq', '-d', $node->connstr('postgres') ],
			'<', $file, '>', \$cl{out}, '2>', \$cl{err});
		push @clients, \%cl;
	}
	return \@clients;
}

# Wait for every client to end; record what each was told. Returns the
# number of clients cut short and the statements in flight at the fault.
sub collect_clients
{
	my ($round, $clients) = @_;
	my ($cut, $errors, @inflight) = (0, '');
	for my $cl (@$clients)
	{
		$cl->{h}->finish;
		my $last = -1;
		for my $line (split /\n/, $cl->{out})
		{
			if ($line =~ /^rcpt (\d+) (\(\d+,\d+\))$/)
			{
				$cl->{stmts}[$1]{receipt} = $2;
				next;
			}
			# A receipt alone: psql printed the cast's row instead of
			# storing it (\gset applies to a query's last result, and the
			# lost connection's error came after it). It is the receipt of
			# the statement in flight.
			if ($line =~ /^(\(\d+,\d+\))$/)
			{
				$cl->{stmts}[ $last + 1 ]{receipt} = $1;
				next;
			}
			my ($tag, $k, $owner, $pos, $cycle) = split /\|/, $line;
			die "unexpected client output: $line" unless $tag eq 'ack';
			my $st = $cl->{stmts}[$k];
			die "client acknowledged $k out of order (after $last)" unless $k == $last + 1;
			$last = $k;
			die "client said $owner for statement $k of $st->{owner}" unless $owner eq $st->{owner};
			my $key = "$owner|$pos";
			die "two acknowledgements for $key" if exists $acked{$key};
			$acked{$key} = { cycle => $cycle, payload => $st->{payload} };
			$allowed{ $st->{payload} } = 1;
		}
		if ($last < $#{ $cl->{stmts} })
		{
			$cut++;
			my $st = $cl->{stmts}[ $last + 1 ];
			$allowed{ $st->{payload} } = 1;
			push @inflight, $st;
		}
		# Only the connection may be lost: no statement failed on its own.
		$errors .= $cl->{err} if $cl->{err} =~ /ERROR:/;
	}
	is($errors, '', "$round: no client statement failed with an ERROR (only connections were lost)");
	return ($cut, \@inflight);
}

# ----------------------------------------------------------------------
# the checks after a fault
# ----------------------------------------------------------------------
sub verify
{
	my ($round) = @_;
	my $log = read_log($node);

	# No twin positions; no cast sealed twice; nothing invented.
	my (%at, %payloads, @twins, @again, @invented);
	for my $l (@$log)
	{
		my $key = "$l->{owner}|$l->{position}";
		push @twins, $key if $at{$key}++;
		push @again,    $l->{payload} if $payloads{ $l->{payload} }++;
		push @invented, $l->{payload} unless $allowed{ $l->{payload} };
	}
	is(scalar(@twins), 0, "$round: no (owner, position) twice in the log")
	  or diag("twins: @twins[0 .. ($#twins < 9 ? $#twins : 9)]");
	is(scalar(@again), 0, "$round: no cast sealed twice")
	  or diag("again: @again[0 .. ($#again < 9 ? $#again : 9)]");
	is(scalar(@invented), 0,
		"$round: every landing was acknowledged or in flight at a fault (nothing invented)")
	  or diag("invented: @invented[0 .. ($#invented < 9 ? $#invented : 9)]");

	# Every acknowledged coordinate is there, with the statement's payload.
	my %held = map { ("$_->{owner}|$_->{position}" => $_) } @$log;
	my @lost;
	while (my ($key, $a) = each %acked)
	{
		my $l = $held{$key};
		push @lost, "$key@$a->{cycle}"
		  unless $l && $l->{cycle} == $a->{cycle} && $l->{payload} eq $a->{payload};
	}
	is(scalar(@lost), 0,
		"$round: all " . scalar(keys %acked) . " acknowledged coordinates are in the log, at their cycle")
	  or diag("lost: @lost[0 .. ($#lost < 9 ? $#lost : 9)]");

	# Each sealed landing has the move and lap the statement cast.
	my @unlike;
	for my $l (@$log)
	{
		my $st = $sent{ $l->{payload} } or next;
		push @unlike, $l->{payload}
		  unless ($l->{from} eq ($st->{from} // '')) && ($l->{to} eq ($st->{to} // ''))
		  && $l->{op} eq $st->{op};
	}
	is(scalar(@unlike), 0, "$round: every landing holds the move and operation id it was cast with")
	  or diag("unlike: @unlike[0 .. ($#unlike < 9 ? $#unlike : 9)]");

	# Per owner: 1..n, and the live state is the replay of the trajectory.
	my %by;
	push @{ $by{ $_->{owner} } }, $_ for @$log;
	my $live = live_states($node);
	my (@bad, @unequal);
	for my $o (@owners)
	{
		my @l = sort { $a->{position} <=> $b->{position} } @{ $by{$o} // [] };
		my @want = eval { kanban_replay($o, \@l) };
		if ($@) { push @bad, $@; next; }
		push @unequal, "$o: live $live->{$o}, replay @want"
		  unless $live->{$o} eq join('|', @want, 0, 'f');
	}
	is(scalar(@bad), 0, "$round: every owner's positions are 1..n along legal edges and laps")
	  or diag(join('', @bad[0 .. ($#bad < 9 ? $#bad : 9)]));
	is(scalar(@unequal), 0,
		"$round: every owner's live state equals the replay of its trajectory (nothing pending)")
	  or diag(join("\n", @unequal[0 .. ($#unequal < 9 ? $#unequal : 9)]));

	# lake.trajectory tells each owner's part of lake.log.
	my $by_log = join("\n",
		map { "$_->{owner}|$_->{position}|$_->{cycle}|$_->{seq}" }
		sort { $a->{owner} cmp $b->{owner} || $a->{position} <=> $b->{position} } @$log);
	is( $node->safe_psql(
			'postgres',
			"SELECT o.name, t.position, t.cycle, t.seq FROM lake_data.owner o, "
			  . "LATERAL lake.trajectory(o.name) t ORDER BY o.name, t.position"),
		$by_log,
		"$round: lake.trajectory of every owner agrees with lake.log");

	is( $node->safe_psql('postgres',
			'SELECT count(*), sum(applied), count(*) FILTER (WHERE quarantined) FROM lake.recover()'),
		scalar(@owners) . '|0|0',
		"$round: lake.recover() then applies nothing and quarantines no one");
	return $log;
}

# Recovery read only the tail above the snapshot it started from.
sub recovery_used_snapshot
{
	my ($round, $landings) = @_;
	my ($snap, $tail, $applied, $quarantined, $after) = split /\|/,
	  $node->safe_psql('postgres',
		    'SELECT recovery_snapshot, recovery_tail, recovery_applied, recovery_quarantined, '
		  . '(SELECT count(*) FROM lake.log(s.recovery_snapshot)) FROM lake.stats() s');
	cmp_ok($snap, '>', 0, "$round: recovery started from a snapshot (of cycle $snap)");
	is($tail, $after, "$round: recovery read exactly the $after landings sealed after that snapshot");
	is($applied, $tail, "$round: and applied each of them");
	is($quarantined, 0, "$round: and quarantined no one");
	cmp_ok($tail, '<', $landings, "$round: the tail ($tail) is less than the log ($landings)");
}

# The receipts of the casts in flight (taken with lake.cast, not yet
# acknowledged by await_durable): await_durable now answers at once with
# the coordinate the log holds for the cast, or LK006 if it is not there.
sub inflight_receipts
{
	my ($round, $inflight, $log) = @_;
	my @with = grep { defined $_->{receipt} } @$inflight;
	return unless @with;
	my %held = map { ($_->{payload} => $_) } @$log;
	my %got;
	for my $line (
		split /\n/,
		$node->safe_psql(
			'postgres',
			"SET statement_timeout = '60s'; SELECT v.r, a.* FROM (VALUES "
			  . join(', ', map { "('$_->{receipt}'::lake.receipt)" } @with)
			  . ") v(r), LATERAL await_or_state(v.r) a"))
	{
		# Keyed by receipt: two clients can be at the same statement number.
		my ($r, @rest) = split /\|/, $line, -1;
		$got{$r} = join('|', @rest);
	}
	my @wrong;
	my ($durable, $lost) = (0, 0);
	for my $st (@with)
	{
		my $l = $held{ $st->{payload} };
		my $want = $l ? "$l->{position}|$l->{cycle}|ok" : '||LK006';
		$l ? $durable++ : $lost++;
		push @wrong, "$st->{receipt} ($st->{payload}): got " . ($got{ $st->{receipt} } // 'nothing') . ", want $want"
		  unless ($got{ $st->{receipt} } // '') eq $want;
	}
	is(join("\n", @wrong), '',
		"$round: await_durable of the " . scalar(@with)
		  . " receipts in flight: $durable give the coordinate in the log, $lost fail with LK006");
}

# Re-send what was in flight, with its operation id, in one session: the
# coordinate it was sealed at, or one new landing at the next position.
sub resend_inflight
{
	my ($round, $inflight, $log) = @_;
	my (%held, %top);
	for my $l (@$log)
	{
		$held{ $l->{payload} } = $l;
		$top{ $l->{owner} } = $l->{position} if $l->{position} > ($top{ $l->{owner} } // 0);
	}
	my @answers = split /\n/,
	  $node->safe_psql('postgres', join("\n", map { cast_sql($_) } @$inflight));
	my @wrong;
	my ($replayed, $landed) = (0, 0);
	for my $i (0 .. $#$inflight)
	{
		my $st = $inflight->[$i];
		my ($tag, $k, $o, $pos, $cycle) = split /\|/, $answers[$i] // '';
		my $l = $held{ $st->{payload} };
		if ($l)
		{
			$replayed++;
			push @wrong, "$st->{payload}: sealed at $l->{position}\@$l->{cycle}, resend says $pos\@$cycle"
			  unless defined $cycle && $pos == $l->{position} && $cycle == $l->{cycle};
		}
		else
		{
			$landed++;
			my $want = ($top{ $st->{owner} } // 0) + 1;
			push @wrong, "$st->{payload}: lost, resend landed at $pos, not $want"
			  unless defined $cycle && $pos == $want;
		}
		$acked{"$st->{owner}|$pos"} = { cycle => $cycle, payload => $st->{payload} }
		  if defined $cycle;
	}
	is(join("\n", @wrong), '',
		"$round: the " . scalar(@$inflight)
		  . " statements in flight, re-sent: $replayed replayed their sealed coordinate, $landed landed once");
}

# ----------------------------------------------------------------------
# the rounds
# ----------------------------------------------------------------------

# A pid to signal: never empty or 0 (kill 0 would signal our own group).
sub pid_ok
{
	my ($pid, $what) = @_;
	die "no $what to signal" unless defined $pid && $pid =~ /^[1-9]\d*$/;
	return $pid;
}

sub casting_backend
{
	# A backend in the middle of a statement of the clients (they are
	# between statements now and then: look again until one is caught).
	my $pid = '';
	wait_until(
		30,
		sub {
			$pid = $node->safe_psql(
				'postgres',
				"SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' "
				  . "AND pid <> pg_backend_pid() AND state = 'active' "
				  . "AND query ~ 'lake\\.(cast|cast_durable|await_durable)\\(' LIMIT 1");
			return $pid ne '';
		});
	return pid_ok($pid, 'casting backend');
}

# name, what comes back (restart: the server; worker: a new worker;
# none: nothing restarts), the fault.
my @faults = (
	[ 'a-immediate',    'restart', sub { $node->stop('immediate'); $node->start; } ],
	[ 'b-fast',         'restart', sub { $node->stop('fast');      $node->start; } ],
	[ 'c-kill-worker',  'restart', sub { kill 'KILL', pid_ok($_[0]{worker_pid}, 'worker'); } ],
	[   'd-kill-backend', 'restart',
		sub {
			# The backend picked may end its last statement and exit before
			# the signal reaches it (seen on a loaded machine): nothing
			# restarts then. Pick again until a live one is signalled.
			defined wait_until(30, sub { kill('KILL', casting_backend()) > 0 })
			  or die 'no casting backend could be signalled';
		}
	],
	[ 'e-term-worker',  'worker',  sub { kill 'TERM', pid_ok($_[0]{worker_pid}, 'worker'); } ],
	[   'f-terminate-backend', 'none',
		sub {
			# Hold the seals up so the clients are caught waiting mid-statement
			# (with nothing restarting they would otherwise race to their end).
			my $hold = $node->background_psql('postgres');
			$hold->query_safe('BEGIN');
			$hold->query_safe('LOCK TABLE lake_data.cycle IN SHARE MODE');
			$node->safe_psql('postgres', 'SELECT pg_terminate_backend(' . casting_backend() . ')');
			$hold->query_safe('COMMIT');
			$hold->quit;
		}
	]);

sub run_round
{
	my ($round, $kind, $inject) = @_;
	my $t0      = Time::HiRes::time();
	my $before  = lake_stats();
	my $clients = start_clients($round, $kind eq 'restart' ? $STEPS : $RUNTHROUGH);

	# A fault that restarts nothing must strike well before the clients end.
	my $threshold = $kind eq 'none' ? $AFTER / 5 : $AFTER;
	ok( $node->poll_query_until(
			'postgres', "SELECT casts_sealed >= $before->{casts_sealed} + $threshold FROM lake.stats()"),
		"$round: the clients have $threshold casts sealed");
	$inject->($before);

	if ($kind eq 'restart')
	{
		ok($node->poll_query_until('postgres', "SELECT epoch > $before->{epoch} FROM lake.stats()"),
			"$round: the server is back and the epoch grew past $before->{epoch}");
	}
	elsif ($kind eq 'worker')
	{
		ok( $node->poll_query_until(
				'postgres',
				"SELECT worker_state = 'serving' AND worker_pid <> $before->{worker_pid} "
				  . "AND worker_starts = $before->{worker_starts} + 1 FROM lake.stats()"),
			"$round: a new worker serves");
	}
	my ($cut, $inflight) = collect_clients($round, $clients);
	my $after = lake_stats();
	if ($kind eq 'restart')
	{
		cmp_ok($cut, '>', 0, "$round: the fault cut $cut clients short");
	}
	elsif ($kind eq 'worker')
	{
		is($cut, 0, "$round: every client ran to the end (the worker came back)");
		cmp_ok(
			$node->safe_psql(
				'postgres',
				"SELECT count(*) FROM lake.log() l JOIN lake.cycles() c USING (cycle) "
				  . "WHERE c.sealed_at > (SELECT worker_started_at FROM lake.stats()) "
				  . "AND convert_from(l.payload, 'UTF8') LIKE '% $round k%'"),
			'>', 0,
			"$round: the clients were casting across the fault: the new worker sealed casts of this round");
	  {
			cmp_ok($after->{epoch}, '>', $before->{epoch},
				"$round: the new worker lifetime has a new epoch (README: each start of the worker advances it)");
		}
	}
	else
	{
		is($cut, 1, "$round: one client was cut short, the others ran to the end");
		is($after->{epoch}, $before->{epoch}, "$round: the epoch is unchanged (nothing restarted)");
	}

	my $log = verify($round);
	recovery_used_snapshot($round, scalar @$log) if $kind eq 'restart';
	inflight_receipts($round, $inflight, $log);
	resend_inflight($round, $inflight, $log) if @$inflight;
	note(sprintf('%s: %d landings in the log, %.1f s', $round, scalar @$log, Time::HiRes::time() - $t0));
}

# (f) leaves a waiter behind (see the end), so it runs after the LK006
# check, which needs a worker that waits out lake.cycle_interval.
run_round(@$_) for @faults[0 .. 4];

my ($snaps, $newest) = split /\|/,
  $node->safe_psql('postgres', 'SELECT count(*), max(cycle) FROM lake_data.snapshot');
ok($snaps >= 1 && $snaps <= 2, "the worker took snapshots ($snaps kept, the newest of cycle $newest)");

# Set lake.cycle_interval and wait until the worker has reloaded it.
sub set_cycle_interval
{
	my ($value) = @_;
	my $reloads = lake_stats()->{config_reloads};
	$node->safe_psql('postgres',
		defined $value
		? "ALTER SYSTEM SET lake.cycle_interval = '$value'"
		: 'ALTER SYSTEM RESET lake.cycle_interval');
	$node->reload;
	$value //= '10ms';
	ok( $node->poll_query_until(
			'postgres',
			"SELECT current_setting('lake.cycle_interval')::int * interval '1 ms' = interval '$value' AND config_reloads > $reloads FROM lake.stats()"
		),
		"lake.cycle_interval = $value is in force, in sessions and in the worker");
}

# ----------------------------------------------------------------------
# A receipt accepted but never sealed: LK006 after the crash, at once.
# ----------------------------------------------------------------------
{
	set_cycle_interval('1h');
	my $owner = 'o001';
	my ($phase, $lap, $pos, $cycles) = split /\|/,
	  $node->safe_psql('postgres',
		"SELECT phase, lap, position, (SELECT count(*) FROM lake.cycles()) FROM lake.owner_state('$owner')");
	my $to      = kanban_next($owner, $phase, $lap);
	my $receipt = $node->safe_psql('postgres',
		"SELECT lake.cast('$owner', '$phase', '$to', convert_to('never sealed', 'UTF8'))");
	like($receipt, qr/^\(\d+,\d+\)$/, "a plain cast returned receipt $receipt");
	is( $node->safe_psql('postgres',
			"SELECT pending, position, (SELECT casts_pending FROM lake.stats()) FROM lake.owner_state('$owner')"),
		"1|$pos|1", 'it is the one cast pending; the owner has not moved');

	my $epoch = lake_stats()->{epoch};
	$node->stop('immediate');
	$node->start;
	ok($node->poll_query_until('postgres', "SELECT epoch > $epoch FROM lake.stats()"),
		'after the immediate shutdown the worker has recovered');

	my $t0 = Time::HiRes::time();
	my ($state, $msg) = sql_error($node,
		"SET statement_timeout = '20s'; SELECT lake.await_durable('$receipt'::lake.receipt);");
	my $took = Time::HiRes::time() - $t0;
	is($state, 'LK006', "await_durable($receipt) fails with LK006: $msg");
	cmp_ok($took, '<', 5, sprintf('and at once (%.2f s with the psql start), not at the statement_timeout', $took));
	($state) = sql_error($node,
		"SET statement_timeout = '20s'; SELECT lake.await_durable('$receipt'::lake.receipt, 100);");
	is($state, 'LK006', 'also with a timeout_ms: LK006, not NULL');
	is( $node->safe_psql('postgres',
			"SELECT phase, position, pending, (SELECT count(*) FROM lake.cycles()), "
			  . "(SELECT count(*) FROM lake.log() WHERE payload = convert_to('never sealed', 'UTF8')) "
			  . "FROM lake.owner_state('$owner')"),
		"$phase|$pos|0|$cycles|0",
		'the owner is where its durable log left it; no cycle was sealed; the lost cast is not in the log');
	my ($at, $cycle) = split /\|/,
	  $node->safe_psql('postgres',
		"SELECT (c).position, (c).cycle FROM lake.cast_durable('$owner', '$phase', '$to', convert_to('recast', 'UTF8')) c");
	is($at, $pos + 1, 'casting the step again lands it at the next position');
	$allowed{recast} = 1;
	$acked{"$owner|$at"} = { cycle => $cycle, payload => 'recast' };
	set_cycle_interval(undef);
}

run_round(@{ $faults[5] });

# ----------------------------------------------------------------------
# A session terminated while it awaits durability leaves no waiter
# behind: afterwards, with nobody awaiting, a cast waits out
# lake.cycle_interval instead of being sealed at once.
# ----------------------------------------------------------------------
{
	# Hold lake_data.cycle so the seal cannot write; the awaiting session waits.
	my $holder = $node->background_psql('postgres');
	$holder->query_safe('BEGIN');
	$holder->query_safe('LOCK TABLE lake_data.cycle IN ACCESS EXCLUSIVE MODE');
	my $waiter = $node->background_psql('postgres', on_error_stop => 0);
	my $wpid   = $waiter->query_safe('SELECT pg_backend_pid()');
	$waiter->query_until(qr/^$/, "SELECT lake.cast_durable('o002', NULL, NULL);\n");
	ok( $node->poll_query_until(
			'postgres',
			"SELECT wait_event_type IN ('Extension', 'Lock') FROM pg_stat_activity WHERE pid = $wpid"),
		'a session awaits its cast while the seal is held up');
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($wpid)");
	ok(defined wait_until(30, sub { !kill(0, $wpid) }), 'pg_terminate_backend ends the awaiting session');
	$waiter->{run}->kill_kill;
	$holder->query_safe('COMMIT');
	$holder->quit;
	ok($node->poll_query_until('postgres', "SELECT pending FROM lake.owner_state('o002')", '0'),
		'its cast is sealed anyway once the seal can write');

	set_cycle_interval('1h');
	$node->safe_psql('postgres', "SELECT lake.cast('o002', NULL, NULL)");
	my $sealed = wait_until(3,
		sub { $node->safe_psql('postgres', "SELECT pending FROM lake.owner_state('o002')") eq '0' });
  {
		ok(!defined $sealed,
			'with nobody awaiting, a cast stays pending for lake.cycle_interval (checked for 3 s)');
	}
	set_cycle_interval(undef);
}

$node->stop;
done_testing();
