# Allocations that fail at any point of a call (SPEC §1: an error leaves
# nothing half done; a refusal never claims damage that is not there).
# The server runs with a preloaded library (alloc_fail.c, built here) that
# makes the Nth allocation of a chosen process fail; each call below runs
# in a fresh session (its caches cold, as after a connection pool's
# recycling) once for every N up to past the call's last allocation.
# Each must either succeed or fail with 53200 out of memory: never crash
# the server (a failed allocation inside libzstd 1.5.4's dictionary set-up
# did), never report stored data damaged (LK005, XX001), never leave a
# cast queued that its caller was told failed, and never leave the session
# unable to work afterwards (a failure inside OpenSSL's first set-up did).
use strict;
use warnings;

use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $dir = PostgreSQL::Test::Utils::tempdir;
my $so = preload_library($dir, 'alloc_fail');
my $arm_signal = POSIX::SIGRTMIN() + 4;

my $node = lake_node('alloc_fail');
with_preload($so, { LAKE_ALLOC_FAIL_DIR => $dir }, sub { $node->start });
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
CREATE FUNCTION dj(n int) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
  SELECT convert_to(rpad(format('{"op":"op-%s","event":"order.updated","order":%s,"trace":"%s","note":"',
    n, n * 7919 % 1000000, md5(n::text)), 254, md5(n::text || 'n')) || '"}', 'UTF8') $$;
SELECT lake.create_dataset('dd');
SELECT count(lake.append('dd', 'default', 'op-' || n, dj(n))) FROM generate_series(1, 300) n;
SELECT lake.train_dictionary('dd') > 0;
SELECT lake.append('dd', 'default', 'with-dict', dj(5000));
SELECT lake.create_owner('oc');
});
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the worker serves');
my $dict_version = $node->safe_psql('postgres',
	"SELECT version FROM lake.versions('dd') WHERE operation_id = 'with-dict'");
my $dict_bytes = $node->safe_psql('postgres', "SELECT encode(dj(5000), 'hex')");

# Run $call in a fresh session whose $n-th allocation fails; then $after
# (which must work). Returns the call's SQLSTATE ('' when it succeeded)
# and whether its error named an accepted receipt.
sub armed
{
	my ($n, $call, $after) = @_;
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	$s->query_safe('\set VERBOSITY verbose');
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	open my $fh, '>', "$dir/$pid" or die;
	print $fh $n;
	close $fh;
	kill $arm_signal, $pid;
	$s->{stderr} = '';
	my ($out) = $s->query($call);
	my $err = $s->{stderr};
	$s->{stderr} = '';
	my ($state) = $err =~ /ERROR:\s+([0-9A-Z]{5}):/;
	my $accepted = $err =~ /the cast was accepted as receipt/ ? 1 : 0;
	# Disarmed: what comes after must simply work.
	open $fh, '>', "$dir/$pid" or die;
	print $fh 0;
	close $fh;
	kill $arm_signal, $pid;
	my ($after_out) = $s->query($after);
	my $after_err = $s->{stderr};
	$s->quit;
	unlink "$dir/$pid";
	return ($state // ($err eq '' ? '' : 'no SQLSTATE: ' . $err), $accepted, $out, $after_err);
}

# A payload written out here: a function computing it (md5) could fail on
# its own allocation, with PostgreSQL's XX000.
sub payload
{
	my ($n) = @_;
	my $json = sprintf('{"op":"new-%d","event":"order.updated","order":%d,"note":"%s"}',
		$n, $n * 7919 % 1000000, 'x' x 180);
	return "'$json'::bytea";
}

# Each call is swept from N = 1 until it has succeeded five times running
# (its allocations are all behind it), at most to N = 1000.
my %seen;
my ($landed, $bad, $unfinished) = (0, 0, 0);
my @calls = (
	[ 'append to a dictionary dataset',
		sub { "SELECT lake.append('dd', 'default', 'new-$_[0]', " . payload($_[0]) . ') > 0' },
		sub { "SELECT lake.append('dd', 'default', 'after-$_[0]', " . payload(100000 + $_[0]) . ')' } ],
	[ 'read of a dictionary version',
		sub { "SELECT encode(lake.read('dd', $dict_version), 'hex')" },
		sub { 'SELECT 1' } ],
	# A cast's result returned, PostgreSQL's output of it allocates too: an
	# error there ends the statement after the cast was accepted, as after
	# nextval() (README). The casts here return no row, so lake's own
	# calls are what is tried.
	[ 'cast', sub { "SELECT WHERE lake.cast('oc', NULL, NULL) IS NULL" }, sub { 'SELECT 1' } ],
	[ 'cast_durable', sub { "SELECT WHERE lake.cast_durable('oc', NULL, NULL) IS NULL" }, sub { 'SELECT 1' } ]);
foreach my $c (@calls)
{
	my ($what, $call, $after) = @$c;
	my $running = 0;
	my $n = 0;
	while ($running < 5 && $n < 1000)
	{
		$n++;
		my ($state, $accepted, $out, $after_err) = armed($n, $call->($n), $after->($n));
		$running = $state eq '' ? $running + 1 : 0;
		$seen{"$what: " . ($state eq '' ? 'ok' : $state)}++;
		$landed++ if $what =~ /^cast/ && ($state eq '' || $accepted);
		my $wrong = ($state ne '' && $state ne '53200') || $after_err ne ''
		  || ($what =~ /^read/ && $state eq '' && $out ne $dict_bytes);
		$bad++ if $wrong;
		diag("$what, N=$n: '$state' $out; after: $after_err") if $wrong;
	}
	$unfinished++ if $running < 5;
	note("$what: swept to N=$n");
}
note("$_: $seen{$_}") for sort keys %seen;
is($bad, 0, 'every call, with any one of its allocations failing, succeeds or fails with 53200, and its session works afterwards');
is($unfinished, 0, 'every sweep reached past its call\'s last allocation');
ok($seen{'append to a dictionary dataset: 53200'} && $seen{'cast: 53200'} && $seen{'cast_durable: 53200'}
	  && $seen{'read of a dictionary version: 53200'},
	'and every call was failed somewhere');
$node->safe_psql('postgres', 'SELECT lake.seal()');
is($node->safe_psql('postgres', "SELECT count(*) FROM lake.trajectory('oc')"),
	$landed, 'every cast that landed was answered with its receipt, or its error named it');
unlike(slurp_file($node->logfile), qr/terminated by signal/, 'no server process crashed');
is($node->safe_psql('postgres', 'SELECT slots_in_use, bytes_reserved FROM lake.admission()'),
	'0|0', 'no admission permit is left held');
$node->stop;
done_testing();
