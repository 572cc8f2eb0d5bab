# A DROP EXTENSION that commits while a call checks lake's tables for the
# first time in its session. The check opens each table by the OID the
# call looked up just before; the relcache must not build an entry for a
# relation no lock protects (PostgreSQL's own XX000s and WARNINGs, "catalog
# is missing attributes", come from that), and a table gone by then is the
# DROP's: 55000 "dropped while this call ran", as everywhere else, not an
# internal error. gdb holds the call where it is about to open the first
# table.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('drop_at_first_check');
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_dataset('ds');
});

# A new session: its first call checks every table of lake's.
my ($s, $pid, $g) = held_session($node, 'check_shape_table',
	qq{\\set VERBOSITY verbose\nSELECT count(*) FROM lake.versions('ds');});
ok(gdb_stopped($g), 'the call is held at its first table check') or diag("gdb: $g->{out}");

# The held call holds no lock the DROP waits for.
$node->safe_psql('postgres', 'DROP EXTENSION lake');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_extension WHERE extname = 'lake'"),
	'0', 'the DROP committed while the call was held');

gdb_let_go($g);
$s->query_until(qr/done/, '');
like($s->{stderr}, qr/ERROR:  55000: extension "lake" was dropped while this call ran/,
	'the call is refused with 55000');
unlike($s->{stderr}, qr/XX000|vanished|WARNING/, 'not with an internal error or a warning');
$s->quit;

# Installed again; the held call's first check finds the table it named
# gone, and another installation in its place: 55000, as a call that
# resolves a name of the new installation is refused.
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_dataset('ds');
});
($s, $pid, $g) = held_session($node, 'check_shape_table',
	qq{\\set VERBOSITY verbose\nSELECT count(*) FROM lake.versions('ds');});
ok(gdb_stopped($g), 'a new call is held at its first table check again') or diag("gdb: $g->{out}");
$node->safe_psql('postgres', 'DROP EXTENSION lake; CREATE EXTENSION lake');
gdb_let_go($g);
$s->query_until(qr/done/, '');
like($s->{stderr},
	qr/ERROR:  55000: extension "lake" was dropped and created again while this call ran/,
	'a DROP and CREATE in the middle of the check is 55000');
$s->quit;
$node->safe_psql('postgres', 'DROP EXTENSION lake');

# Installed again. A new session's first check, held inside the relcache
# look-up of the first table: the call holds that table's lock by then,
# so a DROP EXTENSION waits for the check instead of deleting the catalog
# rows the look-up reads.
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_dataset('ds');
});
($s, $pid, $g) = held_session($node, 'check_shape_table',
	qq{\\set VERBOSITY verbose\nSELECT count(*) FROM lake.versions('ds');});
ok(gdb_stopped($g), 'a new call is held at its first table check') or diag("gdb: $g->{out}");
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
$s->query_until(qr/done/, '');
like($s->{stderr}, qr/ERROR:  55000: /, 'the call is refused as one the DROP came in the middle of');
unlike($s->{stderr}, qr/XX000|vanished|WARNING/, 'not with an internal error or a warning');
$s->quit;

# Installed again. A new session's call held where it prepares its first
# statement, after its checks: the DROP commits meanwhile, and the parser
# no longer finds lake's table (42P01 before): the DROP's 55000 instead.
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_dataset('ds');
});
($s, $pid, $g) = held_session($node, 'SPI_prepare_cursor',
	qq{\\set VERBOSITY verbose\nSELECT count(*) FROM lake.versions('ds');});
ok(gdb_stopped($g), 'a new call is held where it prepares a statement') or diag("gdb: $g->{out}");
$node->safe_psql('postgres', 'DROP EXTENSION lake');
gdb_let_go($g);
$s->query_until(qr/done/, '');
like($s->{stderr}, qr/ERROR:  55000: extension "lake" was dropped while this call ran/,
	'the statement prepared after the DROP is refused with 55000');
$s->quit;

# Installed again, a new session's first check passes.
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_dataset('ds');
});
is($node->safe_psql('postgres', q{SELECT lake.append('ds', 'default', 'op', '\x01')}),
	'1', 'a new installation serves');

$node->stop;
done_testing();
