# LakeTAP.pm — small helpers shared by lake's TAP tests (test/t/*.pl).
#
# Every node that loads lake is made here, so all tests configure it the
# same way; errors are asserted by their SQLSTATE, read from psql's verbose
# error output.
package LakeTAP;

use strict;
use warnings;

use Config ();
use Exporter 'import';
use PostgreSQL::Test::Cluster;
use IPC::Run;
use Test::More ();
use Time::HiRes qw(usleep);

our @EXPORT = qw(lake_node sql_error wait_until lock_timeouts_logged gdb_stopped held_session kanban_next kanban_replay read_log
  live_states kanban_statements cast_sql client_sql gdb_hold gdb gdb_let_go
  background finished restart_recovered tuple_at poke preload_library with_preload
  sync_standby);

# PostgreSQL 15's poll_query_until feeds its query to psql through a pipe.
# While a crashed server restarts, psql can fail to connect and exit before
# IPC::Run writes to that pipe; IPC::Run then dies with EPIPE and takes the
# whole test file with it (exit status 32, no plan). The tests poll across
# crash restarts on purpose, so poll with the query on the command line and
# nothing on stdin; the contract (expected output, empty stderr, 0.1 s
# steps, the default timeout) is unchanged.
{
	no warnings 'redefine';

	*PostgreSQL::Test::Cluster::poll_query_until = sub {
		my ($self, $dbname, $query, $expected) = @_;
		local %ENV = $self->_get_env();
		$expected //= 't';
		my ($stdout, $stderr) = ('', '');
		for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
		{
			IPC::Run::run(
				[
					$self->installed_command('psql'), '-XAt', '-d', $self->connstr($dbname),
					'-c', $query
				],
				'<', '/dev/null', '>', \$stdout, '2>', \$stderr);
			chomp($stdout);
			chomp($stderr);
			return 1 if $stdout eq $expected && $stderr eq '';
			usleep(100_000);
		}
		Test::More::diag("poll_query_until timed out executing this query:\n$query\n"
			  . "expecting this output:\n$expected\nlast actual query output:\n$stdout\n"
			  . "with stderr:\n$stderr");
		return 0;
	};
}

# lake_node(name, init => {...}, conf => "lines", preload => 1, install_path => dir)
#
# A new, initialised (not started) node. By default it preloads lake and
# serves database postgres; 'conf' lines are appended after that.
# 'install_path' runs it from another installation (bin/ under it).
sub lake_node
{
	my ($name, %opt) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name,
		defined $opt{install_path} ? (install_path => $opt{install_path}) : ());

	$node->init(%{ $opt{init} // {} });
	my $preload = $opt{preload} // 1;
	# Casts wait for the worker's recovery (after a start, a crash, a
	# lifecycle edit) up to lake.admission_queue_wait: a minute, so a slow
	# machine never turns a recovery into a 53000. The tests of that bound
	# and of admission set their own.
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'lake'\nlake.database = 'postgres'\n"
		  . "lake.admission_queue_wait = '60s'")
	  if $preload;
	$node->append_conf('postgresql.conf', $opt{conf}) if defined $opt{conf};
	return $node;
}

# preload_library(dir, name) -> path of test/t/<name>.c built into dir as a
# shared library, for LD_PRELOAD (with_preload)
sub preload_library
{
	my ($dir, $name) = @_;
	my $so = "$dir/$name.so";
	my $cc = $ENV{CC} // $Config::Config{cc} // 'cc';

	system($cc, '-shared', '-fPIC', '-O2', '-o', $so, "test/t/$name.c") == 0
	  or die "cannot build test/t/$name.c with $cc";
	return $so;
}

# with_preload(so, {VAR => value, ...}, sub) -> what sub returns
#
# Runs sub (a node's start or restart) with the library preloaded and the
# variables it reads set: the server started inherits them.
sub with_preload
{
	my ($so, $env, $run) = @_;
	local $ENV{LD_PRELOAD} = $so;
	local @ENV{ keys %$env } = values %$env;
	return $run->();
}

# sync_standby(primary, name) -> a started standby of primary (made with
# allows_streaming), named in primary's synchronous_standby_names
#
# Asserts that primary sees it as its synchronous standby.
sub sync_standby
{
	my ($primary, $name) = @_;

	$primary->backup("b_$name");
	my $standby = PostgreSQL::Test::Cluster->new($name);
	$standby->init_from_backup($primary, "b_$name", has_streaming => 1);
	$standby->append_conf('postgresql.conf', "cluster_name = '$name'");
	$standby->start;
	$primary->safe_psql('postgres',
		"ALTER SYSTEM SET synchronous_standby_names = '$name'; SELECT pg_catalog.pg_reload_conf()");
	Test::More::ok($primary->poll_query_until('postgres',
			"SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = '$name'"),
		"$name is the synchronous standby");
	return $standby;
}

# restart_recovered(node [, mode]) -> whether the worker recovered again
#
# Stops the node (immediate unless 'mode' says otherwise), starts it, and
# waits until the worker has recovered the owners under a new epoch.
sub restart_recovered
{
	my ($node, $mode) = @_;
	my $e = $node->safe_psql('postgres', 'SELECT epoch FROM lake.stats()');
	$node->stop($mode // 'immediate');
	$node->start;
	return $node->poll_query_until('postgres',
		"SELECT epoch > $e AND worker_state = 'serving' FROM lake.stats()");
}

# sql_error(node, sql [, db]) -> (sqlstate, message)
#
# Runs sql in a fresh session and returns the SQLSTATE and message of the
# first error it raised, or ('', '') when it raised none. A session that
# failed without one (a lost connection, a crashed backend, a psql error)
# is ('?', what psql said): never taken for success.
sub sql_error
{
	my ($node, $sql, $db) = @_;
	my ($ret, $out, $err) = $node->psql($db // 'postgres',
		"\\set VERBOSITY verbose\n$sql", on_error_stop => 1);

	# psql prefixes script errors with "psql:<stdin>:N: ".
	return ($1, $2)
	  if $err =~ /^(?:psql:\S+ )?(?:ERROR|FATAL):\s+([0-9A-Z]{5}):\s+(.*)$/m;
	return ('?', $err) if $ret != 0;
	return ('', '');
}

# wait_until(timeout_s, sub) -> elapsed seconds, or undef on timeout
#
# Polls a Perl condition every 10 ms, for conditions poll_query_until
# cannot express (a process gone) or when the time it took matters.
sub wait_until
{
	my ($timeout, $cond) = @_;
	my $start = Time::HiRes::time();

	while (Time::HiRes::time() - $start < $timeout)
	{
		return Time::HiRes::time() - $start if $cond->();
		usleep(10_000);
	}
	return undef;
}

# lock_timeouts_logged(node, offset, n) -> whether the server log, from byte
# offset on, holds n lock timeouts within 60 s (the worker gave up n times)
sub lock_timeouts_logged
{
	my ($node, $offset, $n) = @_;
	return defined wait_until(
		60,
		sub {
			my @hits = PostgreSQL::Test::Utils::slurp_file($node->logfile, $offset) =~ /lock timeout/g;
			return @hits >= $n;
		});
}

# kanban, as the recovery tests understand it.
my %EDGE = map { $_ => 1 } (
	'Planning>CognitiveWork', 'CognitiveWork>Evaluation',
	'Evaluation>Commit',      'Evaluation>Prune',
	'Commit>Planning',        'Prune>Planning');

# kanban_next(owner, phase, lap) -> the phase the test moves the owner to:
# Commit on even laps of even owners and odd laps of odd ones, else Prune.
sub kanban_next
{
	my ($owner, $phase, $lap) = @_;
	my ($n) = $owner =~ /(\d+)/;
	return 'CognitiveWork' if $phase eq 'Planning';
	return 'Evaluation'    if $phase eq 'CognitiveWork';
	return (($n + $lap) % 2 ? 'Prune' : 'Commit') if $phase eq 'Evaluation';
	return 'Planning';
}

# kanban_replay(owner, [ {position, from, to, lap}, ... ]) -> (phase, lap,
# position): the state its landings (in position order) reach from
# creation; dies naming the first landing that does not fit.
sub kanban_replay
{
	my ($owner, $landings) = @_;
	my ($phase, $lap, $pos) = ('Planning', 0, 0);
	for my $l (@$landings)
	{
		die "$owner: position $l->{position} follows $pos\n"
		  unless $l->{position} == $pos + 1;
		if ($l->{from} ne '')
		{
			die "$owner: landing $l->{position} moves from $l->{from}, owner is in $phase\n"
			  unless $l->{from} eq $phase;
			die "$owner: landing $l->{position} moves $l->{from} -> $l->{to}, not an edge\n"
			  unless $EDGE{"$l->{from}>$l->{to}"};
			$phase = $l->{to};
			$lap++ if $phase eq 'Planning';
		}
		die "$owner: landing $l->{position} carries lap $l->{lap}, replay says $lap\n"
		  unless $l->{lap} == $lap;
		$pos = $l->{position};
	}
	return ($phase, $lap, $pos);
}

# read_log(node) -> the sealed log as a list of landings in (cycle, seq) order.
sub read_log
{
	my ($node) = @_;
	my @log;
	for my $line (
		split /\n/,
		$node->safe_psql(
			'postgres',
			"SELECT owner, position, cycle, epoch, seq, coalesce(from_phase, ''), coalesce(to_phase, ''), "
			  . "lap, convert_from(payload, 'UTF8'), coalesce(operation_id, '') "
			  . "FROM lake.log() ORDER BY cycle, seq"))
	{
		my %l;
		@l{qw(owner position cycle epoch seq from to lap payload op)} = split /\|/, $line, -1;
		push @log, \%l;
	}
	return \@log;
}

# live_states(node) -> { owner => "phase|lap|position|pending|quarantined" }
sub live_states
{
	my ($node) = @_;
	my %s;
	for my $line (
		split /\n/,
		$node->safe_psql(
			'postgres',
			"SELECT o.name, s.phase, s.lap, s.position, s.pending, s.quarantined "
			  . "FROM lake_data.owner o, LATERAL lake.owner_state(o.name) s"))
	{
		my ($o, @rest) = split /\|/, $line;
		$s{$o} = join('|', @rest);
	}
	return \%s;
}

# kanban_statements(tag, [owners], {owner => {phase, lap}}, steps, no_step)
# -> [ statements ]: the owners walked round-robin through kanban (see
# kanban_next) from the given states, 'steps' casts each; statement k is a
# no-step cast when no_step->(k) is true. A statement is a hash: k, owner,
# lap, payload ("owner tag kK", unique), op ("tag.kK"), from and to.
sub kanban_statements
{
	my ($tag, $owners, $state, $steps, $no_step) = @_;
	my %m = map { $_ => {%{ $state->{$_} }} } @$owners;
	my @stmts;
	my $k = 0;
	for my $step (0 .. $steps - 1)
	{
		for my $o (@$owners)
		{
			my $s = $m{$o};
			my %st = (k => $k, owner => $o, lap => $s->{lap}, payload => "$o $tag k$k", op => "$tag.k$k");
			if (!$no_step->($k))
			{
				$st{from} = $s->{phase};
				$st{to}   = kanban_next($o, $s->{phase}, $s->{lap});
				$s->{phase} = $st{to};
				$s->{lap}++ if $st{to} eq 'Planning';
			}
			push @stmts, \%st;
			$k++;
		}
	}
	return \@stmts;
}

# cast_sql(statement) -> SQL that casts it durably and prints
# "ack|k|owner|position|cycle".
sub cast_sql
{
	my ($st) = @_;
	my $move = defined $st->{from} ? "'$st->{from}', '$st->{to}'" : 'NULL, NULL';
	return
	  "SELECT 'ack', $st->{k}, '$st->{owner}', (c).position, (c).cycle "
	  . "FROM lake.cast_durable('$st->{owner}', $move, convert_to('$st->{payload}', 'UTF8'), "
	  . "$st->{lap}, '$st->{op}') c;";
}

# client_sql(statement) -> what a client runs for it: cast_sql for even k;
# for odd k lake.cast, its receipt printed ("rcpt k (epoch,seq)"), then
# await_durable of that receipt, printing the same ack line. A cast cut
# short by the fault leaves r unset: then neither is run (psql would print
# the unset ":r" as it is).
sub client_sql
{
	my ($st) = @_;
	return cast_sql($st) if $st->{k} % 2 == 0;
	my $move = defined $st->{from} ? "'$st->{from}', '$st->{to}'" : 'NULL, NULL';
	return join("\n",
		'\\unset r',
		"SELECT lake.cast('$st->{owner}', $move, convert_to('$st->{payload}', 'UTF8'), "
		  . "$st->{lap}, '$st->{op}') AS r \\gset",
		'\\if :{?r}',
		"\\echo rcpt $st->{k} :r",
		"SELECT 'ack', $st->{k}, '$st->{owner}', (c).position, (c).cycle "
		  . "FROM lake.await_durable(:'r') c;",
		'\\endif');
}


# gdb_hold(pid, function) -> gdb handle
#
# Attaches gdb to a server process with a breakpoint at 'function' and lets
# the process run on; it stops when it reaches the function ("Breakpoint
# 1," in $g->{out}). Signals the server uses pass through unreported.
sub gdb_hold
{
	my ($pid, $function) = @_;
	my %g = (in => '', out => '', pid => $pid);

	# No debuginfod: it would ask on stdin, then fetch from the network.
	local $ENV{DEBUGINFOD_URLS} = '';
	$g{h} = IPC::Run::start(
		[ 'gdb', '-q', '-nx', '-p', $pid ],
		'<', \$g{in}, '>', \$g{out}, '2>', \$g{out});
	gdb(\%g, "set pagination off\nset confirm off\n"
		  . "handle SIGUSR1 SIGUSR2 SIGURG SIGALRM SIGHUP SIGTERM SIGPIPE nostop noprint pass\n"
		  . "break $function\necho lake-gdb-ready\\n\n", qr/lake-gdb-ready/)
	  or Test::More::BAIL_OUT("gdb could not attach to process $pid: $g{out}");
	gdb(\%g, "continue\n", qr/Continuing/);
	return \%g;
}

# gdb_stopped(handle) -> whether the process reached its breakpoint within 30 s
sub gdb_stopped
{
	my ($g) = @_;
	return defined wait_until(30, sub { $g->{h}->pump_nb; $g->{out} =~ /Breakpoint 1,/ });
}

# held_session(node, function, sql) -> (background psql, its pid, gdb handle)
#
# A session that runs sql with gdb holding it at 'function' (check with
# gdb_stopped); its output ends with "done" once sql has run.
sub held_session
{
	my ($node, $function, $sql) = @_;
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	my $g = gdb_hold($pid, $function);
	$s->query_until(qr/start/, "\\echo start\n$sql\n\\echo done\n");
	return ($s, $pid, $g);
}

# gdb(handle, commands, regexp) -> whether gdb's output matched within 30 s
sub gdb
{
	my ($g, $cmd, $re) = @_;
	$g->{out} = '';
	$g->{in} .= $cmd;
	return defined wait_until(30, sub { $g->{h}->pump_nb; $g->{out} =~ $re });
}

# gdb_let_go(handle): stops the process if it runs (gdb's SIGINT), drops the
# breakpoint and detaches, so a failed test leaves no traced process behind.
sub gdb_let_go
{
	my ($g) = @_;
	$g->{h}->signal('INT');
	gdb($g, "delete\ndetach\n", qr/Detaching|not being run/);
	$g->{in} .= "quit\n";
	$g->{h}->finish;
}

# background(node, sql) -> a psql running sql in the background (errors
# verbose: "ERROR:  <SQLSTATE>: message")
sub background
{
	my ($node, $sql) = @_;
	my %b = (out => '', err => '', sql => $sql);
	$b{h} = IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'VERBOSITY=verbose', '-d', $node->connstr('postgres'), '-c', $sql ],
		'>', \$b{out}, '2>', \$b{err});
	return \%b;
}

# finished(background psql) -> whether it has exited
sub finished
{
	my ($b) = @_;
	$b->{h}->pump_nb if $b->{h}->pumpable;
	return !$b->{h}->pumpable;
}

# tuple_at(node, table, where) -> (file, offset): where the tuple header of
# the row of 'table' that 'where' selects sits in the table's file (needs
# pageinspect).
sub tuple_at
{
	my ($node, $table, $where) = @_;
	my ($blk, $lp) = split /\|/,
	  $node->safe_psql('postgres', "SELECT (ctid::text::point)[0], (ctid::text::point)[1] FROM $table WHERE $where");
	my $off = $node->safe_psql('postgres',
		"SELECT lp_off FROM heap_page_items(get_raw_page('$table', $blk)) WHERE lp = $lp");
	return ($node->data_dir . '/' . $node->safe_psql('postgres', "SELECT pg_relation_filepath('$table')"),
		$blk * 8192 + $off);
}

# poke(file, offset, bytes): write 'bytes' at 'offset' of 'file' (the
# server stopped).
sub poke
{
	my ($file, $offset, $bytes) = @_;
	open(my $fh, '+<', $file) or die "open $file: $!";
	binmode $fh;
	seek($fh, $offset, 0) or die;
	print $fh $bytes;
	close $fh;
}

1;
