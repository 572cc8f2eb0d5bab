# Resource exhaustion (SPEC §1 53000, §3 Admission, §4 casts/cycles): the
# cycle buffer, the owner table and the append admission budget are filled
# from many clients at once.
# - every refusal is SQLSTATE 53000 (never another error) and, where the
#   contract has a queue wait, arrives after waiting it and not much later;
# - everything accepted before and while full is intact: each accepted cast
#   is sealed exactly once at the receipt it was given, each created owner
#   is live in Planning, each held append commits and reads back byte-exact;
# - capacity comes back (after a seal, after the holders commit);
# - the server stays up: same postmaster, same worker, no crash in the log;
# - and after a restart the worker recovers every registered owner (the
#   registry never outgrew lake.max_owners) with the sealed log unchanged;
# - with lake.max_owners lowered below the registry, casts are refused at
#   once with 55000 and the reason instead of waiting on a recovery that
#   cannot succeed; with the limit restored, everything comes back.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes;
use LakeTAP;

my $CLIENTS     = 8;
my $QWAIT_MS    = 200;       # lake.admission_queue_wait
my $SLACK_MS    = 5000;      # a refusal may come this late on a busy machine
my $RING        = 131072;    # lake.cycle_buffer_size
my $MAX_OWNERS  = 64;
my $STREAM      = 1048576;   # lake.max_stream_bytes
my $BUFFERED    = 1572864;   # lake.max_buffered_bytes
my $CAST_BYTES  = 1500;      # payload of each cast while filling the ring
my $t_start     = Time::HiRes::time();

# The worker must not drain the ring while it fills: cycles are sealed only
# by lake.seal() here (plain casts, no await_durable, which would seal).
my $node = lake_node(
	'exhaustion',
	conf => "max_connections = 40\n"
	  . "lake.max_owners = $MAX_OWNERS\n"
	  . "lake.cycle_buffer_size = '${RING}B'\n"
	  . "lake.cycle_interval = '1h'\n"
	  . "lake.cycle_max_casts = 1000000\n"
	  . "lake.max_concurrent_appends = 2\n"
	  . "lake.max_stream_bytes = '${STREAM}B'\n"
	  . "lake.max_buffered_bytes = '${BUFFERED}B'\n"
	  . "lake.admission_queue_wait = '${QWAIT_MS}ms'\n");
# The node's log may hold earlier runs: look only at this one.
my $log_from = -s $node->logfile // 0;
$node->start;

$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION lake;
SELECT lake.create_dataset(d) FROM unnest(ARRAY['ds', 'h1', 'h2', 'hbig']) d;
SELECT lake.create_owner('c' || i) FROM generate_series(1, $CLIENTS) i;

-- n * 32 bytes that do not compress, the same for the same tag.
CREATE FUNCTION payload(tag text, n int) RETURNS bytea LANGUAGE sql IMMUTABLE AS
\$\$ SELECT string_agg(sha256(convert_to(tag || ':' || i, 'UTF8')), ''::bytea ORDER BY i)
   FROM generate_series(1, n) i \$\$;

-- The payload of cast k of owner who.
CREATE FUNCTION cast_payload(who text, k int, size int) RETURNS bytea LANGUAGE sql IMMUTABLE AS
\$\$ SELECT convert_to(rpad(who || ':' || k || ':', size, '.'), 'UTF8') \$\$;

-- Walk owner who around kanban with plain casts until 'refusals' of them
-- were refused, retrying a refused move (a refusal must queue nothing, or
-- the retry would be a stale phase). One row per call: what it got and how
-- long it took, measured in the server.
CREATE FUNCTION cast_until_refused(who text, size int, refusals int)
RETURNS TABLE(step int, outcome text, seq bigint, ms float8, msg text)
LANGUAGE plpgsql AS \$\$
DECLARE
    f text[] := ARRAY['Planning','CognitiveWork','Evaluation','Commit'];
    t text[] := ARRAY['CognitiveWork','Evaluation','Commit','Planning'];
    k int := 0;
    refused int := 0;
    t0 timestamptz;
    r lake.receipt;
BEGIN
    -- a cap, so a ring that never fills ends the client (and fails the test)
    WHILE refused < refusals AND k < 2000 LOOP
        t0 := clock_timestamp();
        BEGIN
            r := lake.cast(who, f[k % 4 + 1], t[k % 4 + 1], cast_payload(who, k, size));
            step := k; outcome := 'ok'; seq := r.seq; msg := r.epoch::text;
            ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
            RETURN NEXT;
            k := k + 1;
        EXCEPTION WHEN OTHERS THEN
            step := k; outcome := SQLSTATE; seq := NULL; msg := SQLERRM;
            ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
            RETURN NEXT;
            refused := refused + 1;
        END;
    END LOOP;
END \$\$;

-- 'attempts' appends of n * 32 bytes to ds under operations <tag>-<i>,
-- each in a subtransaction; one row per call, timed in the server.
CREATE FUNCTION try_appends(tag text, n int, attempts int)
RETURNS TABLE(outcome text, ms float8, msg text, detail text)
LANGUAGE plpgsql AS \$\$
DECLARE
    t0 timestamptz;
    v bigint;
    p bytea := payload(tag, n);
BEGIN
    FOR i IN 1 .. attempts LOOP
        t0 := clock_timestamp();
        BEGIN
            v := lake.append('ds', 't', tag || '-' || i, p);
            outcome := 'ok'; msg := v::text; detail := '';
            ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
            RETURN NEXT;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
            outcome := SQLSTATE; msg := SQLERRM;
            ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
            RETURN NEXT;
        END;
    END LOOP;
END \$\$;

-- Every registered owner whose live state is not readable, or (for the
-- owners o*, never cast to) not the initial state.
CREATE FUNCTION owner_problems() RETURNS SETOF text LANGUAGE plpgsql AS \$\$
DECLARE
    n text;
    s record;
BEGIN
    FOR n IN SELECT name FROM lake_data.owner ORDER BY id LOOP
        BEGIN
            SELECT * INTO s FROM lake.owner_state(n);
            IF s.quarantined OR (n LIKE 'o%' AND NOT
                (s.phase = 'Planning' AND s.lap = 0 AND s.position = 0 AND s.pending = 0)) THEN
                RETURN NEXT n || ': ' || row_to_json(s)::text;
            END IF;
        EXCEPTION WHEN OTHERS THEN
            RETURN NEXT n || ': ' || SQLSTATE || ' ' || SQLERRM;
        END;
    END LOOP;
END \$\$;
});

# Versions accepted before any exhaustion.
$node->safe_psql('postgres',
	"SELECT lake.append('ds', 't', 'before-' || i, payload('before-' || i, 1000 * i)) FROM generate_series(1, 3) i");
my $before = $node->safe_psql('postgres',
	"SELECT string_agg(version || ':' || encode(digest, 'hex'), ',' ORDER BY version) FROM lake.versions('ds')");

# What must not change while the resources are exhausted.
my $pm_pid = (split /\n/, slurp_file($node->data_dir . '/postmaster.pid'))[0];
my $worker = $node->safe_psql('postgres', 'SELECT worker_pid, worker_starts FROM lake.stats()');
like($worker, qr/^\d+\|1$/, "the lake worker runs ($worker)");

sub server_up
{
	my ($what) = @_;
	is((split /\n/, slurp_file($node->data_dir . '/postmaster.pid'))[0],
		$pm_pid, "$what: same postmaster");
	is($node->safe_psql('postgres', 'SELECT 1'), '1', "$what: the server answers");
	is($node->safe_psql('postgres', 'SELECT worker_pid, worker_starts FROM lake.stats()'),
		$worker, "$what: the same lake worker serves, never restarted");
	is( $node->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'lake worker'"),
		'1', "$what: the lake worker is in pg_stat_activity");
	unlike(slurp_file($node->logfile, $log_from),
		qr/terminated by signal|was terminated|PANIC|TRAP:|reinitializing/,
		"$what: no backend crashed");
}

# start_clients([sql, ...]) -> the running clients
#
# One psql per script, all released at once: each first waits on a shared
# advisory lock held here until every client waits on it. run_clients()
# starts them and waits for them to end.
my $scratch   = PostgreSQL::Test::Utils::tempdir;
my $script_no = 0;

sub start_clients
{
	my ($scripts) = @_;
	my $gate = $node->background_psql('postgres');
	$gate->query_safe('SELECT pg_advisory_lock(9009)');

	my (@runs, @out, @err);
	for my $sql (@$scripts)
	{
		my ($o, $e) = ('', '');
		push @out, \$o;
		push @err, \$e;
		my $file = "$scratch/client-" . ++$script_no . '.sql';
		append_to_file($file,
			"\\set VERBOSITY verbose\n"
			  . "SELECT pg_advisory_lock_shared(9009) IS NULL AS gate \\gset\n"
			  . "SELECT pg_advisory_unlock_shared(9009) IS NULL AS gate \\gset\n"
			  . $sql);
		push @runs,
		  IPC::Run::start(
			[ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-f', $file ],
			'<', \undef, '>', \$o, '2>', \$e,
			IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	}
	my $n = scalar @$scripts;
	$node->poll_query_until('postgres',
		"SELECT count(*) = $n FROM pg_locks WHERE locktype = 'advisory' AND objid = 9009 AND NOT granted")
	  or die "the clients never reached the gate";
	$gate->query_safe('SELECT pg_advisory_unlock(9009)');
	$gate->quit;
	return { runs => \@runs, out => \@out, err => \@err };
}

# finish_clients(started) -> ([stdout, ...], [stderr, ...]) once all ended.
sub finish_clients
{
	my ($c) = @_;
	$_->finish for @{ $c->{runs} };
	return ([ map { $$_ } @{ $c->{out} } ], [ map { $$_ } @{ $c->{err} } ]);
}

sub run_clients
{
	return finish_clients(start_clients(@_));
}

# Refusal latencies: each at least the queue wait, none much later.
sub latencies_ok
{
	my ($what, @ms) = @_;
	my @sorted = sort { $a <=> $b } @ms;
	note(sprintf("%s: %d refusals after %.1f .. %.1f ms (queue wait %d ms)",
			$what, scalar @sorted, $sorted[0] // -1, $sorted[-1] // -1, $QWAIT_MS));
	cmp_ok($sorted[0] // 0, '>=', $QWAIT_MS - 1,
		"$what: no refusal came before the queue wait ($QWAIT_MS ms)");
	cmp_ok($sorted[-1] // 1e9, '<', $QWAIT_MS + $SLACK_MS,
		"$what: every refusal came within the queue wait (+${SLACK_MS} ms slack)");
}

# Casts wait for the worker's recovery only up to the queue wait: start once
# it is done.
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the worker has recovered the owners');

# --- 1. the cycle buffer ------------------------------------------------------
# Each client walks its own owner c<i> with casts of $CAST_BYTES-byte
# payloads until two are refused; nothing seals meanwhile: the worker seals
# early for a cast that finds the ring full, so a session holds
# lake_data.cycle in SHARE mode, which no seal can write past.
my (%told, @cast_refusals, @cast_other, $accepted);
my $hold = $node->background_psql('postgres');
$hold->query_safe('BEGIN; LOCK TABLE lake_data.cycle IN SHARE MODE;');
{
	my ($out, $err) = run_clients(
		[ map { "SELECT * FROM cast_until_refused('c$_', $CAST_BYTES, 2);\n" } 1 .. $CLIENTS ]);
	is(join('', @$err), '', 'cycle buffer: the clients ran without a client-side error');

	my @ok_ms;
	for my $i (1 .. $CLIENTS)
	{
		for my $line (split /\n/, $out->[ $i - 1 ])
		{
			my ($step, $outcome, $seq, $ms, $msg) = split /\|/, $line, 5;
			if ($outcome eq 'ok')
			{
				push @{ $told{"c$i"} }, { step => $step, seq => $seq, epoch => $msg };
				push @ok_ms, $ms;
			}
			elsif ($outcome eq '53000' && $msg eq 'cycle buffer full')
			{
				push @cast_refusals, $ms;
			}
			else
			{
				push @cast_other, "c$i step $step: $outcome $msg";
			}
		}
	}
	$accepted = 0;
	$accepted += scalar @{ $told{$_} // [] } for keys %told;
	note("cycle buffer: $accepted casts accepted, "
		  . scalar(@cast_refusals) . " refused, per client: "
		  . join(' ', map { scalar @{ $told{"c$_"} // [] } } 1 .. $CLIENTS));

	is_deeply(\@cast_other, [], 'cycle buffer: no refusal other than 53000 "cycle buffer full"');
	is(scalar @cast_refusals, 2 * $CLIENTS, 'cycle buffer: each client was refused twice, then stopped');
	latencies_ok('cycle buffer', @cast_refusals);

	# The ring really was full: the payloads alone took most of it (record
	# headers are small), and no more than it holds.
	cmp_ok($accepted * $CAST_BYTES, '<=', $RING, "cycle buffer: the $accepted accepted casts fit in $RING bytes");
	cmp_ok($accepted * $CAST_BYTES, '>=', 0.75 * $RING,
		'cycle buffer: and were refused only once the ring was (nearly) full');

	# Receipts: one epoch, seqs distinct and gap-free (a refusal takes no seq).
	my @recs = map { @{ $told{$_} } } keys %told;
	my %epochs = map { $_->{epoch} => 1 } @recs;
	is(scalar keys %epochs, 1, 'cycle buffer: every receipt carries the same epoch');
	my @seqs = sort { $a <=> $b } map { $_->{seq} } @recs;
	is_deeply(\@seqs, [ $seqs[0] .. $seqs[0] + $accepted - 1 ],
		'cycle buffer: receipt seqs are distinct and gap-free');

	is($node->safe_psql('postgres', 'SELECT casts_pending FROM lake.stats()'),
		$accepted, "cycle buffer: lake.stats() holds the $accepted accepted casts pending");
	is( $node->safe_psql('postgres', 'SELECT count(*) FROM lake.cycles()'),
		'0', 'cycle buffer: nothing was sealed while it filled');
	my $states = join ' ',
	  map { $node->safe_psql('postgres', "SELECT phase, position, pending FROM lake.owner_state('c$_')") }
	  1 .. $CLIENTS;
	is($states,
		join(' ', map { 'Planning|0|' . scalar @{ $told{"c$_"} // [] } } 1 .. $CLIENTS),
		'cycle buffer: each owner is live in Planning with its accepted casts pending');

	# A fresh session is refused too, within the queue wait.
	my $t0 = Time::HiRes::time();
	my ($state, $msg) = sql_error($node,
		"SELECT lake.cast('c1', NULL, NULL, cast_payload('probe', 0, $CAST_BYTES))");
	my $took = (Time::HiRes::time() - $t0) * 1000;
	is("$state $msg", '53000 cycle buffer full', 'cycle buffer: a new session is refused with 53000');
	cmp_ok($took, '<', $QWAIT_MS + $SLACK_MS, sprintf('cycle buffer: in %.0f ms', $took));
	server_up('cycle buffer full');
}
$hold->query_safe('ROLLBACK');
$hold->quit;

# Seal: every accepted cast lands exactly once, where its receipt says.
{
	# The worker, free to write again, may seal the full ring before this.
	$node->safe_psql('postgres', 'SELECT lake.seal()');
	is($node->safe_psql('postgres', 'SELECT casts_pending FROM lake.stats()'), '0',
		'seal: the full ring sealed, nothing left pending');
	my $cycle = $node->safe_psql('postgres', 'SELECT max(cycle) FROM lake.cycles()');

	my $log = read_log($node);
	is(scalar @$log, $accepted, "seal: the log holds exactly the $accepted accepted casts");
	my %held;
	push @{ $held{ $_->{owner} } }, $_ for @$log;
	for my $i (1 .. $CLIENTS)
	{
		my $o     = "c$i";
		my @got   = sort { $a->{position} <=> $b->{position} } @{ $held{$o} // [] };
		my @want  = @{ $told{$o} // [] };
		is( join(',', map { "$_->{position}:$_->{epoch}.$_->{seq}" } @got),
			join(',', map { ($_->{step} + 1) . ":$_->{epoch}.$_->{seq}" } @want),
			"seal: $o holds positions 1.." . scalar(@want) . " at the receipts it was given");
		my $bad = grep { $_->{payload} ne substr("$o:" . ($_->{position} - 1) . ':' . ('.' x $CAST_BYTES), 0, $CAST_BYTES) } @got;
		is($bad, 0, "seal: ${o}'s payloads are intact");
		my ($phase, $lap, $pos) = eval { kanban_replay($o, \@got) };
		is($@, '', "seal: ${o}'s landings replay as legal kanban moves");
		is( $node->safe_psql('postgres', "SELECT phase, lap, position, pending FROM lake.owner_state('$o')"),
			join('|', $phase // '?', $lap // '?', scalar @want, 0),
			"seal: ${o}'s live state is its replayed trajectory");
	}

	# The buffer is free again: every client casts its next move.
	my ($out, $err) = run_clients(
		[ map { "SELECT (lake.cast('c$_', (ARRAY['Planning','CognitiveWork','Evaluation','Commit'])[n % 4 + 1], "
			  . "(ARRAY['CognitiveWork','Evaluation','Commit','Planning'])[n % 4 + 1], cast_payload('c$_', n, $CAST_BYTES))).seq "
			  . "FROM (SELECT " . scalar(@{ $told{"c$_"} // [] }) . " AS n) x;\n" } 1 .. $CLIENTS ]);
	is(join('', @$err), '', 'after the seal: every client cast again without error');
	is(scalar(grep { /^\d+$/ } @$out), $CLIENTS, 'after the seal: every client got a receipt');
	my $next = $node->safe_psql('postgres', 'SELECT lake.seal()');
	is($next, $cycle + 1, 'after the seal: those casts seal as the next cycle');
	is( $node->safe_psql('postgres',
			"SELECT string_agg(owner || ':' || position, ' ' ORDER BY owner) FROM lake.log($cycle)"),
		join(' ', map { "c$_:" . (scalar(@{ $told{"c$_"} // [] }) + 1) } sort { "c$a" cmp "c$b" } 1 .. $CLIENTS),
		'after the seal: each owner continued at its next position');
}

# --- 2. the owner table ---------------------------------------------------------
# The c* owners take $CLIENTS of the lake.max_owners places.
# (a) $CLIENTS clients create owners o<i>_<k> at once, one statement each,
#     up to one place short of the limit: all succeed.
# (b) a session creates the last one in an open transaction; meanwhile
#     $CLIENTS clients ask for one more each and queue behind it: once it
#     commits, every one of them is refused (53000).
# (c) $CLIENTS clients try $TRIES more each at once: all refused (53000).
# The ids are first set far ahead of the owners (as creations rolled back
# after their insert leave them): the registry is then bounded by each
# backend's count kept from its first creation plus the rows above the
# id it counted through, not by the highest id, and must still hold
# exactly lake.max_owners. (d) A session that created three owners before
# (a), and counted then, is refused one more once the others filled it.
my $TRIES = 4;
$node->safe_psql('postgres', "SELECT setval('lake_data.owner_id_seq', 100000)");
my $early = $node->background_psql('postgres');
# Its second creation counts: the first one's id is far ahead; its third
# bounds the registry by that count and moves it on.
$early->query_safe("SELECT lake.create_owner('oe_1'); SELECT lake.create_owner('oe_2'); "
	  . "SELECT lake.create_owner('oe_3')");
my @created;

# Owner creations from stdout/stderr: (created, refused, other errors).
sub parse_creations
{
	my ($out, $err) = @_;
	my (@ok, @refused, @other);
	@ok = map { split /\n/ } @$out;
	for my $line (map { split /\n/ } @$err)
	{
		next if $line =~ /^(LOCATION|DETAIL|HINT):/;
		if ($line =~ /^psql:\S+ ERROR:\s+53000:\s+cannot create owner "(o\d+_\d+)": lake\.max_owners \($MAX_OWNERS\) owners exist$/)
		{
			push @refused, $1;
		}
		else
		{
			push @other, $line;
		}
	}
	return (\@ok, \@refused, \@other);
}

# lake.admission_queue_wait = $setting, once new sessions show $ms.
sub set_queue_wait
{
	my ($setting, $ms) = @_;
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET lake.admission_queue_wait = '$setting'; SELECT pg_reload_conf()");
	$node->poll_query_until('postgres', 'SHOW lake.admission_queue_wait', $ms)
	  or die "lake.admission_queue_wait did not become $setting";
}

sub create_sql
{
	my ($i, $from, $to) = @_;
	return join '', map { "SELECT 'o${i}_$_' FROM lake.create_owner('o${i}_$_');\n" } $from .. $to;
}

{
	push @created, 'oe_1', 'oe_2', 'oe_3';
	my $room = $MAX_OWNERS - $CLIENTS - 4;
	my @share = map { int($room / $CLIENTS) + ($_ <= $room % $CLIENTS ? 1 : 0) } 1 .. $CLIENTS;
	# Concurrent creations take turns on the owner-creation lock, a wait
	# bounded by lake.admission_queue_wait: the section tests the limit,
	# not that bound, so none may run out on a loaded machine.
	set_queue_wait('60s', 60000);
	my ($ok, $refused, $other) = parse_creations(run_clients([ map { create_sql($_, 1, $share[ $_ - 1 ]) } 1 .. $CLIENTS ]));
	is_deeply($other, [], 'owner table (a): no error while there is room');
	is(scalar @$ok, $room, "owner table (a): $CLIENTS clients created $room owners at once");
	push @created, @$ok;

	# (The 60 s queue wait also lets all of them queue before the last
	# owner's creation commits.)
	my $last = $node->background_psql('postgres');
	$last->query_safe("BEGIN; SELECT lake.create_owner('o0_1')");
	my $queued = start_clients([ map { create_sql($_, 99, 99) } 1 .. $CLIENTS ]);
	ok( $node->poll_query_until('postgres',
			"SELECT count(*) = $CLIENTS FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
			  . "AND query LIKE '%lake.create_owner(''o%\\_99'')%'"),
		"owner table (b): $CLIENTS creations queue behind the open creation of the last owner");
	$last->query_safe('COMMIT');
	$last->quit;
	push @created, 'o0_1';
	($ok, $refused, $other) = parse_creations(finish_clients($queued));
	is_deeply($other, [], 'owner table (b): no error other than 53000 max_owners');
	is_deeply($ok, [], 'owner table (b): none of the queued creations got past the limit')
	  or diag("created beyond lake.max_owners: @$ok");
	is(scalar @$refused, $CLIENTS, "owner table (b): all $CLIENTS were refused with 53000");
	push @created, @$ok;

	($ok, $refused, $other) = parse_creations(run_clients([ map { create_sql($_, 100, 99 + $TRIES) } 1 .. $CLIENTS ]));
	is_deeply($other, [], 'owner table (c): no error other than 53000 max_owners');
	is(scalar @$refused, $CLIENTS * $TRIES, "owner table (c): all $CLIENTS x $TRIES creations were refused with 53000");
	push @created, @$ok;
	$node->safe_psql('postgres', q{
CREATE FUNCTION try_create(n text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM lake.create_owner(n); RETURN 'created';
EXCEPTION WHEN OTHERS THEN RETURN SQLSTATE || ': ' || SQLERRM;
END $$});
	is($early->query_safe("SELECT try_create('oe_4')"),
		"53000: cannot create owner \"oe_4\": lake.max_owners ($MAX_OWNERS) owners exist",
		'owner table (d): a session that counted before the others created is refused too');
	$early->quit;
	set_queue_wait("${QWAIT_MS}ms", $QWAIT_MS);
	@created = sort @created;
	note(scalar(@created) . " owners created, " . ($CLIENTS + $CLIENTS * $TRIES) . " creations tried beyond the limit");

	is( $node->safe_psql('postgres', 'SELECT count(*) FROM lake_data.owner'),
		$MAX_OWNERS, "owner table: the registry holds lake.max_owners = $MAX_OWNERS owners");
	is( $node->safe_psql('postgres', "SELECT string_agg(name, ',' ORDER BY name) FROM lake_data.owner WHERE name LIKE 'o%'"),
		join(',', @created), 'owner table: the registry holds exactly the owners the clients were told were created');
	is($node->safe_psql('postgres', 'SELECT string_agg(p, E\'\n\') FROM owner_problems() p'),
		'', 'owner table: every registered owner is live; the new ones in Planning, lap 0, position 0');

	my ($state, $msg) = sql_error($node, "SELECT lake.create_owner('one-more')");
	is($state, '53000', "owner table: one more owner is refused with 53000 ($msg)");
	($state, $msg) = sql_error($node, "SELECT lake.create_owner('c1')");
	is($state, '42710', "... and an existing one, when full, with 42710 ($msg)");

	# The owners from before are intact, and the new ones take casts.
	is( $node->safe_psql('postgres',
			"SELECT string_agg(s.position::text, ',' ORDER BY o.name) FROM lake_data.owner o, "
			  . "LATERAL lake.owner_state(o.name) s WHERE o.name LIKE 'c%'"),
		join(',', map { scalar(@{ $told{"c$_"} // [] }) + 1 } sort { "c$a" cmp "c$b" } 1 .. $CLIENTS),
		'owner table: the owners from before keep their positions');
	is( $node->safe_psql('postgres',
			"SELECT (lake.cast_durable('o0_1', 'Planning', 'CognitiveWork')).position"),
		'1', 'owner table: the last owner created takes a durable cast');
	server_up('owner table full');
}

# --- 3. the admission budget: slots ------------------------------------------
# Each holder appends to a dataset of its own (appends to one dataset take
# turns on its lock); the clients append to ds.

sub usage
{
	return $node->safe_psql('postgres', 'SELECT slots_in_use, bytes_reserved FROM lake.admission()');
}

sub counters
{
	return split /\|/, $node->safe_psql('postgres', 'SELECT admitted, waited, rejected FROM lake.admission()');
}

# A session holding a permit: an append of n * 32 bytes to dataset ds in
# an open transaction.
sub holder
{
	my ($ds, $op, $n) = @_;
	my $h = $node->background_psql('postgres');
	$h->query_safe('BEGIN');
	my $v = $h->query_safe("SELECT lake.append('$ds', 't', '$op', payload('$op', $n))");
	return ($h, $v);
}

# Does the version of op in ds read back as payload(op, n)?
sub reads_back
{
	my ($ds, $op, $n) = @_;
	return $node->safe_psql('postgres',
		"SELECT version || ':' || (lake.read_operation('$ds', 't', '$op') = payload('$op', $n)) "
		  . "FROM lake.versions('$ds') WHERE operation_id = '$op'");
}

# Requests with refusals parsed: (outcomes other than the refusal, ms of refusals, details)
sub parse_appends
{
	my ($out) = @_;
	my (@other, @ms, @detail);
	for my $line (map { split /\n/ } @$out)
	{
		my ($outcome, $ms, $msg, $detail) = split /\|/, $line, 4;
		if ($outcome eq '53000' && $msg eq 'append admission limit reached')
		{
			push @ms, $ms;
			push @detail, $detail;
		}
		else
		{
			push @other, $line;
		}
	}
	return (\@other, \@ms, \@detail);
}

my $ATTEMPTS = 3;
{
	my ($h1, $v1) = holder('h1', 'hold-1', 6400);    # 204,800 bytes each
	my ($h2, $v2) = holder('h2', 'hold-2', 6400);
	ok($node->poll_query_until('postgres', 'SELECT slots_in_use, bytes_reserved FROM lake.admission()', '2|409600'),
		'slots: the two holders hold both slots and their 409600 bytes');
	my ($admitted, $waited, $rejected) = counters();

	my ($out, $err) = run_clients(
		[ map { "SELECT * FROM try_appends('slot-$_', 10, $ATTEMPTS);\n" } 1 .. $CLIENTS ]);
	is(join('', @$err), '', 'slots: the clients ran without a client-side error');
	my ($other, $ms, $detail) = parse_appends($out);
	is_deeply($other, [], 'slots: no outcome other than 53000 append admission limit reached');
	is(scalar @$ms, $CLIENTS * $ATTEMPTS, "slots: all $CLIENTS x $ATTEMPTS appends were refused");
	is(scalar(grep { /^2 of 2 slots in use/ } @$detail), scalar @$ms, 'slots: each refusal says both slots are in use');
	latencies_ok('slots', @$ms);

	is(usage(), '2|409600', 'slots: the holders still hold exactly their permits');
	is( join('|', counters()),
		join('|', $admitted, $waited + $CLIENTS * $ATTEMPTS, $rejected + $CLIENTS * $ATTEMPTS),
		'slots: lake.admission() counted each refusal as waited and rejected, admitted none');
	is( $node->safe_psql('postgres', "SELECT count(*) FROM lake.versions('ds') WHERE operation_id LIKE 'slot-%'"),
		'0', 'slots: no refused append left a version');

	$h1->query_safe('COMMIT');
	$h2->query_safe('COMMIT');
	$h1->quit;
	$h2->quit;
	ok($node->poll_query_until('postgres', 'SELECT slots_in_use, bytes_reserved FROM lake.admission()', '0|0'),
		'slots: both permits return at commit');
	is(reads_back('h1', 'hold-1', 6400) . ' ' . reads_back('h2', 'hold-2', 6400),
		"$v1:true $v2:true", "slots: the holders' versions exist and read back byte-exact");
	is($node->safe_psql('postgres', "SELECT lake.append('ds', 't', 'after-slots', payload('after-slots', 10))"),
		'4', 'slots: an append is admitted again (version 4 of ds)');
}

# --- 4. the admission budget: bytes ------------------------------------------
# One holder reserves max_stream_bytes; a slot is free, but a payload that
# fits max_stream_bytes and not the remaining budget is refused, a smaller
# one is admitted.
{
	my ($h, $v) = holder('hbig', 'hold-big', $STREAM / 32);
	ok( $node->poll_query_until('postgres', 'SELECT slots_in_use, bytes_reserved FROM lake.admission()', "1|$STREAM"),
		"bytes: the holder holds one slot and $STREAM bytes");
	my ($admitted, $waited, $rejected) = counters();
	my $left = $BUFFERED - $STREAM;
	my $n    = int($left / 32) + 1000;    # 32,000 bytes more than is left
	my ($out, $err) = run_clients([ map { "SELECT * FROM try_appends('bytes-$_', $n, 2);\n" } 1 .. 4 ]);
	is(join('', @$err), '', 'bytes: the clients ran without a client-side error');
	my ($other, $ms, $detail) = parse_appends($out);
	is_deeply($other, [], 'bytes: no outcome other than 53000 append admission limit reached');
	is(scalar @$ms, 8, 'bytes: all 4 x 2 appends of ' . ($n * 32) . " bytes (> $left left) were refused");
	is( scalar(grep { /^1 of 2 slots in use and $STREAM of $BUFFERED bytes reserved/ } @$detail),
		8, 'bytes: each refusal was for bytes, with a slot free');
	latencies_ok('bytes', @$ms);
	is( join('|', counters()),
		join('|', $admitted, $waited + 8, $rejected + 8),
		'bytes: lake.admission() counted the 8 refusals');

	my $small = int($left / 32) - 1000;
	is( $node->safe_psql('postgres', "SELECT lake.append('ds', 't', 'bytes-fits', payload('bytes-fits', $small))"),
		'5', 'bytes: meanwhile a payload that fits the remaining budget is admitted (version 5 of ds)');

	$h->query_safe('COMMIT');
	$h->quit;
	ok($node->poll_query_until('postgres', 'SELECT slots_in_use, bytes_reserved FROM lake.admission()', '0|0'),
		'bytes: the permit returns at commit');
	is(reads_back('hbig', 'hold-big', $STREAM / 32), "$v:true",
		"bytes: the holder's $STREAM-byte version reads back byte-exact");
	is( $node->safe_psql('postgres', "SELECT count(*) FROM lake.versions('ds') WHERE operation_id LIKE 'bytes-%-%'"),
		'0', 'bytes: no refused append left a version');
}

# Everything accepted before is intact: the versions from before unchanged,
# every version whole, versions gap-free.
is( $node->safe_psql('postgres',
		"SELECT string_agg(version || ':' || encode(digest, 'hex'), ',' ORDER BY version) FROM lake.versions('ds') WHERE version <= 3"),
	$before, 'the versions from before are unchanged');
is( $node->safe_psql('postgres',
		"SELECT string_agg(d || ':' || (SELECT count(*) = max(version) AND bool_and(digest = sha256(lake.read(d, version))) "
		  . "AND bool_and(bytes = length(lake.read(d, version))) FROM lake.versions(d)), ' ' ORDER BY d) "
		  . "FROM unnest(ARRAY['ds', 'h1', 'h2', 'hbig']) d"),
	'ds:true h1:true h2:true hbig:true', 'every version of every dataset reads whole, matches its digest, versions are gap-free');
is( $node->safe_psql('postgres', "SELECT string_agg(operation_id, ',' ORDER BY version) FROM lake.versions('ds')"),
	'before-1,before-2,before-3,after-slots,bytes-fits', 'ds holds exactly the appends that were admitted');
server_up('at the end');

# --- 5. a restart after the exhaustion ---------------------------------------
# What was accepted is durable, and the worker recovers every registered
# owner (the registry must never have outgrown lake.max_owners) and serves.
{
	my $log   = $node->safe_psql('postgres', 'SELECT owner, position, epoch, seq FROM lake.log() ORDER BY cycle, seq');
	my $epoch = $node->safe_psql('postgres', 'SELECT epoch FROM lake.stats()');
	$node->restart;
	my $took = wait_until(20, sub {
		$node->safe_psql('postgres', 'SELECT epoch FROM lake.stats()') > $epoch });
	ok(defined $took, 'restart: the worker recovered the owners and serves a new epoch')
	  or diag(join "\n", (grep { /(ERROR|FATAL|PANIC):/ } split /\n/, slurp_file($node->logfile, $log_from))[-3 .. -1]);
	is($node->safe_psql('postgres', 'SELECT recovery_owners, recovery_quarantined FROM lake.stats()'),
		"$MAX_OWNERS|0", "restart: all $MAX_OWNERS registered owners recovered, none quarantined");
	is($node->safe_psql('postgres', 'SELECT owner, position, epoch, seq FROM lake.log() ORDER BY cycle, seq'),
		$log, 'restart: the sealed log is unchanged');
	my ($ret, $out, $err) = $node->psql('postgres',
		"SET statement_timeout = '10s'; SELECT (lake.cast_durable('c1', NULL, NULL)).position");
	is("$ret $out", '0 ' . (scalar(@{ $told{c1} // [] }) + 2), 'restart: c1 takes its next cast')
	  or diag($err);
	is( $node->safe_psql('postgres', "SELECT count(*) FROM lake.versions('ds')"),
		'5', 'restart: the 5 versions of ds are there');
}

# --- 6. a restart with lake.max_owners lowered below the registry ----------
# The worker cannot recover (no room in shared memory) and retries; a cast
# is refused at once with 55000 and the reason, never left waiting. With
# the limit restored, everything comes back.
{
	my $half = $MAX_OWNERS / 2;
	$node->append_conf('postgresql.conf', "lake.max_owners = $half");
	$node->restart;
	# Until the worker's first attempt fails, a cast waits for it (53000
	# once the queue wait is over); from then on it is told why at once.
	my ($state, $msg, $took);
	wait_until(20, sub {
		my $t0 = Time::HiRes::time();
		($state, $msg) = sql_error($node,
			"SET statement_timeout = '30s'; SELECT lake.cast('c1', NULL, NULL)");
		$took = Time::HiRes::time() - $t0;
		$state ne '53000';
	});
	is($state, '55000', 'max_owners below the registry: a cast is refused with 55000');
	like($msg, qr/lake owners are not available: the worker could not recover them/,
		'saying the worker could not recover the owners');
	my (undef, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\nSELECT lake.cast('c1', NULL, NULL)");
	like($err, qr/DETAIL:\s+The last recovery failed: lake\.max_owners \($half\) is too small for the $MAX_OWNERS registered owners/,
		'and why, in the detail');
	cmp_ok($took, '<', 10, sprintf('the refusal is prompt (%.2f s), not a wait', $took));
	is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_stat_activity WHERE backend_type = \'lake worker\''),
		'1', 'the worker is up, retrying');
	# Each retry clears it while it runs (milliseconds of each second).
	ok($node->poll_query_until('postgres', 'SELECT worker_state FROM lake.stats()', 'recovery failing'),
		'lake.stats() says the recovery is failing, not that casts wait for it');

	$node->append_conf('postgresql.conf', "lake.max_owners = $MAX_OWNERS");
	$node->restart;
	ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
		'limit restored: the worker has recovered the owners');
	my ($ret, $n, $e) = $node->psql('postgres',
		"SET statement_timeout = '10s'; SELECT (lake.cast_durable('c1', NULL, NULL)).position");
	is("$ret $n", '0 ' . (scalar(@{ $told{c1} // [] }) + 3), 'limit restored: c1 takes its next cast')
	  or diag($e);
	is($node->safe_psql('postgres', 'SELECT recovery_owners, recovery_quarantined FROM lake.stats()'),
		"$MAX_OWNERS|0", "limit restored: all $MAX_OWNERS owners recovered");
}

note(sprintf('runtime %.1f s', Time::HiRes::time() - $t_start));
$node->stop;
done_testing();
