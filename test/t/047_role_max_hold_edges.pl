# lake.role_max_hold at its edges (031_role_max_hold.pl tests the bound
# itself): an idle session is ended AT its bound, measured on the server's
# clock, not merely after it; and a bound that runs out while a COMMIT has
# passed its last interrupt check but not yet begun to commit (held there
# with gdb, at PreCommit_Portals, before the PRE_COMMIT callbacks) still
# ends the session before anything is committed.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use LakeTAP;

my $node = lake_node('hold_edges', conf => "lake.admission_queue_wait = '100ms'\n");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_dataset('shared');
CREATE ROLE hog LOGIN;
GRANT USAGE ON SCHEMA lake TO hog;
SELECT lake.grant_tenant('hog', 'acme');
ALTER ROLE hog SET lake.role_max_hold = '2s';
});

# --- ended at the bound: from the hold (the append's end, when the session
# went idle in its transaction; the hold began a little earlier) to the
# FATAL's timestamp in the server log, both on the server's clock: 2 s,
# with 1.5 s of slack for a slow machine.
my $log0 = -s $node->logfile;
my $hog = $node->background_psql('postgres', on_error_stop => 0, extra_params => [ '-U', 'hog' ]);
my $pid = $hog->query_safe('SELECT pg_backend_pid()');
$hog->query_safe("SET idle_in_transaction_session_timeout = 0; BEGIN; "
	  . "SELECT lake.append('shared', 'acme', 'h1', '\\x01')");
my $held_from = $node->safe_psql('postgres',
	"SELECT state_change FROM pg_stat_activity WHERE pid = $pid AND state = 'idle in transaction'");
isnt($held_from, '', 'the hog holds, idle in its transaction');
ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid"),
	'past lake.role_max_hold the idle session is ended');
my ($fatal_at) = slurp_file($node->logfile, $log0) =~
  /^(\S+ \S+ \S+) \[$pid\] [^\n]*FATAL:  terminating connection: its transaction held/m;
ok(defined $fatal_at, 'the FATAL is in the log');
my $took = $node->safe_psql('postgres',
	"SELECT extract(epoch FROM '$fatal_at'::timestamptz - '$held_from'::timestamptz)");
cmp_ok($took, '<', 3.5, "ended within its bound's 2 s (and a slow machine's 1.5 s) of its hold: $took s");
eval { $hog->quit };

# --- run out just before the commit: held where the COMMIT has passed its
# last interrupt check but not yet run the PRE_COMMIT callbacks, past the
# bound (nothing to poll for: the bound is a timer, and it must pass while
# held). The session is ended there; nothing it appended is kept.
$hog = $node->background_psql('postgres', on_error_stop => 0, extra_params => [ '-U', 'hog' ]);
my $hog_pid = $hog->query_safe('SELECT pg_backend_pid()');
my $g = gdb_hold($hog_pid, 'PreCommit_Portals');
$hog->query_until(qr/start/,
	"\\echo start\nBEGIN;\nSELECT lake.append('shared', 'acme', 'h6', '\\x06');\nCOMMIT;\n\\echo done\n");
ok(gdb_stopped($g), 'the commit is held before its PRE_COMMIT callbacks') or diag("gdb: $g->{out}");
my $held_at = Time::HiRes::time();
Time::HiRes::usleep(100_000) while Time::HiRes::time() < $held_at + 3;
gdb_let_go($g);
ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $hog_pid"),
	'the session whose bound ran out before its commit began is ended');
is($node->safe_psql('postgres', "SELECT count(*) FROM lake.versions('shared') WHERE operation_id = 'h6'"),
	'0', 'before the commit: nothing it appended is kept');
eval { $hog->quit };
$node->stop;
done_testing();
