# LakeTAP.pm — small helpers shared by lake's TAP tests (test/t/*.pl).
#
# Every node that loads lake is made here, so all tests configure it the
# same way; errors are asserted by their SQLSTATE, read from psql's verbose
# error output.
package LakeTAP;

use strict;
use warnings;

use Exporter 'import';
use PostgreSQL::Test::Cluster;
use Time::HiRes qw(usleep);

our @EXPORT = qw(lake_node sql_error wait_until);

# lake_node(name, init => {...}, conf => "lines", preload => 1)
#
# A new, initialised (not started) node. By default it preloads lake and
# serves database postgres; 'conf' lines are appended after that.
sub lake_node
{
	my ($name, %opt) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);

	$node->init(%{ $opt{init} // {} });
	my $preload = $opt{preload} // 1;
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'lake'\nlake.database = 'postgres'")
	  if $preload;
	$node->append_conf('postgresql.conf', $opt{conf}) if defined $opt{conf};
	return $node;
}

# sql_error(node, sql [, db]) -> (sqlstate, message)
#
# Runs sql in a fresh session and returns the SQLSTATE and message of the
# first error it raised, or ('', '') when it raised none.
sub sql_error
{
	my ($node, $sql, $db) = @_;
	my ($ret, $out, $err) = $node->psql($db // 'postgres',
		"\\set VERBOSITY verbose\n$sql", on_error_stop => 1);

	# psql prefixes script errors with "psql:<stdin>:N: ".
	return ($1, $2)
	  if $err =~ /^(?:psql:\S+ )?(?:ERROR|FATAL):\s+([0-9A-Z]{5}):\s+(.*)$/m;
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

1;
