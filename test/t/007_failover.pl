# Streaming replication and failover (SPEC §5, §6, §7).
# - A streaming standby runs no lake worker; the sealed data replicates as
#   WAL: lake.log, lake.trajectory, lake.cycles, lake.versions, lake.read
#   and lake.read_operation on the standby return what they return on the
#   primary, while lake.cast, cast_durable, await_durable, owner_state,
#   seal, checkpoint, recover and release_owner refuse with 55000.
# - Failover: the standby is made synchronous, clients cast durably on the
#   primary, and the primary is stopped (immediate) while they cast. The
#   standby is promoted; a lake worker recovers and serves there:
#   - owners no client touched during the load are in exactly the state
#     the primary's log gave them before the failover;
#   - every coordinate a client was told on the primary — before and
#     during the load — is in the promoted node's log, at its cycle, with
#     its payload; nothing is there that was not acknowledged or in flight;
#   - every owner's state is the replay of its trajectory, recovery
#     applies nothing more, the epoch is above the primary's;
#   - the receipts of casts in flight at the failover (half the load is
#     lake.cast + await_durable) give on the new primary the coordinate
#     its log holds, or LK006 when the cast did not make it;
#   - casts continue the positions under the new epoch, and the statements
#     in flight at the failover, re-sent with their operation ids, return
#     their sealed coordinate or land once.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $QUIET   = 6;     # owners cast before the load only
my $CLIENTS = 4;     # clients during the load ...
my $PER     = 5;     # ... each walking this many owners
my $STEPS   = 200;   # statements per client (the failover cuts them short;
                     # enough to outlast the poll that stops the primary)
my $AFTER   = 100;   # casts sealed during the load before the primary stops

my $primary = lake_node(
	'primary',
	init => { allows_streaming => 1 },
	conf => "fsync = on\nlake.checkpoint_cycles = 5\n");
$primary->start;
my $scripts = PostgreSQL::Test::Utils::tempdir();    # the clients' statement files

my @quiet = map { "q$_" } 1 .. $QUIET;
my @busy  = map { sprintf('b%02d', $_) } 1 .. $CLIENTS * $PER;
$primary->safe_psql(
	'postgres', qq{
CREATE EXTENSION lake;
SELECT lake.create_dataset('ds');
SELECT count(lake.create_owner(o)) FROM unnest('{@{[ join(',', @quiet, @busy) ]}}'::text[]) o;
-- await_durable of a receipt, as (position, cycle, 'ok') or its SQLSTATE.
CREATE FUNCTION await_or_state(r lake.receipt, OUT got_position bigint, OUT got_cycle bigint, OUT state text)
LANGUAGE plpgsql AS \$\$
BEGIN
	SELECT (c).position, (c).cycle INTO got_position, got_cycle FROM lake.await_durable(r, 10000) c;
	state := 'ok';
EXCEPTION WHEN OTHERS THEN
	state := SQLSTATE;
END \$\$;
});
ok($primary->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the primary runs a serving lake worker');

$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->start;

# ----------------------------------------------------------------------
# kanban and the log, as the test understands them
# ----------------------------------------------------------------------




# owner -> "phase|lap|position|0|f" replayed from a log (nothing pending,
# not quarantined), as live_states reads a healthy owner.
sub replayed_states
{
	my ($log) = @_;
	my %by;
	push @{ $by{ $_->{owner} } }, $_ for @$log;
	my %s;
	for my $o (@quiet, @busy)
	{
		$s{$o} = eval { join('|', kanban_replay($o, [ sort { $a->{position} <=> $b->{position} } @{ $by{$o} // [] } ]), 0, 'f') }
		  // "broken: $@";
	}
	return \%s;
}


# ----------------------------------------------------------------------
# what clients were told
# ----------------------------------------------------------------------
my %acked;      # "owner|position" -> { cycle, payload }
my %allowed;    # payload -> 1
my %sent;       # payload -> statement

# Statements walking owners round-robin from the given states; every
# seventh is a no-step cast.
sub statements
{
	my ($tag, $owners, $state, $steps) = @_;
	my $stmts = kanban_statements($tag, $owners, $state, $steps, sub { $_[0] % 7 == 3 });
	$sent{ $_->{payload} } = $_ for @$stmts;
	return $stmts;
}

sub record_acks
{
	my ($stmts, $out) = @_;
	my $last = -1;
	for my $line (split /\n/, $out)
	{
		if ($line =~ /^rcpt (\d+) (\(\d+,\d+\))$/)
		{
			$stmts->[$1]{receipt} = $2;
			next;
		}
		# A receipt alone: the statement in flight's, printed by psql when
		# the lost connection's error followed it (006_fault_matrix.pl).
		if ($line =~ /^(\(\d+,\d+\))$/)
		{
			$stmts->[ $last + 1 ]{receipt} = $1;
			next;
		}
		my ($tag, $k, $owner, $pos, $cycle) = split /\|/, $line;
		die "unexpected output: $line" unless $tag eq 'ack' && $k == $last + 1;
		$last = $k;
		$acked{"$owner|$pos"} = { cycle => $cycle, payload => $stmts->[$k]{payload} };
		$allowed{ $stmts->[$k]{payload} } = 1;
	}
	return $last;
}

my %initial = map { $_ => { phase => 'Planning', lap => 0 } } @quiet, @busy;

# ----------------------------------------------------------------------
# Before the load: casts and appends on the primary, replayed on the standby.
# ----------------------------------------------------------------------
{
	my $stmts = statements('pre', [ @quiet, @busy ], \%initial, 6);
	record_acks($stmts, $primary->safe_psql('postgres', join("\n", map { cast_sql($_) } @$stmts)));
	$primary->safe_psql(
		'postgres', q{
SELECT lake.append('ds', 't', 'small-' || i, convert_to(repeat('x', i * 100), 'UTF8')) FROM generate_series(1, 5) i;
SELECT lake.append('ds', 't', 'large', convert_to(repeat(md5('large'), 100000), 'UTF8'));  -- 3.2 MB: several chunks
});
}
is(scalar(keys %acked), 6 * ($QUIET + @busy), 'the primary acknowledged every cast before the load');
$primary->wait_for_catchup($standby);

is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't', 'the standby is in recovery');
is( $standby->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'lake worker'"),
	'0', 'no lake worker runs on the standby');
is($standby->safe_psql('postgres', 'SELECT worker_state, worker_starts FROM lake.stats()'),
	'stopped|0', 'lake.stats() on the standby: no worker ever started');

my %reads = (
	'lake.log'        => 'SELECT * FROM lake.log() ORDER BY cycle, seq',
	'lake.log(after)' => 'SELECT * FROM lake.log(3) ORDER BY cycle, seq',
	'lake.trajectory' =>
	  'SELECT o.name, t.* FROM lake_data.owner o, LATERAL lake.trajectory(o.name) t ORDER BY o.name, t.position',
	'lake.trajectory(after)' => "SELECT * FROM lake.trajectory('q1', 2)",
	'lake.cycles'            => 'SELECT * FROM lake.cycles() ORDER BY cycle',
	'lake.versions'          => "SELECT * FROM lake.versions('ds')",
	'lake.read'              => "SELECT version, md5(lake.read('ds', version)) FROM lake.versions('ds')",
	'lake.read_operation'    => "SELECT md5(lake.read_operation('ds', 't', 'large'))",
	'lake_data.snapshot'          => 'SELECT cycle, owners FROM lake_data.snapshot ORDER BY cycle');
for my $what (sort keys %reads)
{
	my $p = $primary->safe_psql('postgres', $reads{$what});
	my ($rc, $s, $err) = $standby->psql('postgres', $reads{$what});
	is($rc, 0, "standby: $what works") or diag($err);
	ok($p ne '' && $s eq $p, "standby: $what returns what the primary returns");
}

my ($epoch_before) = $primary->safe_psql('postgres', 'SELECT epoch FROM lake.stats()');
is($standby->safe_psql('postgres', 'SELECT epoch FROM lake_data.writer'),
	$epoch_before, "the standby has the primary's writer epoch ($epoch_before)");

for my $call (
	"SELECT lake.cast('q1', 'Planning', 'CognitiveWork')",
	"SELECT lake.cast('q1', NULL, NULL)",
	"SELECT lake.cast_durable('q1', NULL, NULL)",
	"SELECT lake.await_durable('($epoch_before,1)')",
	"SELECT * FROM lake.owner_state('q1')",
	'SELECT lake.seal()',
	'SELECT lake.checkpoint()',
	'SELECT * FROM lake.recover()',
	"SELECT lake.release_owner('q1')",
	'SELECT lake.rebuild_owner_index()')
{
	my ($state, $msg) = sql_error($standby, $call);
	is($state, '55000', "standby: $call refuses with 55000 ($msg)");
}
# Writes that are not owner functions: a read-only transaction's 25006
# naming the call, never a refusal that sends the client to wait for a
# worker (nor PostgreSQL's lock refusal during recovery, 55000, which the
# stage calls and define_lifecycle met first).
for my $call (
	"lake.append('ds', 'default', 'on-standby', '\\x01'::bytea)",
	"lake.begin_append('ds', 'default', 'on-standby')",
	"lake.append_chunk(1, 0, '\\x01'::bytea)",
	'lake.commit_append(1)',
	'lake.abort_append(1)',
	"lake.create_owner('on-standby')",
	"lake.create_dataset('on-standby')",
	"lake.define_lifecycle('on-standby', 'a', ARRAY[['a', 'b']])",
	"lake.grant_tenant('postgres', 'on-standby')",
	"lake.revoke_tenant('postgres', 'on-standby')")
{
	my ($state, $msg) = sql_error($standby, "SELECT $call");
	my ($name) = $call =~ /^(lake\.\w+)/;
	is("$state $msg", "25006 cannot execute $name() in a read-only transaction",
		"standby: $call refuses with 25006");
}

# ----------------------------------------------------------------------
# Failover under load, with the standby synchronous.
# ----------------------------------------------------------------------
$primary->safe_psql('postgres', "ALTER SYSTEM SET synchronous_standby_names = '*'");
$primary->reload;
ok( $primary->poll_query_until(
		'postgres', "SELECT sync_state FROM pg_stat_replication", 'sync'),
	'the standby is synchronous');

# The quiet owners' durable state on the primary, just before the load.
my $primary_log = read_log($primary);
my $primary_live = live_states($primary);
my $primary_replay = replayed_states($primary_log);
is_deeply({ map { ($_ => $primary_live->{$_}) } @quiet, @busy },
	$primary_replay, "the primary's owner states are the replay of its log");

my $state = { %initial };
for my $o (@busy)
{
	my ($phase, $lap) = split /\|/, $primary_live->{$o};
	$state->{$o} = { phase => $phase, lap => $lap };
}

my $base = $primary->safe_psql('postgres', 'SELECT casts_sealed FROM lake.stats()');
my @clients;
for my $c (0 .. $CLIENTS - 1)
{
	my @mine = @busy[ $c * $PER .. $c * $PER + $PER - 1 ];
	my $stmts = statements("load$c", \@mine, $state, $STEPS);
	my $file = "$scripts/failover_$c.sql";
	open my $fh, '>', $file or die "$file: $!";
	print $fh "\\set ON_ERROR_STOP 0\n";
	print $fh client_sql($_), "\n" for @$stmts;
	close $fh;
	my %cl = (stmts => $stmts, out => '', err => '');
	$cl{h} = IPC::Run::start([ 'psql', '-XAtq', '-d', $primary->connstr('postgres') ],
		'<', $file, '>', \$cl{out}, '2>', \$cl{err});
	push @clients, \%cl;
}
ok($primary->poll_query_until('postgres', "SELECT casts_sealed >= $base + $AFTER FROM lake.stats()"),
	"the clients have $AFTER casts sealed on the primary");
$primary->stop('immediate');

my (@inflight, $errors, $cut);
$errors = '';
$cut    = 0;
for my $cl (@clients)
{
	$cl->{h}->finish;
	my $last = record_acks($cl->{stmts}, $cl->{out});
	if ($last < $#{ $cl->{stmts} })
	{
		$cut++;
		my $st = $cl->{stmts}[ $last + 1 ];
		$allowed{ $st->{payload} } = 1;
		push @inflight, $st;
	}
	$errors .= $cl->{err} if $cl->{err} =~ /ERROR:/;
}
is($errors, '', 'no client statement failed with an ERROR (only the connections were lost)');
is($cut, $CLIENTS, 'the failover cut every client short');
note(scalar(keys %acked) . ' coordinates acknowledged by the primary');

$standby->promote;
ok( $standby->poll_query_until(
		'postgres',
		"SELECT NOT pg_is_in_recovery() AND s.worker_state = 'serving' AND s.epoch > 0 "
		  . "FROM lake.stats() s JOIN pg_stat_activity a "
		  . "  ON a.pid = s.worker_pid AND a.backend_type = 'lake worker'"),
	'after promotion a lake worker has recovered and serves');

my ($epoch_after, $rec_owners, $rec_q) = split /\|/,
  $standby->safe_psql('postgres', 'SELECT epoch, recovery_owners, recovery_quarantined FROM lake.stats()');
cmp_ok($epoch_after, '>', $epoch_before, "the promoted node's epoch ($epoch_after) is above the primary's ($epoch_before)");
is($rec_owners, $QUIET + @busy, 'its recovery rebuilt every owner');
is($rec_q,      0,              'and quarantined none');
{
	my ($snap, $tail, $applied, $after) = split /\|/,
	  $standby->safe_psql('postgres',
		'SELECT recovery_snapshot, recovery_tail, recovery_applied, '
		  . '(SELECT count(*) FROM lake.log(s.recovery_snapshot)) FROM lake.stats() s');
	cmp_ok($snap, '>', 0, "it started from the primary's snapshot of cycle $snap, replicated with the WAL");
	is("$tail|$applied", "$after|$after", "and read and applied only the $after landings sealed after it");
}

my $log = read_log($standby);
{
	my (%at, @twins, %payloads, @again, @invented, @lost);
	for my $l (@$log)
	{
		push @twins, "$l->{owner}|$l->{position}" if $at{"$l->{owner}|$l->{position}"}++;
		push @again,    $l->{payload} if $payloads{ $l->{payload} }++;
		push @invented, $l->{payload} unless $allowed{ $l->{payload} };
	}
	my %held = map { ("$_->{owner}|$_->{position}" => $_) } @$log;
	while (my ($key, $a) = each %acked)
	{
		my $l = $held{$key};
		push @lost, $key unless $l && $l->{cycle} == $a->{cycle} && $l->{payload} eq $a->{payload};
	}
	is("@twins",    '', 'promoted: no (owner, position) twice');
	is("@again",    '', 'promoted: no cast sealed twice');
	is("@invented", '', 'promoted: every landing was acknowledged or in flight (nothing invented)');
	is("@lost",     '',
		'promoted: all ' . scalar(keys %acked) . ' coordinates the primary acknowledged are there, at their cycle');
}

my $replayed = replayed_states($log);
my $live     = live_states($standby);
is_deeply($live, $replayed, "promoted: every owner's live state is the replay of its trajectory");
is_deeply({ map { ($_ => $live->{$_}) } @quiet },
	{ map { ($_ => $primary_live->{$_}) } @quiet },
	"promoted: the owners idle during the load are in the primary's durable state");
is( $standby->safe_psql('postgres',
		'SELECT count(*), sum(applied), count(*) FILTER (WHERE quarantined) FROM lake.recover()'),
	($QUIET + @busy) . '|0|0',
	'promoted: lake.recover() applies nothing');

# The receipts of casts in flight at the failover, awaited on the new
# primary: the coordinate the log holds, or LK006 if it did not make it.
{
	my @with = grep { defined $_->{receipt} } @inflight;
	my %held = map { ($_->{payload} => $_) } @$log;
	my %got;
	if (@with)
	{
		for my $line (
			split /\n/,
			$standby->safe_psql(
				'postgres',
				"SET statement_timeout = '60s'; SELECT v.k, v.o, a.* FROM (VALUES "
				  . join(', ', map { "($_->{k}, '$_->{owner}', '$_->{receipt}'::lake.receipt)" } @with)
				  . ") v(k, o, r), LATERAL await_or_state(v.r) a"))
		{
			my ($k, $o, @rest) = split /\|/, $line, -1;
			$got{"$o|$k"} = join('|', @rest);
		}
	}
	my @wrong;
	my ($durable, $lost) = (0, 0);
	for my $st (@with)
	{
		my $l = $held{ $st->{payload} };
		my $want = $l ? "$l->{position}|$l->{cycle}|ok" : '||LK006';
		$l ? $durable++ : $lost++;
		my $got = $got{"$st->{owner}|$st->{k}"} // '';
		push @wrong, "$st->{receipt}: got $got, want $want" unless $got eq $want;
	}
	is("@wrong", '',
		'promoted: await_durable of the ' . scalar(@with)
		  . " receipts of the old primary in flight: $durable give the coordinate in the log, $lost fail with LK006");
}

# The statements in flight at the failover, re-sent.
{
	my (%held, %top);
	for my $l (@$log)
	{
		$held{ $l->{payload} } = $l;
		$top{ $l->{owner} } = $l->{position} if $l->{position} > ($top{ $l->{owner} } // 0);
	}
	my @answers = split /\n/, $standby->safe_psql('postgres', join("\n", map { cast_sql($_) } @inflight));
	my @wrong;
	for my $i (0 .. $#inflight)
	{
		my $st = $inflight[$i];
		my (undef, undef, undef, $pos, $cycle) = split /\|/, $answers[$i] // '';
		my $l = $held{ $st->{payload} };
		my ($want_pos, $want_cycle) = $l ? ($l->{position}, $l->{cycle}) : (($top{ $st->{owner} } // 0) + 1, undef);
		push @wrong, "$st->{payload}: got " . ($pos // 'nothing') . ", want $want_pos"
		  unless defined $pos && $pos == $want_pos && (!defined $want_cycle || $cycle == $want_cycle);
	}
	is("@wrong", '', 'promoted: the ' . scalar(@inflight) . ' statements in flight, re-sent, replay or land once');
}

# Casts continue the positions under the new epoch.
{
	my ($phase, $lap, $pos) = split /\|/, $live->{q1};
	my $to = kanban_next('q1', $phase, $lap);
	is( $standby->safe_psql('postgres',
			"SELECT (lake.cast_durable('q1', '$phase', '$to')).position"),
		$pos + 1, "promoted: a new cast_durable of q1 lands at position @{[ $pos + 1 ]}");
	is( $standby->safe_psql('postgres',
			"SELECT epoch, from_phase, to_phase FROM lake.trajectory('q1', $pos)"),
		"$epoch_after|$phase|$to", 'promoted: it carries the new epoch and the move');
	is( $standby->safe_psql('postgres', "SELECT phase, position FROM lake.owner_state('q1')"),
		"$to|" . ($pos + 1), 'promoted: the live state follows');
}

$standby->stop;
done_testing();
