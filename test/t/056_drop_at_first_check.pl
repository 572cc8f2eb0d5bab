# A DROP EXTENSION that commits while a call of a new session is under
# way: at its first check of lake's tables, which opens each table by the
# OID the call looked up just before, and where it prepares its first
# statement. The relcache must not build an entry for a relation no lock
# protects (PostgreSQL's own XX000s and WARNINGs, "catalog is missing
# attributes", come from that), and a table gone by then is the DROP's:
# 55000, as everywhere else, not an internal error or the parser's 42P01.
# gdb holds the call.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('drop_at_first_check');
$node->start;

# held_call(function, what) -> (session, pid, gdb): lake installed afresh,
# and a new session's versions() call held by gdb at 'function'.
sub held_call
{
	my ($function, $what) = @_;
	$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_dataset('ds');
});
	my @held = held_session($node, $function,
		qq{\\set VERBOSITY verbose\nSELECT count(*) FROM lake.versions('ds');});
	ok(gdb_stopped($held[2]), "a new call is held $what") or diag("gdb: $held[2]->{out}");
	return @held;
}

# refused(session, regexp, name): the held call, let go, ends with it.
sub refused
{
	my ($s, $error, $name) = @_;
	$s->query_until(qr/done/, '');
	like($s->{stderr}, $error, $name);
	unlike($s->{stderr}, qr/XX000|vanished|WARNING/, "$name, not an internal error or a warning");
	$s->quit;
}

# The held call holds no lock the DROP waits for.
my ($s, $pid, $g) = held_call('check_shape_table', 'at its first table check');
$node->safe_psql('postgres', 'DROP EXTENSION lake');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_extension WHERE extname = 'lake'"),
	'0', 'the DROP committed while the call was held');
gdb_let_go($g);
refused($s, qr/ERROR:  55000: extension "lake" was dropped while this call ran/,
	'a DROP in the middle of the check is 55000');

# The table it named gone, and another installation in its place: 55000,
# as a call that resolves a name of the new installation is refused.
($s, $pid, $g) = held_call('check_shape_table', 'at its first table check again');
$node->safe_psql('postgres', 'DROP EXTENSION lake; CREATE EXTENSION lake');
gdb_let_go($g);
refused($s, qr/ERROR:  55000: extension "lake" was dropped and created again while this call ran/,
	'a DROP and CREATE in the middle of the check is 55000');
$node->safe_psql('postgres', 'DROP EXTENSION lake');

# Held inside the relcache look-up of the first table: the call holds
# that table's lock by then, so a DROP waits for the check instead of
# deleting the catalog rows the look-up reads.
($s, $pid, $g) = held_call('check_shape_table', 'at its first table check, a third time');
ok(gdb($g, "break RelationIdGetRelation\ncontinue\n", qr/Breakpoint 2,/),
	'and then in its look-up of the table') or diag("gdb: $g->{out}");
my $drop = background($node, 'DROP EXTENSION lake');
ok($node->poll_query_until('postgres', qq{
SELECT count(*) = 1 FROM pg_locks l JOIN pg_stat_activity a USING (pid)
WHERE a.query = 'DROP EXTENSION lake' AND NOT l.granted AND l.locktype = 'relation'
  AND l.relation IN (SELECT relation FROM pg_locks WHERE pid = $pid AND granted)}),
	'the DROP waits for the lock the check holds');
gdb_let_go($g);
ok(defined wait_until(60, sub { finished($drop) }), 'the DROP ends once the check let go');
is($drop->{err}, '', 'and commits');
refused($s, qr/ERROR:  55000: /, 'the call the DROP came in the middle of is 55000');

# Held where it prepares its first statement, after its checks: the
# parser no longer finds lake's table (42P01 before), the DROP's 55000.
($s, $pid, $g) = held_call('SPI_prepare_cursor', 'where it prepares a statement');
$node->safe_psql('postgres', 'DROP EXTENSION lake');
gdb_let_go($g);
refused($s, qr/ERROR:  55000: extension "lake" was dropped while this call ran/,
	'a statement prepared after the DROP is 55000');

# Installed again, a new session's first check passes.
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_dataset('ds');
});
is($node->safe_psql('postgres', q{SELECT lake.append('ds', 'default', 'op', '\x01')}),
	'1', 'a new installation serves');

$node->stop;
done_testing();
