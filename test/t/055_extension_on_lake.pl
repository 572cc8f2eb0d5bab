# An extension built on lake: its install script calls lake's functions.
# lake skips its check of its tables' shape only while its own install
# script runs (some tables are not made yet), not while any extension's
# does: creating_extension is true in every extension's script, and a
# check skipped there let a call write into a table that is no longer the
# one lake made (an unlogged one loses its rows in a crash). The client
# extension has to be installed where the server finds control files; the
# suites' OS user cannot write the server's share directory, so the test
# runs the server from an installation of its own: its binaries copied,
# lake's and PostgreSQL's libraries and share files linked, the client's
# files added.
use strict;
use warnings;

use File::Basename qw(dirname);
use File::Copy qw(copy);
use File::Path qw(make_path);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

sub pg_config { my $v = `pg_config --$_[0]`; chomp $v; return $v; }

# The layout PostgreSQL finds its share directory in: the same path from
# the binaries to it as in the installation the suite runs.
my ($bindir, $pkglibdir, $sharedir) = map { pg_config($_) } qw(bindir pkglibdir sharedir);
my $inst = PostgreSQL::Test::Utils::tempdir('ext_on_lake');
my $prefix = $bindir;
until (index($sharedir, "$prefix/") == 0 && index($pkglibdir, "$prefix/") == 0)
{
	die "no directory holds $bindir, $pkglibdir and $sharedir" if $prefix eq dirname($prefix);
	$prefix = dirname($prefix);
}
my ($my_bin, $my_lib, $my_share) = map { $inst . substr($_, length $prefix) } ($bindir, $pkglibdir, $sharedir);
make_path($my_bin, dirname($my_lib), "$my_share/extension");
# Copied, not linked: a server finds its share directory from where its
# binary really is.
for my $f (glob "$bindir/*")
{
	copy($f, "$my_bin/") or die "copy $f: $!";
	chmod 0755, "$my_bin/" . substr($f, length($bindir) + 1);
}
symlink($pkglibdir, $my_lib) or die "link $my_lib: $!";
for my $f (glob "$sharedir/*")
{
	next if $f eq "$sharedir/extension";
	symlink($f, $my_share . substr($f, length $sharedir)) or die "link $f: $!";
}
symlink($_, "$my_share/extension/" . substr($_, length("$sharedir/extension/")))
  for glob "$sharedir/extension/*";

# The client: its script creates a dataset, appends and reads back.
PostgreSQL::Test::Utils::append_to_file("$my_share/extension/lake_client.control", q{
comment = 'lake test: an extension whose install script calls lake'
default_version = '1'
requires = 'lake'
schema = lake_client
relocatable = false
});
PostgreSQL::Test::Utils::append_to_file("$my_share/extension/lake_client--1.sql", q{
DO $$BEGIN
    PERFORM lake.create_dataset('client_ds');
EXCEPTION WHEN duplicate_object THEN
    NULL;    -- made by an earlier installation of the client
END$$;
CREATE TABLE lake_client.made (version bigint, payload bytea);
INSERT INTO lake_client.made
  SELECT v, lake.read('client_ds', v)
  FROM lake.append('client_ds', 'default', 'client-op', '\x0102'::bytea) AS v;
});

my $node = lake_node('ext_on_lake', install_path => dirname($my_bin));
$node->start;
is($node->safe_psql('postgres', "SELECT setting FROM pg_config() WHERE name = 'SHAREDIR'"),
	$my_share, 'the server runs from the test\'s own installation');

# CASCADE: lake's script first, then the client's in the same command;
# the client's calls are checked, on tables that are as lake made them.
$node->safe_psql('postgres', 'CREATE EXTENSION lake_client CASCADE');
is($node->safe_psql('postgres', 'SELECT version, payload FROM lake_client.made'),
	'1|\x0102', 'an extension\'s install script appends to lake and reads it back');
$node->safe_psql('postgres', 'DROP EXTENSION lake_client');

# A table of lake's made unlogged: lake refuses it in the client's script
# as in any call, and the client's creation leaves nothing.
$node->safe_psql('postgres', 'ALTER TABLE lake_data.version SET UNLOGGED');
my ($code, $msg) = sql_error($node, 'CREATE EXTENSION lake_client');
is($code, 'XX001', 'an extension\'s install script gets lake\'s refusal of an unlogged table');
like($msg, qr/not the table lake made/, 'and its message');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_extension WHERE extname = 'lake_client'"),
	'0', 'the client is not created');

# Set logged again: nothing was appended, and the client installs.
$node->safe_psql('postgres', 'ALTER TABLE lake_data.version SET LOGGED');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM lake.versions('client_ds')"),
	'1', 'the refused script appended nothing');
$node->safe_psql('postgres', 'CREATE EXTENSION lake_client');
is($node->safe_psql('postgres', 'SELECT version, payload FROM lake_client.made'),
	'1|\x0102', 'with the table logged again, the client\'s replay answers the version it made');

$node->stop;
done_testing();
