# Identity sequences stay unique across crashes when the install ran at
# wal_level = minimal. CREATE EXTENSION inserts the built-in lifecycle in the
# transaction that creates lake_data.lifecycle's sequence; at wal_level =
# minimal that nextval is not WAL-logged, so the page flushed at commit
# claimed 32 values already logged that no WAL record covered. Every later
# nextval then returned the next of those without logging, and after each
# crash the same id came back: the second lifecycle defined after a crash
# failed with a duplicate key on lifecycle_pkey.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('install_crash');
$node->start;
is($node->safe_psql('postgres', 'SHOW wal_level'), 'minimal', 'the install runs at wal_level = minimal');
$node->safe_psql('postgres', 'CREATE EXTENSION lake');

my $edges = q{ARRAY[['a','b'],['b','a']]};
for my $n (1 .. 3)
{
	my ($state, $msg) = sql_error($node,
		"SELECT lake.define_lifecycle('after_crash_$n', 'a', $edges)");
	is($state, '', "lifecycle $n, defined after " . ($n - 1) . " crash(es) since the install")
	  or diag $msg;
	$node->stop('immediate');
	$node->start;
}
is( $node->safe_psql('postgres',
		"SELECT count(DISTINCT id) FROM lake_data.lifecycle"),
	'4', 'the built-in lifecycle and the three new ones have distinct ids');

$node->stop;
done_testing();
