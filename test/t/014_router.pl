# lake over four partitions behind a PL/Proxy router (SPEC §7, issue 13).
# One router (plproxy + lake_router) and four lake partitions, the cluster
# as the SQL/MED server "lake".
# - Every function through the router gives the result and SQLSTATE of the
#   same call made directly on the partition owning the key; keys are
#   spread so that every partition gets some; stage ids and receipts route
#   by themselves; cluster-wide functions reach every partition and may be
#   retried; the readers name the partition of each row.
# - Idempotency: 8 concurrent router sessions append one operation and cast
#   one operation id: one version, one landing; a staged upload begun and
#   chunked in one router session is resumed and committed from another.
# - Tenant isolation: a role with only its grant reaches only its tenant,
#   on every partition.
# - Faults: 8 clients append and cast durably (retrying by operation id)
#   while one partition's postmaster is killed with SIGKILL and restarted:
#   the other partitions keep serving, the dead one fails with a clear
#   error and serves again after its restart; every acknowledged version
#   and coordinate is present exactly once, positions gap-free, and
#   lake.recover() applies nothing on any partition.
# - Promotion: a partition with a streaming standby is stopped, the standby
#   promoted and the router repointed with ALTER SERVER: the acknowledged
#   data is there and casts resume under a new epoch of that partition.
# - A partition number outside lake.partitions refuses the server start.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $N = 4;
my @part;
for my $i (0 .. $N - 1)
{
	my $node = lake_node(
		"part$i",
		# wal_level = replica, as a partition with a standby runs (under
		# minimal, the identity sequence of lake_data.lifecycle, first used in
		# CREATE EXTENSION's own transaction, repeats a value after a crash).
		init => { allows_streaming => 1 },
		conf => "lake.partitions = $N\nlake.partition = $i\n");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION lake');
	push @part, $node;
}

my $router = PostgreSQL::Test::Cluster->new('router');
$router->init;
$router->start;

sub part_connstr
{
	my ($node) = @_;
	# The README's settings: keepalives end a call whose partition host died,
	# and timestamps come back in ISO whatever the partition's DateStyle.
	return 'host=' . $node->host . ' port=' . $node->port . ' dbname=postgres'
	  . ' options=-cdatestyle=ISO'
	  . ' keepalives_idle=10 keepalives_interval=5 keepalives_count=3';
}
# A schema "lake" another role owns, or may create in, is refused.
$router->safe_psql('postgres',
	'CREATE EXTENSION plproxy; CREATE ROLE squatter; CREATE SCHEMA lake AUTHORIZATION squatter');
is(answer($router, 'CREATE EXTENSION lake_router'), 'ERROR 42501',
	'lake_router refuses to install into a schema "lake" another role owns');
$router->safe_psql('postgres', 'ALTER SCHEMA lake OWNER TO CURRENT_USER; GRANT CREATE ON SCHEMA lake TO squatter');
is(answer($router, 'CREATE EXTENSION lake_router'), 'ERROR 42501',
	'nor into one another role may create in');
$router->safe_psql('postgres', 'REVOKE CREATE ON SCHEMA lake FROM squatter; '
	  . 'CREATE FUNCTION lake.read(text, int) RETURNS bytea LANGUAGE sql AS $$ SELECT NULL::bytea $$; '
	  . 'ALTER FUNCTION lake.read(text, int) OWNER TO squatter');
is(answer($router, 'CREATE EXTENSION lake_router'), 'ERROR 42501',
	'nor into one holding another role\'s function');
$router->safe_psql('postgres', 'DROP FUNCTION lake.read(text, int); '
	  . 'CREATE TYPE lake.planted AS (a int); ALTER TYPE lake.planted OWNER TO squatter');
is(answer($router, 'CREATE EXTENSION lake_router'), 'ERROR 42501',
	'nor into one holding another role\'s type');
$router->safe_psql('postgres', 'DROP TYPE lake.planted; '
	  . 'CREATE SEQUENCE lake.planted_seq; ALTER SEQUENCE lake.planted_seq OWNER TO squatter');
is(answer($router, 'CREATE EXTENSION lake_router'), 'ERROR 42501',
	'nor into one holding another role\'s relation');
# An operator would shadow one of pg_catalog's for a caller whose
# search_path puts lake first.
$router->safe_psql('postgres', 'DROP SEQUENCE lake.planted_seq; '
	  . 'CREATE FUNCTION public.planted_cat(bytea, text) RETURNS bytea LANGUAGE sql AS $$ SELECT $1 $$; '
	  . 'CREATE OPERATOR lake.|| (LEFTARG = bytea, RIGHTARG = text, FUNCTION = public.planted_cat); '
	  . 'ALTER OPERATOR lake.|| (bytea, text) OWNER TO squatter');
is(answer($router, 'CREATE EXTENSION lake_router'), 'ERROR 42501',
	'nor into one holding another role\'s operator');
$router->safe_psql('postgres', 'DROP SCHEMA lake CASCADE; DROP FUNCTION public.planted_cat(bytea, text)');
# The installing role's default privileges reach what the script creates:
# nobody else may create in lake_router, and the interface stays PUBLIC's.
$router->safe_psql('postgres', 'ALTER DEFAULT PRIVILEGES GRANT CREATE ON SCHEMAS TO squatter; '
	  . 'ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC; '
	  . 'ALTER DEFAULT PRIVILEGES REVOKE USAGE ON TYPES FROM PUBLIC; '
	  . 'CREATE SCHEMA lake; REVOKE CREATE ON SCHEMA lake FROM squatter; CREATE EXTENSION lake_router');
is( $router->safe_psql('postgres',
		"SELECT has_schema_privilege('squatter', 'lake_router', 'CREATE'), "
		  . "bool_and(has_function_privilege('squatter', p.oid, 'EXECUTE')), "
		  . "has_type_privilege('squatter', 'lake.coordinate', 'USAGE') "
		  . "FROM pg_proc p WHERE p.pronamespace IN ('lake'::regnamespace, 'lake_router'::regnamespace) "
		  . "AND p.prorettype <> 'event_trigger'::regtype AND p.oid <> 'lake_router.keep_partitions()'::regprocedure"),
	'f|t|t', 'default privileges: no CREATE in lake_router for others, the interface open to all');
is($router->safe_psql('postgres', "SELECT has_function_privilege('squatter', 'lake_router.keep_partitions()', 'EXECUTE')"),
	'f', 'but not the definer function that keeps the partition count');
$router->safe_psql('postgres', 'DROP EXTENSION lake_router; DROP SCHEMA lake; '
	  . 'ALTER DEFAULT PRIVILEGES REVOKE CREATE ON SCHEMAS FROM squatter; '
	  . 'ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO PUBLIC; '
	  . 'ALTER DEFAULT PRIVILEGES GRANT USAGE ON TYPES TO PUBLIC; DROP ROLE squatter');
$router->safe_psql(
	'postgres', qq{
CREATE EXTENSION lake_router;
CREATE SERVER lake FOREIGN DATA WRAPPER plproxy OPTIONS (@{[
	join(', ', map { "p$_ '" . part_connstr($part[$_]) . "'" } 0 .. $N - 1) ]});
CREATE USER MAPPING FOR PUBLIC SERVER lake;
});
for my $p (@part)
{
	$p->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()")
	  or die 'lake worker not serving';
}
is( $router->safe_psql('postgres', 'SELECT partition, lake_partition, lake_partitions, ok, error IS NULL FROM lake_router.check()'),
	join("\n", map { "$_|$_|$N|t|t" } 0 .. $N - 1),
	'lake_router.check(): every partition is the one its place in server "lake" names');
# PL/Proxy also takes partition_<N> for p<N>: the router counts both.
is( $router->safe_psql('postgres', qq{
BEGIN;
ALTER SERVER lake OPTIONS (DROP p0, ADD partition_0 '@{[ part_connstr($part[0]) ]}');
SELECT lake_router.partitions();
ROLLBACK;}),
	$N, 'lake_router.partitions() counts partitions named partition_<N>');
# The partition count is the cluster's: server "lake" naming twice or
# half as many partitions is refused (half the names would be routed to
# partitions that do not have them, and created there again).
{
	is($router->safe_psql('postgres', 'SELECT partitions FROM lake_router.cluster'),
		$N, 'the cluster\'s partition count is kept from server "lake"');
	my $more = join(', ', map { "ADD p$_ '" . part_connstr($part[ $_ % $N ]) . "'" } $N .. 2 * $N - 1);
	my ($state, $msg) = call($router, "ALTER SERVER lake OPTIONS ($more)");
	is("$state $msg", "ERROR 55000 server \"lake\" would name @{[ 2 * $N ]} partitions, but the cluster has $N",
		'server "lake" naming twice the partitions is refused');
	my $fewer = join(', ', map { "DROP p$_" } $N / 2 .. $N - 1);
	($state, $msg) = call($router, "ALTER SERVER lake OPTIONS ($fewer)");
	is($state, 'ERROR 55000', 'and half as many');
	is($router->safe_psql('postgres', 'SELECT lake_router.partitions()'), $N, 'server "lake" is as it was');
	# A router pointed at a new cluster of another count: the kept count
	# goes first, by its owner.
	is($router->safe_psql('postgres', qq{
BEGIN;
DELETE FROM lake_router.cluster;
ALTER SERVER lake OPTIONS ($fewer);
SELECT partitions FROM lake_router.cluster;
ROLLBACK;}), $N / 2, 'once the kept count is removed, the next server "lake" sets it');
	# Dropped and made again with another count: refused too.
	my $half = join(', ', map { "p$_ '" . part_connstr($part[$_]) . "'" } 0 .. $N / 2 - 1);
	($state, $msg) = call($router, "BEGIN; DROP SERVER lake CASCADE; "
		  . "CREATE SERVER lake FOREIGN DATA WRAPPER plproxy OPTIONS ($half); COMMIT");
	is($state, 'ERROR 55000', 'server "lake" dropped and made again with half the partitions is refused');
	# A dump of the router restores (the kept count is not dumped while
	# server "lake" names partitions: its CREATE SERVER puts it back).
	my $dump = $router->basedir . '/router.sql';
	$router->command_ok([ 'pg_dump', '-d', $router->connstr('postgres'), '-f', $dump ], 'the router database dumps');
	$router->safe_psql('postgres', 'CREATE DATABASE router_copy');
	$router->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $router->connstr('router_copy'), '-f', $dump ],
		'and restores into another database');
	is($router->safe_psql('router_copy', 'SELECT partitions, lake_router.partitions() FROM lake_router.cluster'),
		"$N|$N", 'with its partition count kept');
	$router->safe_psql('postgres', 'DROP DATABASE router_copy');
}
# SPEC §7: datasets and owners go by hashtext(name): its low bits, the
# sign bit cleared (so that PL/Proxy's modular_mapping routes alike).
is( $router->safe_psql('postgres',
		"SELECT bool_and(lake_router.key_partition(k) & 1023 = hashtext(k) & 1023 AND lake_router.key_partition(k) >= 0), "
		  . "bool_or(hashtext(k) < 0) "
		  . "FROM (VALUES ('a'), ('ds'), ('owner-7'), (''), ('own-1'), ('own-2'), ('own-3')) v(k)"),
	't|t', 'names are routed by the low bits of hashtext, negative ones too');

# call(node, sql) -> its output, or "ERROR <sqlstate>", and the message.
sub call
{
	my ($node, $sql) = @_;
	my ($rc, $out, $err) =
	  $node->psql('postgres', "\\set VERBOSITY verbose\n$sql", on_error_stop => 1);
	return ("ERROR $1", $2) if $err =~ /^(?:psql:\S+ )?ERROR:\s+([0-9A-Z]{5}):\s+(.*)$/m;
	return ($out, '');
}

# answer(node, sql) -> call's first result alone (for is()).
sub answer
{
	my ($r) = call(@_);
	return $r;
}

# The partition owning a dataset or owner name, as the router computes it.
my %key_part;
sub key_part
{
	my ($key) = @_;
	return $key_part{$key} //=
	  $router->safe_psql('postgres', "SELECT lake_router.key_partition('$key') & " . ($N - 1));
}

# Two names per partition.
sub spread
{
	my ($prefix) = @_;
	my (%by, @names);
	for my $line (
		split /\n/,
		$router->safe_psql(
			'postgres',
			"SELECT n, hashtext(n) & @{[ $N - 1 ]} FROM (SELECT '$prefix' || i AS n FROM generate_series(1, 64) i) s"))
	{
		my ($n, $p) = split /\|/, $line;
		push @{ $by{$p} }, $n if @{ $by{$p} // [] } < 2;
	}
	push @names, @{ $by{$_} } for 0 .. $N - 1;
	return @names;
}

# ----------------------------------------------------------------------
# Same result and SQLSTATE through the router as directly
# ----------------------------------------------------------------------
my @ds     = spread('ds-');
my @owners = spread('own-');

# same(partition, description, router sql [, direct sql]): the router's
# answer is the partition's; an error has the same SQLSTATE and the
# partition's message after PL/Proxy's prefix.
sub same
{
	my ($p, $what, $sql, $direct) = @_;
	my ($r, $rmsg) = call($router, $sql);
	my ($d, $dmsg) = call($part[$p], $direct // $sql);
	is($r, $d, "router = partition $p: $what ($r)");
	like($rmsg, qr/\Q$dmsg\E$/, "router error carries the partition's message: $what") if $dmsg ne '';
	return $r;
}

# Mutations through the router, then the same call directly: a replay (or
# the same refusal).
# Every name is created; the calls are compared on one name per partition.
for my $i (0 .. $#ds)
{
	my $d = $ds[$i];
	my $p = key_part($d);
	my ($out) = call($router, "SELECT lake.create_dataset('$d')");
	is($out, '', "create_dataset('$d') through the router");
	next if $i % 2;
	same($p, "create_dataset('$d') again", "SELECT lake.create_dataset('$d')");
	same($p, "append to $d", "SELECT lake.append('$d', 't', 'op-1', convert_to('one $d', 'UTF8'))");
	same($p, "append replay to $d", "SELECT lake.append('$d', 't', 'op-1', convert_to('one $d', 'UTF8'))");
	same($p, "append conflict on $d", "SELECT lake.append('$d', 't', 'op-1', convert_to('other', 'UTF8'))");
	same($p, "append with a wrong digest to $d",
		"SELECT lake.append('$d', 't', 'op-2', 'x'::bytea, sha256('y'::bytea))");
	same($p, "append with its digest to $d",
		"SELECT lake.append('$d', 't', 'op-2', 'x'::bytea, sha256('x'::bytea))");
	same($p, "read $d 1",          "SELECT convert_from(lake.read('$d', 1), 'UTF8')");
	same($p, "read $d 99",         "SELECT lake.read('$d', 99)");
	same($p, "read_operation $d",  "SELECT convert_from(lake.read_operation('$d', 't', 'op-1'), 'UTF8')");
	same($p, "read_operation $d unknown", "SELECT lake.read_operation('$d', 't', 'nope')");
	same($p, "versions $d",   "SELECT version, tenant, operation_id, digest, bytes, stored_bytes, committed_at FROM lake.versions('$d')");
	same($p, "versions $d 1", "SELECT * FROM lake.versions('$d', 1)");
	same($p, "train_dictionary $d (too few payloads)", "SELECT lake.train_dictionary('$d')");

	# A staged upload: the stage id is the partition's, routes by itself.
	my ($stage) = call($router, "SELECT lake.begin_append('$d', 't', 'staged')");
	is($stage % $N, $p, "stage $stage of $d is in partition ${p}'s residue class");
	same($p, "begin_append of an open stage on $d", "SELECT lake.begin_append('$d', 't', 'staged')");
	same($p, "append_chunk 0 of $stage", "SELECT lake.append_chunk($stage, 0, 'chunk zero')");
	same($p, "append_chunk 0 of $stage with other bytes", "SELECT lake.append_chunk($stage, 0, 'other')");
	same($p, "append_chunk -1 of $stage", "SELECT lake.append_chunk($stage, -1, 'x')");
	call($router, "SELECT lake.append_chunk($stage, 2, 'two')");
	same($p, "commit_append of $stage with a hole", "SELECT lake.commit_append($stage)");
	call($router, "SELECT lake.append_chunk($stage, 1, 'one')");
	same($p, "commit_append of $stage", "SELECT lake.commit_append($stage)");
	same($p, "commit_append of $stage again", "SELECT lake.commit_append($stage)");
	my ($gone) = call($router, "SELECT lake.begin_append('$d', 't', 'aborted')");
	is(answer($router, "SELECT lake.abort_append($gone)"), '', "abort_append($gone) through the router");
	same($p, "abort_append of aborted stage $gone", "SELECT lake.abort_append($gone)");
	same($p, "append_chunk to aborted stage $gone", "SELECT lake.append_chunk($gone, 0, 'x')");
}
same(0, 'create_dataset(NULL)', 'SELECT lake.create_dataset(NULL)');
same(key_part(''), "create_dataset('')", "SELECT lake.create_dataset('')");
same(0, 'append_chunk(NULL, ...)', "SELECT lake.append_chunk(NULL, 0, 'x')");
same(0, 'commit_append(NULL)',     'SELECT lake.commit_append(NULL)');
same(key_part('nope'), 'append to an unknown dataset', "SELECT lake.append('nope', 't', 'o', 'x')");
same(key_part('nope'), 'versions of an unknown dataset', "SELECT * FROM lake.versions('nope')");

# Set-returning calls in a SELECT list, with other routed calls between
# their rows: PL/Proxy keeps one result per cluster, which the second call
# took over (rows lost, or another call's rows given out as this one's).
{
	my ($a, $b) = ($ds[0], $ds[2]);
	is( answer($router,
			"SELECT string_agg(encode(x, 'hex') || '/' || encode(y, 'hex'), ',') FROM "
			  . "(SELECT (lake.versions('$a')).digest AS x, (lake.versions('$b')).digest AS y) s"),
		answer($router,
			"SELECT string_agg(encode(a.digest, 'hex') || '/' || encode(b.digest, 'hex'), ',' ORDER BY a.version) "
			  . "FROM lake.versions('$a') a JOIN lake.versions('$b') b USING (version)"),
		'two routed versions() in one SELECT list each give their own rows');
	is( answer($router,
			"SELECT count(*) FROM (SELECT lake.versions('$a') v) s WHERE lake.read('$a', (v).version) IS NOT NULL"),
		answer($router, "SELECT count(*) FROM lake.versions('$a')"),
		'a routed read between the rows of a routed versions() loses none of them');
}
same(1, 'append_chunk to an unknown stage 4001', "SELECT lake.append_chunk(4001, 0, 'x')");

# A call that reaches a partition not owning its name or handle (a router
# whose server "lake" names the partitions out of order) is refused there
# (55000), not served: a name would exist twice, a receipt be called lost.
{
	my $home  = key_part($ds[0]);
	my $wrong = $part[ ($home + 1) % $N ];
	is((call($wrong, "SELECT lake.create_dataset('$ds[0]')"))[0], 'ERROR 55000',
		'create_dataset on a partition the name does not hash to is refused');
	my ($elsewhere) = grep { key_part($_) != ($home + 1) % $N } @owners;
	is((call($wrong, "SELECT lake.create_owner('$elsewhere')"))[0], 'ERROR 55000',
		'create_owner too');
	is((call($part[2], "SELECT lake.append_chunk(4001, 0, 'x')"))[0], 'ERROR 55000',
		'a stage id of partition 1 on partition 2 is refused');
	is((call($part[0], "SELECT lake.await_durable('(5,1)')"))[0], 'ERROR 55000',
		'a receipt of partition 1 on partition 0 is refused');
	# A name that is not there because it is another partition's: 55000
	# too, not 42704 with a hint to create it (which would then be 55000).
	is((call($wrong, "SELECT lake.read('$ds[0]', 1)"))[0], 'ERROR 55000',
		'a read of a dataset of another partition is refused, not "does not exist"');
	is((call($wrong, "SELECT lake.owner_state('$elsewhere')"))[0], 'ERROR 55000',
		'so is an owner call for an owner of another partition');
	is((call($part[ key_part('nowhere-ds') ], "SELECT lake.read('nowhere-ds', 1)"))[0], 'ERROR 42704',
		'a name of this partition that is not there is 42704, as before');
}

# Lifecycles, on every partition.
is(answer($router, "SELECT lake.define_lifecycle('toggle', 'Off', '{{Off,On},{On,Off}}')"),
	'', 'define_lifecycle through the router');
same($_, "define_lifecycle again (partition $_)",
	"SELECT lake.define_lifecycle('toggle', 'Off', '{{Off,On},{On,Off}}')")
  for 0 .. $N - 1;
same(0, 'define_lifecycle with an unknown initial phase',
	"SELECT lake.define_lifecycle('bad', 'Nowhere', '{{Off,On}}')");
# A partition that has a lifecycle under another definition (as a router
# call that failed part-way, then a second definer, used to leave): a
# definition that differs is refused before anything is written, naming
# the partition; the partition's own definition completes the others.
$part[1]->safe_psql('postgres', "SELECT lake.define_lifecycle('split', 'A', '{{A,B},{B,A}}')");
{
	my ($state, $msg) = call($router, "SELECT lake.define_lifecycle('split', 'X', '{{X,Y}}')");
	is($state, 'ERROR 42710', 'a definition that differs from a partition\'s is refused (42710)');
	my (undef, undef, $err) = $router->psql('postgres', "SELECT lake.define_lifecycle('split', 'X', '{{X,Y}}')");
	like($err, qr/DETAIL:\s+Partition 1 defines it with another initial phase or other edges/,
		'naming the partition that differs');
	is( join(',', map { $_->safe_psql('postgres', "SELECT count(*) FROM lake_data.lifecycle WHERE name = 'split'") } @part),
		join(',', map { $_ == 1 ? 1 : 0 } 0 .. $N - 1), 'and nothing was written on the others');
}
is(answer($router, "SELECT lake.define_lifecycle('split', 'A', '{{A,B},{B,A}}')"), '',
	'the partition\'s own definition is defined on the others');
is( join(',', map { $_->safe_psql('postgres',
	"SELECT initial_phase || ':' || edges::text FROM lake.lifecycle_definition('split')") } @part),
	join(',', ('A:{{A,B},{B,A}}') x $N), 'every partition now has that one');
is(answer($router, "SELECT lake.define_lifecycle('split', 'A', '{{A,B},{B,A}}')"), 'ERROR 42710',
	'and defining it once more is refused as lake refuses it');
# Phases are compared byte for byte, as lake compares them, whatever the
# collation of the caller's argument: one that takes 'a' for 'A' would
# otherwise leave the partitions with two initial phases under one name.
$router->safe_psql('postgres',
	"CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)");
$part[1]->safe_psql('postgres', "SELECT lake.define_lifecycle('cased', 'A', '{{A,a},{a,A}}')");
is(answer($router, "SELECT lake.define_lifecycle('cased', 'a' COLLATE ci, '{{A,a},{a,A}}')"), 'ERROR 42710',
	'an initial phase that differs only by case is another definition, in a case-blind collation too');
is( join(',', map { $_->safe_psql('postgres', "SELECT count(*) FROM lake_data.lifecycle WHERE name = 'cased'") } @part),
	join(',', map { $_ == 1 ? 1 : 0 } 0 .. $N - 1), 'and nothing was written on the others');
is( answer($router, "SELECT initial_phase || ':' || edges::text FROM lake.lifecycle_definition('split')"),
	'ERROR 42883', 'lifecycle_definition is not routed (no such function on the router)');
# Where a partition has the name, lake's own checks still answer first, in
# lake's order: malformed arguments, then the caller's right to define.
is(same(0, 'define_lifecycle of an existing name with an unknown initial phase',
		"SELECT lake.define_lifecycle('toggle', 'Nowhere', '{{Off,On}}')"),
	'ERROR 22023', 'as lake answers it (22023)');
is(same(0, 'define_lifecycle of an existing name with NULL edges',
		"SELECT lake.define_lifecycle('toggle', 'Off', NULL)"),
	'ERROR 22004', 'as lake answers it (22004)');
# Edges are the same definition whatever the array's lower bounds.
$part[1]->safe_psql('postgres', "SELECT lake.define_lifecycle('bounds', 'A', '[0:1][1:2]={{A,B},{B,A}}')");
is(answer($router, "SELECT lake.define_lifecycle('bounds', 'A', '{{A,B},{B,A}}')"), '',
	'a definition stored with other array bounds is the same one');

for my $i (0 .. $#owners)
{
	my $o = $owners[$i];
	my $p = key_part($o);
	my $lc = $i == 1 ? 'toggle' : 'kanban';
	is(answer($router, "SELECT lake.create_owner('$o', '$lc', 't')"), '', "create_owner('$o') through the router");
	next if $i % 2;
	same($p, "create_owner('$o') again", "SELECT lake.create_owner('$o', '$lc', 't')");
	my ($rcpt) = same($p, "cast $o with an operation id",
		"SELECT lake.cast('$o', 'Planning', 'CognitiveWork', 'p1', 0, 'c1')");
	my ($epoch) = $rcpt =~ /^\((\d+),/;
	is($epoch % $N, $p, "receipt $rcpt of $o: its epoch is in partition ${p}'s residue class");
	same($p, "await_durable $rcpt",                "SELECT * FROM lake.await_durable('$rcpt')");
	same($p, "await_durable $rcpt, timeout",        "SELECT * FROM lake.await_durable('$rcpt', 1000)");
	same($p, "await_durable of a receipt never issued", "SELECT * FROM lake.await_durable('($epoch,999999)')");
	same($p, "cast_durable $o", "SELECT * FROM lake.cast_durable('$o', 'CognitiveWork', 'Evaluation', 'p2', 0, 'c2')");
	same($p, "cast_durable replay on $o",
		"SELECT * FROM lake.cast_durable('$o', 'CognitiveWork', 'Evaluation', 'p2', 0, 'c2')");
	same($p, "cast_durable conflict on $o",
		"SELECT * FROM lake.cast_durable('$o', 'CognitiveWork', 'Evaluation', 'other', 0, 'c2')");
	same($p, "stale phase on $o (LK002)",   "SELECT lake.cast('$o', 'Planning', 'CognitiveWork')");
	same($p, "illegal move on $o (LK003)",  "SELECT lake.cast('$o', 'Evaluation', 'Planning')");
	same($p, "lap mismatch on $o (LK004)",  "SELECT lake.cast('$o', 'Evaluation', 'Commit', NULL, 7)");
	same($p, "no-step cast on $o", "SELECT (c).position FROM lake.cast_durable('$o', NULL, NULL, 'note', NULL, 'c3') c");
	same($p, "owner_state $o",    "SELECT * FROM lake.owner_state('$o')");
	same($p, "trajectory $o",     "SELECT * FROM lake.trajectory('$o')");
	same($p, "trajectory $o, 2",  "SELECT * FROM lake.trajectory('$o', 2)");
	same($p, "recover $o",        "SELECT * FROM lake.recover('$o')");
	same($p, "release_owner $o",  "SELECT lake.release_owner('$o')");
}
same(key_part('ghost'), 'cast to an unknown owner', "SELECT lake.cast('ghost', NULL, NULL)");
same(key_part('ghost'), 'owner_state of an unknown owner', "SELECT * FROM lake.owner_state('ghost')");
same(0, 'cast(NULL, ...)',            'SELECT lake.cast(NULL, NULL, NULL)');
same(0, 'await_durable(NULL)',        'SELECT lake.await_durable(NULL)');
same(0, "await_durable('(0,1)')",     "SELECT lake.await_durable('(0,1)')");
same(0, 'grant_tenant to an unknown role', "SELECT lake.grant_tenant('nobody', 't')");

# A wait that times out is NULL through the router too, not a row of NULLs.
{
	my $o = $owners[0];
	my $p = key_part($o);
	my $holder = $part[$p]->background_psql('postgres');
	$holder->query_safe('BEGIN; LOCK TABLE lake_data.cycle IN SHARE MODE;');
	my ($rcpt) = call($router, "SELECT lake.cast('$o', NULL, NULL, 'pending')");
	is( answer($router,
			"SELECT c IS NULL, c IS DISTINCT FROM NULL, coalesce(c::text, 'none') "
			  . "FROM (SELECT lake.await_durable('$rcpt', 200) AS c) s"),
		't|f|none', "await_durable of a pending receipt, timed out, is NULL through the router");
	same($p, "await_durable timed out, as text", "SELECT lake.await_durable('$rcpt', 200)::text");
	$holder->query_safe('ROLLBACK');
	$holder->quit;
	like(answer($router, "SELECT lake.await_durable('$rcpt', 60000)::text"), qr/^\(\d+,\d+,[0-9A-F]+\/[0-9A-F]+\)$/,
		'and its coordinate once sealed');
}

# PL/Proxy's modular_mapping (hash % N) routes as its default mapping does:
# names with a negative hashtext reach their own partition.
{
	my @neg = grep { $router->safe_psql('postgres', "SELECT hashtext('$_') < 0") eq 't' } @owners;
	ok(@neg > 0, 'some owners have a negative hashtext');
	$router->safe_psql('postgres', "ALTER SERVER lake OPTIONS (ADD modular_mapping '1')");
	same(key_part($_), "owner_state of $_ under modular_mapping", "SELECT * FROM lake.owner_state('$_')")
	  for @neg;
	$router->safe_psql('postgres', "ALTER SERVER lake OPTIONS (DROP modular_mapping)");
}

# Timestamps cross the router as text: a partition whose database answers
# in another DateStyle and time zone gives the same instants through the
# router (its connection string sets DateStyle ISO), and check() flags a
# connection without that option.
{
	my $d = $ds[0];
	my $p = key_part($d);
	$part[$p]->safe_psql('postgres',
		"ALTER DATABASE postgres SET DateStyle = 'SQL, DMY'; ALTER DATABASE postgres SET TimeZone = 'Asia/Kolkata'");
	like($part[$p]->safe_psql('postgres', "SELECT committed_at::text FROM lake.versions('$d') LIMIT 1"),
		qr{^\d\d/\d\d/\d{4} }, "partition $p answers in SQL, DMY on its own");
	same($p, "versions' committed_at of $d",
		"SELECT version, extract(epoch FROM committed_at) FROM lake.versions('$d')");
	same($p, "cycles' sealed_at", "SELECT cycle, extract(epoch FROM sealed_at) FROM lake.cycles() WHERE partition = $p",
		"SELECT cycle, extract(epoch FROM sealed_at) FROM lake.cycles()");
	is($router->safe_psql('postgres', "SELECT datestyle LIKE 'ISO%', ok FROM lake_router.check() WHERE partition = $p"),
		't|t', 'check(): its connection answers in ISO');
	(my $bare = part_connstr($part[$p])) =~ s/ options=\S+//;
	$router->safe_psql('postgres', "ALTER SERVER lake OPTIONS (SET p$p '$bare')");
	is($router->safe_psql('postgres', "SELECT datestyle, ok, error FROM lake_router.check() WHERE partition = $p"),
		"SQL, DMY|f|the connection answers in DateStyle SQL, DMY; add options=-cdatestyle=ISO to partition ${p}'s connection string",
		'check() flags a connection string without the DateStyle option, and says why');
	$router->safe_psql('postgres', "ALTER SERVER lake OPTIONS (SET p$p '@{[ part_connstr($part[$p]) ]}')");
	$part[$p]->safe_psql('postgres',
		'ALTER DATABASE postgres RESET DateStyle; ALTER DATABASE postgres RESET TimeZone');
}

# check() flags two partitions swapped in server "lake", and says why.
{
	$router->safe_psql('postgres', "ALTER SERVER lake OPTIONS (SET p0 '@{[ part_connstr($part[1]) ]}', "
		  . "SET p1 '@{[ part_connstr($part[0]) ]}')");
	is( $router->safe_psql('postgres',
			'SELECT partition, ok, error FROM lake_router.check() WHERE partition < 2 ORDER BY 1'),
		"0|f|the server is partition 1 of $N, not 0 of $N\n1|f|the server is partition 0 of $N, not 1 of $N",
		'check() flags swapped partitions, and says why');
	$router->safe_psql('postgres', "ALTER SERVER lake OPTIONS (SET p0 '@{[ part_connstr($part[0]) ]}', "
		  . "SET p1 '@{[ part_connstr($part[1]) ]}')");
}

# check() flags a pN naming a database without lake (lake refuses to be
# installed in any other than lake.database; a copy of that one is what
# serves_lake = false catches, 025_served_database.pl).
{
	$part[3]->safe_psql('postgres', 'CREATE DATABASE other');
	(my $other = part_connstr($part[3])) =~ s/dbname=postgres/dbname=other/;
	$router->safe_psql('postgres', "ALTER SERVER lake OPTIONS (SET p3 '$other')");
	is( $router->safe_psql('postgres',
			'SELECT ok, error IS NOT NULL, serves_lake FROM lake_router.check() WHERE partition = 3'),
		'f|t|', 'check() flags a partition whose database has no lake');
	$router->safe_psql('postgres', "ALTER SERVER lake OPTIONS (SET p3 '@{[ part_connstr($part[3]) ]}')");
	$part[3]->safe_psql('postgres', 'DROP DATABASE other');
	is($router->safe_psql('postgres', 'SELECT bool_and(ok) FROM lake_router.check()'),
		't', 'every partition ok again');
}

# Seen from the partitions: each holds exactly the datasets and owners whose
# names hash to it, and nothing created through the router went elsewhere.
for my $p (0 .. $N - 1)
{
	for my $t (['dataset', 'ds-', \@ds], ['owner', 'own-', \@owners])
	{
		my ($table, $prefix, $names) = @$t;
		is( $part[$p]->safe_psql('postgres',
				"SELECT string_agg(name, ',' ORDER BY name COLLATE \"C\") FROM lake_data.$table WHERE name LIKE '$prefix%'"),
			join(',', sort grep { key_part($_) == $p } @$names),
			"partition $p holds exactly the ${table}s routed to it");
	}
}
for my $p (0 .. $N - 1)
{
	is( $part[$p]->safe_psql('postgres', 'SELECT count(*) > 0 FROM lake_data.version'),
		't', "partition $p holds versions");
}

# Across partitions: recover() runs everywhere; the readers give every
# partition's rows, each with its partition.
my $all_recover = join("\n", sort map { split /\n/, $_->safe_psql('postgres', 'SELECT * FROM lake.recover()') } @part);
is(join("\n", sort split /\n/, $router->safe_psql('postgres', 'SELECT * FROM lake.recover()')),
	$all_recover, 'recover() through the router: every partition\'s rows');
my $rebuilt = 0;
$rebuilt += $_->safe_psql('postgres', 'SELECT lake.rebuild_owner_index()') for @part;
is($router->safe_psql('postgres', 'SELECT lake.rebuild_owner_index()'), $rebuilt,
	'rebuild_owner_index() through the router: the rows every partition wrote, summed');
for my $reader ('log()', 'log(2)', 'cycles()', 'cycles(1)')
{
	for my $p (0 .. $N - 1)
	{
		my $direct = $part[$p]->safe_psql('postgres', "SELECT * FROM lake.$reader ORDER BY 1, 2");
		my $routed = $router->safe_psql('postgres',
			"SELECT (r).* FROM (SELECT r FROM lake.$reader r WHERE partition = $p) s ORDER BY 1, 2");
		$routed =~ s/\|$p$//mg;
		isnt($direct, '', "partition $p has rows for lake.$reader") if $reader !~ /\(\d/;
		is($routed, $direct, "lake.$reader through the router: partition ${p}'s rows, named $p");
	}
}
is( $router->safe_psql('postgres',
		'SELECT string_agg(partition || ' . "':'" . ' || epoch, \',\' ORDER BY partition) FROM lake.stats()'),
	join(',', map { "$_:" . $part[$_]->safe_psql('postgres', 'SELECT epoch FROM lake.stats()') } 0 .. $N - 1),
	'lake.stats() through the router: one row per partition, with its epoch');
is( $router->safe_psql('postgres',
		'SELECT string_agg(partition || ' . "':'" . ' || max_concurrent, \',\' ORDER BY partition) FROM lake.admission()'),
	join(',', map { "$_:8" } 0 .. $N - 1),
	'lake.admission() through the router: one row per partition');
like($router->safe_psql('postgres', 'SELECT lake.checkpoint()'), qr/^\d+$/, 'checkpoint() through the router');
is( $router->safe_psql('postgres', 'SELECT count(*) FROM lake.stats() WHERE last_snapshot IS NOT NULL'),
	$N, 'and every partition took a snapshot');
# seal() runs on every partition and answers the highest cycle it sealed
# (NULL when nothing was pending anywhere, as lake answers): a cycle that is
# now the newest of its partition.
my $sealed = $router->safe_psql('postgres', 'SELECT lake.seal()');
my @newest = map { $_->safe_psql('postgres', 'SELECT coalesce(max(cycle), 0) FROM lake.cycles()') } @part;
ok($sealed eq '' || grep({ $_ == $sealed } @newest),
	"seal() through the router: '$sealed' is NULL or the newest cycle of a partition (@newest)");
# One cast left pending on one partition (its interval raised, so its worker
# leaves the cycle open): seal() through the router seals it, and answers
# that partition's new newest cycle.
my $pending_owner = $owners[0];
my $pending_part  = key_part($pending_owner);
sub set_interval
{
	my ($node, $interval) = @_;
	my $before = $node->safe_psql('postgres', 'SELECT config_reloads FROM lake.stats()');
	$node->safe_psql('postgres', "ALTER SYSTEM SET lake.cycle_interval = '$interval'");
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	$node->poll_query_until('postgres', 'SELECT config_reloads FROM lake.stats()', $before + 1)
	  or die 'the partition did not reload';
}
set_interval($part[$pending_part], '1h');
$router->safe_psql('postgres', "SELECT lake.cast('$pending_owner', NULL, NULL, 'pending')");
is($router->safe_psql('postgres', "SELECT pending FROM lake.owner_state('$pending_owner')"), '1',
	'a cast is pending on one partition');
$sealed = $router->safe_psql('postgres', 'SELECT lake.seal()');
is($sealed,
	$part[$pending_part]->safe_psql('postgres', 'SELECT max(cycle) FROM lake.cycles()'),
	'seal() through the router seals it: the answer is that partition\'s newest cycle');
set_interval($part[$pending_part], '10ms');

# What lake refuses inside a transaction block (25001), the router refuses
# too, before any partition is reached: each partition would commit it on
# its own, and the router's ROLLBACK would not undo it (before, a
# checkpoint rolled back on the router had snapshotted every partition).
my $snapshots = 'SELECT string_agg(last_snapshot::text, \',\' ORDER BY partition) FROM lake.stats()';
my $snapshots_before = $router->safe_psql('postgres', $snapshots);
for my $f ('seal()', 'checkpoint()', 'recover()', "release_owner('$owners[0]')", 'rebuild_owner_index()')
{
	my ($name) = $f =~ /^(\w+)/;
	my $sql = "BEGIN; SELECT lake.$f; ROLLBACK;";
	my ($r, $msg) = call($router, $sql);
	is($r, 'ERROR 25001', "lake.$f in a transaction block through the router: 25001");
	like($msg, qr/^lake\.$name\(\) cannot run inside a transaction block/, "lake.$f: lake's message");
	is(answer($part[key_part($owners[0])], $sql), $r, "lake.$f: as a partition refuses it");
}
is($router->safe_psql('postgres', $snapshots), $snapshots_before,
	'no partition took a snapshot for the refused checkpoint');
# Nor in a read-only transaction (25006), as a partition refuses them: they
# write (before, a router with default_transaction_read_only snapshotted
# every partition).
for my $f ('seal()', 'checkpoint()', 'recover()', "release_owner('$owners[0]')", 'rebuild_owner_index()')
{
	my $sql = "SET default_transaction_read_only = on; SELECT lake.$f;";
	is(answer($router, $sql), 'ERROR 25006', "lake.$f in a read-only transaction through the router: 25006");
	is(answer($part[key_part($owners[0])], $sql), 'ERROR 25006', "lake.$f: as a partition refuses it");
}
is($router->safe_psql('postgres', $snapshots), $snapshots_before,
	'no partition took a snapshot for the read-only checkpoint');

# Following the log: one cursor per partition (each numbers its own cycles).
# A durable cast on the partition whose cycle numbers are lowest is the one
# landing after every partition's cursor.
my @cursor = map { $_->safe_psql('postgres', 'SELECT coalesce(max(cycle), 0) FROM lake.cycles()') } @part;
my ($low) = sort { $cursor[$a] <=> $cursor[$b] } 0 .. $N - 1;
my ($low_owner) = grep { key_part($_) == $low } @owners;
$router->safe_psql('postgres', "SELECT lake.cast_durable('$low_owner', NULL, NULL, 'followed')");
is( $router->safe_psql('postgres',
		"SELECT string_agg(owner || ':' || partition || ':' || convert_from(payload, 'UTF8'), ',') "
		  . "FROM lake_router.log(ARRAY[@{[ join(',', @cursor) ]}]::bigint[])"),
	"$low_owner:$low:followed",
	'lake_router.log(cursors) gives the one landing after every partition\'s cursor');
is( $router->safe_psql('postgres',
		"SELECT string_agg(partition::text, ',') FROM lake_router.cycles(ARRAY[@{[ join(',', @cursor) ]}]::bigint[])"),
	$low, 'and lake_router.cycles(cursors) its one cycle');

# Without the cluster's server, a cluster-wide definition is refused as
# such, not taken for "defined on every partition already".
$router->safe_psql('postgres', 'ALTER SERVER lake RENAME TO lake_away');
is( (sql_error($router, "SELECT lake.define_lifecycle('nowhere', 'a', ARRAY[['a','b']])"))[0],
	'42704', 'define_lifecycle with no server "lake": 42704');
$router->safe_psql('postgres', 'ALTER SERVER lake_away RENAME TO lake');

# ----------------------------------------------------------------------
# Idempotency through the router
# ----------------------------------------------------------------------
{
	my $d = $ds[5];
	my $o = $owners[5];
	my @h;
	my $contend = "SELECT lake.append('$d', 't', 'contended', convert_to(repeat('same payload ', 1000), 'UTF8'));\n"
	  . "SELECT (c).position FROM lake.cast_durable('$o', NULL, NULL, 'same cast', NULL, 'contended') c;\n";
	for my $c (1 .. 8)
	{
		my %cl = (out => '', in => $contend);    # IPC::Run consumes its input
		$cl{h} = IPC::Run::start(
			[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $router->connstr('postgres') ],
			'<', \$cl{in},
			'>', \$cl{out}, '2>', \$cl{err});
		push @h, \%cl;
	}
	$_->{h}->finish for @h;
	my %answers = map { $_->{out} => 1 } @h;
	is(scalar(keys %answers), 1, '8 concurrent router sessions got one answer') or diag(join("\n--\n", map { $_->{out} . $_->{err} } @h));
	is(join('', map { $_->{err} } @h), '', 'and no error');
	my $p = key_part($d);
	is($part[$p]->safe_psql('postgres', "SELECT count(*) FROM lake.versions('$d') WHERE operation_id = 'contended'"),
		'1', 'one version of the contended operation');
	is( $part[ key_part($o) ]->safe_psql('postgres',
			"SELECT count(*) FROM lake.trajectory('$o') WHERE operation_id = 'contended'"),
		'1', 'one landing of the contended cast');

	# A staged upload, resumed from a new router session.
	my $stage = $router->safe_psql('postgres',
		"SELECT lake.begin_append('$d', 't', 'resumed'); SELECT lake.append_chunk(lake.begin_append('$d', 't', 'resumed'), 0, 'first ')"
	);
	$stage =~ s/\n.*//s;
	is($router->safe_psql('postgres', "SELECT lake.begin_append('$d', 't', 'resumed')"),
		$stage, 'a new router session gets the open stage back');
	my $v = $router->safe_psql('postgres',
		"SELECT lake.append_chunk($stage, 0, 'first '); SELECT lake.append_chunk($stage, 1, 'second'); SELECT lake.commit_append($stage)"
	);
	$v =~ s/^\s+//;
	is($router->safe_psql('postgres', "SELECT lake.commit_append($stage)"), $v, 'a late commit from another session returns the same version');
	is($router->safe_psql('postgres', "SELECT convert_from(lake.read('$d', $v), 'UTF8')"),
		'first second', 'the resumed upload reads back whole');
}

# ----------------------------------------------------------------------
# Tenant isolation through the router
# ----------------------------------------------------------------------
for my $node ($router, @part)
{
	$node->safe_psql('postgres', 'CREATE ROLE alice LOGIN; GRANT USAGE ON SCHEMA lake TO alice');
}
$router->safe_psql('postgres', 'GRANT USAGE ON FOREIGN SERVER lake TO alice');
is($router->safe_psql('postgres', "SELECT lake.grant_tenant('alice', 'acme')"), '', 'grant_tenant through the router');
is($router->safe_psql('postgres', "SELECT lake.grant_tenant('alice', 'acme')"), '', 'and again: idempotent');
for my $p (0 .. $N - 1)
{
	is($part[$p]->safe_psql('postgres', "SELECT count(*) FROM lake_data.tenant_grant WHERE tenant = 'acme'"),
		'1', "partition $p holds the grant once");
}
# Where a partition has the name, lake's own checks answer a role that
# may not define: its malformed arguments first, then 42501.
is(same(0, 'define_lifecycle by a role that may not, with a NULL initial phase',
		"SET ROLE alice; SELECT lake.define_lifecycle('toggle', NULL, '{{Off,On}}')"),
	'ERROR 22004', 'the NULL initial phase first (22004)');
is(same(0, 'define_lifecycle by a role that may not',
		"SET ROLE alice; SELECT lake.define_lifecycle('toggle', 'Off', '{{Off,On},{On,Off}}')"),
	'ERROR 42501', 'then the right to define (42501)');
{
	my $as_alice = sub {
		my ($sql) = @_;
		my ($rc, $out, $err) = $router->psql('postgres', "\\set VERBOSITY verbose\nSET ROLE alice;\n$sql", on_error_stop => 1);
		return $err =~ /ERROR:\s+([0-9A-Z]{5}):/ ? "ERROR $1" : $out;
	};
	my @mine = spread('alice-');
	for my $i (0 .. $N - 1)
	{
		my $d = $ds[ 2 * $i ];
		my $a = $mine[ 2 * $i ];
		my $o = $owners[ 2 * $i + 1 ];
		like($as_alice->("SELECT lake.append('$d', 'acme', 'alice-1', 'mine')"), qr/^\d+$/,
			"alice appends to tenant acme on partition $i");
		is($as_alice->("SELECT lake.append('$d', 'globex', 'alice-1', 'theirs')"), 'ERROR 42501',
			"alice cannot append to tenant globex on partition $i");
		is($as_alice->("SELECT lake.read('$d', 1)"), 'ERROR 42501', "nor read tenant t's version on partition $i");
		is($as_alice->("SELECT lake.create_owner('$a', 'kanban', 'acme')"), '',
			"alice creates an owner of acme on partition $i");
		is($as_alice->("SELECT lake.create_owner('$mine[2 * $i + 1]', 'kanban', 'globex')"), 'ERROR 42501',
			"but not of globex on partition $i");
		like($as_alice->("SELECT (c).position FROM lake.cast_durable('$a', NULL, NULL, 'hi') c"), qr/^\d+$/,
			"alice casts to her owner on partition $i");
		is($as_alice->("SELECT * FROM lake.owner_state('$o')"), 'ERROR 42501',
			"nor read the state of tenant t's owner $o on partition $i");
		is($as_alice->("SELECT lake.cast('$o', NULL, NULL)"), 'ERROR 42501', "nor cast to it");
	}
	is($as_alice->('SELECT count(DISTINCT partition) || \' \' || bool_and(owner LIKE \'alice-%\') FROM lake.log()'),
		"$N true", "lake.log() through the router shows alice only her tenant's landings, from every partition");
	is($as_alice->("SELECT lake.grant_tenant('alice', 'globex')"), 'ERROR 42501', 'alice cannot grant herself a tenant');
	# With USAGE on server lake, PostgreSQL lets alice make and alter her own
	# user mapping; PL/Proxy would log in to the partitions as its "user".
	# (The guard's own refusal, by its message: a permission error of the
	# guard's helpers would be 42501 too.)
	my $refusal = sub {
		my ($role, $sql) = @_;
		my ($r, $msg) = call($router, "SET ROLE $role;\n$sql");
		return $r =~ /^ERROR/ ? "$r $msg" : 'ok';
	};
	my $guarded = 'ERROR 42501 only the owner of server lake may create or alter its user mappings';
	is($refusal->('alice', "CREATE USER MAPPING FOR CURRENT_USER SERVER lake OPTIONS (user 'postgres')"), $guarded,
		'alice cannot map herself to another role of the partitions');
	$router->safe_psql('postgres', 'CREATE USER MAPPING FOR alice SERVER lake');
	is($refusal->('alice', "ALTER USER MAPPING FOR CURRENT_USER SERVER lake OPTIONS (ADD user 'postgres')"), $guarded,
		'nor alter her own mapping to one');
	is($as_alice->("SELECT lake.grant_tenant('alice', 'globex')"), 'ERROR 42501',
		'so her calls still reach the partitions as alice');
	# Nor drop it: PL/Proxy would then log her in with the PUBLIC mapping,
	# whose "user" may be another role.
	my $drop_guarded = 'ERROR 42501 only the owner of server lake may drop its user mappings';
	is($refusal->('alice', 'DROP USER MAPPING FOR CURRENT_USER SERVER lake'), $drop_guarded,
		'nor drop her own mapping');
	is($refusal->('alice', 'DROP OWNED BY alice'), $drop_guarded, 'nor drop it with DROP OWNED');
	$router->safe_psql('postgres', 'DROP USER MAPPING FOR alice SERVER lake');
	# Nor on another PL/Proxy server, which its owner could rename "lake".
	$router->safe_psql('postgres', "CREATE SERVER lake_next FOREIGN DATA WRAPPER plproxy OPTIONS (p0 'dbname=postgres'); "
		  . 'GRANT USAGE ON FOREIGN SERVER lake_next TO alice');
	is($refusal->('alice', "CREATE USER MAPPING FOR CURRENT_USER SERVER lake_next OPTIONS (user 'postgres')"),
		'ERROR 42501 only the owner of server lake_next may create or alter its user mappings',
		'nor map herself to another role on another PL/Proxy server');
	# The guards run as the role that makes the mapping: a server's owner who
	# is not a superuser makes and alters them as before.
	$router->safe_psql('postgres', 'CREATE ROLE srvown; GRANT USAGE ON FOREIGN DATA WRAPPER plproxy TO srvown; '
		  . 'ALTER SERVER lake_next OWNER TO srvown');
	is($refusal->('srvown', "CREATE USER MAPPING FOR alice SERVER lake_next OPTIONS (user 'alice')"), 'ok',
		'the owner of a PL/Proxy server maps a role');
	is($refusal->('srvown', "ALTER USER MAPPING FOR alice SERVER lake_next OPTIONS (SET user 'alice')"), 'ok',
		'and alters the mapping');
	my $next_drop = 'ERROR 42501 only the owner of server lake_next may drop its user mappings';
	is($refusal->('alice', 'DROP USER MAPPING FOR CURRENT_USER SERVER lake_next'), $next_drop,
		'alice cannot drop her mapping of another PL/Proxy server');
	is($refusal->('alice', 'DROP OWNED BY alice'), $next_drop, 'nor with DROP OWNED');
	$router->safe_psql('postgres', 'DROP USER MAPPING FOR alice SERVER lake_next');
	# A mapping she made while lake_router was not installed: its install
	# refuses it (the triggers see only what is done while they exist), on
	# server lake and on any other PL/Proxy server.
	$router->safe_psql('postgres', 'DROP EXTENSION lake_router');
	for my $server ('lake', 'lake_next')
	{
		is($as_alice->("CREATE USER MAPPING FOR CURRENT_USER SERVER $server OPTIONS (user 'postgres')"), '',
			"without lake_router, alice maps herself to postgres on $server");
		my ($r, $msg) = call($router, 'CREATE EXTENSION lake_router');
		is("$r $msg", "ERROR 42501 server $server has a user mapping for role alice that logs it in as postgres",
			"lake_router refuses to install over that mapping of $server");
		$router->safe_psql('postgres', "DROP USER MAPPING FOR alice SERVER $server");
	}
	$router->safe_psql('postgres', 'CREATE EXTENSION lake_router');
	# Installed with server "lake" already there: its count is the cluster's.
	is($router->safe_psql('postgres', 'SELECT partitions FROM lake_router.cluster'), $N,
		'an install over server "lake" keeps its partition count');
	my $more = join(', ', map { "ADD p$_ '" . part_connstr($part[ $_ % $N ]) . "'" } $N .. 2 * $N - 1);
	is((call($router, "ALTER SERVER lake OPTIONS ($more)"))[0], 'ERROR 55000', 'and refuses another');
	$router->safe_psql('postgres', 'DROP SERVER lake_next CASCADE; DROP OWNED BY srvown; DROP ROLE srvown');
	is($router->safe_psql('postgres', "SELECT lake.revoke_tenant('alice', 'acme')"), '', 'revoke_tenant through the router');
	for my $i (0 .. $N - 1)
	{
		is($as_alice->("SELECT lake.append('$ds[2 * $i]', 'acme', 'alice-2', 'mine')"), 'ERROR 42501',
			"after the revoke alice cannot append to acme on partition $i");
	}
}

# ----------------------------------------------------------------------
# Faults: one partition's postmaster killed under load
# ----------------------------------------------------------------------
my $VICTIM = 2;
my @load_owners;
for my $c (0 .. 7)
{
	push @load_owners, "load-$c-$_" for 0 .. 3;
}
$router->safe_psql('postgres', "SELECT count(lake.create_owner(o)) FROM unnest('{@{[ join(',', @load_owners) ]}}'::text[]) o");
my %owner_part = map { $_ => key_part($_) } @load_owners;
is(scalar(grep { $_ == $VICTIM } values %owner_part) > 0 && scalar(grep { $_ != $VICTIM } values %owner_part) > 0,
	1, 'the load\'s owners are on the victim and on other partitions');

# Each client, in the router, appends round after round (round r to
# dataset ds[r + c], a new operation) and casts durably to one of its four
# owners per round, walking it through kanban; until a row appears in
# load_stop. A failed append is retried every round with its operation id;
# an owner whose cast failed retries that cast at its next turn. After the
# stop, the client retries what failed until it is acknowledged. It
# reports "ack" lines, the failures it saw, and "done".
$router->safe_psql('postgres', 'CREATE TABLE load_stop ()');
my $client_sql = <<'SQL';
SELECT set_config('lt.c', :'c', false), set_config('lt.ds', :'ds', false);
DO $$
DECLARE
	c int := current_setting('lt.c')::int;
	ds text[] := current_setting('lt.ds')::text[];
	walk text[] := '{Planning,CognitiveWork,Evaluation,Commit,Planning}';
	step int[] := '{0,0,0,0}';          -- casts acknowledged, per owner
	owed bool[] := '{f,f,f,f}';         -- its last cast failed: retry it
	pending int[] := '{}';              -- rounds whose append failed
	keep int[];
	r int := 0;
	stopping bool := false;
	idle int := 0;
	progress bool;
	d text;
	o text;
	n int;
	v bigint;
	co lake.coordinate;
BEGIN
	LOOP
		progress := false;
		stopping := stopping OR EXISTS (SELECT FROM load_stop);
		IF NOT stopping THEN
			r := r + 1;
			pending := pending || r;
		END IF;
		keep := '{}';
		FOREACH n IN ARRAY pending LOOP
			d := ds[1 + (n + c) % 8];
			BEGIN
				v := lake.append(d, 't', 'load-' || c || '-' || n, convert_to('payload ' || c || ' ' || n, 'UTF8'));
				RAISE NOTICE 'ack append % % %', d, 'load-' || c || '-' || n, v;
				progress := true;
			EXCEPTION WHEN OTHERS THEN
				RAISE NOTICE 'fail append % [%] %', d, SQLSTATE, SQLERRM;
				keep := keep || n;
			END;
		END LOOP;
		pending := keep;
		FOR k IN 1 .. 4 LOOP
			-- While running one owner a round; after the stop, the owed ones.
			CONTINUE WHEN (NOT stopping AND k <> 1 + r % 4) OR (stopping AND NOT owed[k]);
			o := 'load-' || c || '-' || (k - 1);
			BEGIN
				co := lake.cast_durable(o, walk[1 + step[k] % 4], walk[2 + step[k] % 4],
				                        convert_to('cast ' || o || ' ' || step[k], 'UTF8'), step[k] / 4,
				                        'load-' || step[k]);
				RAISE NOTICE 'ack cast % % % %', o, 'load-' || step[k], co.position, co.cycle;
				step[k] := step[k] + 1;
				owed[k] := false;
				progress := true;
			EXCEPTION WHEN OTHERS THEN
				RAISE NOTICE 'fail cast % [%] %', o, SQLSTATE, SQLERRM;
				owed[k] := true;
			END;
		END LOOP;
		EXIT WHEN stopping AND cardinality(pending) = 0 AND NOT (true = ANY (owed));
		IF progress THEN idle := 0; ELSE idle := idle + 1; PERFORM pg_sleep(0.05); END IF;
		EXIT WHEN idle > 600;
	END LOOP;
	IF idle <= 600 THEN
		RAISE NOTICE 'done % % %', c, r, step[1] + step[2] + step[3] + step[4];
	END IF;
END $$;
SQL
my $ds_array = '{' . join(',', @ds) . '}';
my $load_dir    = PostgreSQL::Test::Utils::tempdir();
my $client_file = "$load_dir/client.sql";
open my $fh, '>', $client_file or die "$client_file: $!";
print $fh $client_sql;
close $fh;
my @clients;
for my $c (0 .. 7)
{
	# Output to files: a pipe nobody pumps while the test polls would fill
	# and stall the client.
	my %cl = (err => "$load_dir/client$c.err");
	$cl{h} = IPC::Run::start(
		[ 'psql', '-XAtq', '-v', "c=$c", '-v', "ds=$ds_array", '-d', $router->connstr('postgres') ],
		'<', $client_file, '>', "$load_dir/client$c.out", '2>', $cl{err});
	push @clients, \%cl;
}
my $victim = $part[$VICTIM];
my @others = grep { $_ != $VICTIM } 0 .. $N - 1;
my $count_sql = "SELECT count(*) FROM lake_data.version WHERE operation_id LIKE 'load-%'";
ok($victim->poll_query_until('postgres', "SELECT ($count_sql) >= 8", 't'), 'the load reaches the victim partition');
my $victim_epoch = $victim->safe_psql('postgres', 'SELECT epoch FROM lake.stats()');
$victim->kill9;
my %before = map { $_ => $part[$_]->safe_psql('postgres', $count_sql) } @others;
# While the victim is down, the others keep acknowledging.
for my $p (@others)
{
	ok($part[$p]->poll_query_until('postgres', "SELECT ($count_sql) > $before{$p} + 8", 't'),
		"partition $p keeps serving while partition $VICTIM is down");
}
# Cluster-wide calls fail while a partition is down, having done their
# work on the others; a retry once it is back completes them.
my ($lc_state)    = call($router, "SELECT lake.define_lifecycle('outage', 'A', '{{A,B},{B,A}}')");
my ($grant_state) = call($router, "SELECT lake.grant_tenant('alice', 'outage')");
is("$lc_state $grant_state", 'ERROR XX000 ERROR XX000',
	"define_lifecycle and grant_tenant fail while partition $VICTIM is down");
is( $router->safe_psql('postgres',
		q{SELECT string_agg(partition || ':' || ok || ':' || (error IS NOT NULL), ' ' ORDER BY partition) }
		  . q{FROM lake_router.check()}),
	join(' ', map { $_ == $VICTIM ? "$_:false:true" : "$_:true:false" } 0 .. $N - 1),
	'lake_router.check() reports the partition that is down, and the others');
# Its orphaned backends leave once they notice; then it starts again, and
# the calls routed to it succeed.
# (A failed start leaves the killed postmaster's pid in the node: forget it.)
ok(defined(wait_until(60, sub { $victim->{_pid} = undef; $victim->start(fail_ok => 1) })),
	"partition $VICTIM restarts after SIGKILL");
my $victim_before = $victim->safe_psql('postgres', $count_sql);
ok($victim->poll_query_until('postgres', "SELECT ($count_sql) > $victim_before + 8", 't'),
	"calls routed to partition $VICTIM succeed again");
is(answer($router, "SELECT lake.define_lifecycle('outage', 'A', '{{A,B},{B,A}}')"), '',
	'define_lifecycle retried once the partition is back: done');
is(answer($router, "SELECT lake.grant_tenant('alice', 'outage')"), '', 'grant_tenant retried: done');
is( join(',', map { $_->safe_psql('postgres',
	"SELECT (SELECT count(*) FROM lake_data.lifecycle WHERE name = 'outage') || ':' || "
	  . "(SELECT count(*) FROM lake_data.tenant_grant WHERE tenant = 'outage')") } @part),
	join(',', ('1:1') x $N), 'every partition has the lifecycle and the grant, once');
is(answer($router, "SELECT lake.define_lifecycle('outage', 'A', '{{A,B},{B,A}}')"), 'ERROR 42710',
	'and defining it again is refused as lake refuses it');
$router->safe_psql('postgres', 'INSERT INTO load_stop DEFAULT VALUES');
$_->{h}->finish for @clients;

my (%acked_version, %acked_coord, @fail);
my ($done, $rounds, $casts) = (0, 0, 0);
for my $cl (@clients)
{
	for my $line (split /\n/, slurp_file($cl->{err}))
	{
		if ($line =~ /NOTICE:\s+ack append (\S+) (\S+) (\d+)/) { $acked_version{"$1|$2"}{$3}++; }
		elsif ($line =~ /NOTICE:\s+ack cast (\S+) (\S+) (\d+) (\d+)/) { $acked_coord{"$1|$2"}{"$3|$4"}++; }
		elsif ($line =~ /NOTICE:\s+fail (\w+) (\S+) \[(\w+)\] (.*)/) { push @fail, { key => $2, state => $3, msg => $4 }; }
		elsif ($line =~ /NOTICE:\s+done \d+ (\d+) (\d+)/) { $done++; $rounds += $1; $casts += $2; }
	}
}
is($done, 8, 'every client finished');
note("$rounds appends and $casts casts acknowledged, " . scalar(@fail) . ' calls failed');
is(scalar(keys %acked_version), $rounds, 'every append was acknowledged, once');
is(scalar(keys %acked_coord),   $casts,  'every cast was acknowledged, once');
ok(scalar(@fail) > 0, 'calls failed while the victim was down');
is(join(',', sort { $a <=> $b } keys %{ { map { key_part($_->{key}) => 1 } @fail } }), $VICTIM,
	'only calls routed to the victim failed');
ok( !grep({
			$_->{msg} !~ /^PL\/Proxy function lake\.\w+\(\d\): \[postgres\] .*(connect|closed the connection)/
			  && $_->{msg} !~ /^lake\.\w+\(\d\): \[postgres\] REMOTE FATAL: terminating connection due to unexpected postmaster exit/
		} @fail),
	'each failure says that PL/Proxy could not reach the partition')
  or diag(join("\n", map { "$_->{state} $_->{msg}" } @fail));
note('failures: ' . join('; ', map { "$_->{state} $_->{msg}" } @fail[ 0 .. ($#fail < 2 ? $#fail : 2) ]));

# Exactly once: one version per acknowledged operation, at the version it
# was acknowledged with; versions gap-free.
my ($dup, $missing, $gaps, $extra) = (0, 0, 0, 0);
my %have;    # dataset -> op -> version -> count
for my $d (@ds)
{
	my @vs;
	for my $line (split /\n/, $part[ key_part($d) ]->safe_psql('postgres', "SELECT version, operation_id FROM lake.versions('$d')"))
	{
		my ($v, $op) = split /\|/, $line;
		push @vs, $v;
		$have{$d}{$op}{$v}++ if $op =~ /^load-/;
	}
	$gaps++ unless join(',', @vs) eq join(',', 1 .. scalar(@vs));
	for my $op (keys %{ $have{$d} })
	{
		$dup++ if keys %{ $have{$d}{$op} } != 1;
		$extra++ unless $acked_version{"$d|$op"};
	}
}
for my $k (keys %acked_version)
{
	my ($d, $op) = split /\|/, $k;
	my ($v) = keys %{ $acked_version{$k} };
	$missing++ unless keys %{ $acked_version{$k} } == 1 && ($have{$d}{$op}{$v} // 0) == 1;
}
is("$dup $missing $gaps $extra", '0 0 0 0', 'versions: none twice, none missing, no gaps, none unacknowledged');

($dup, $missing, $gaps, $extra) = (0, 0, 0, 0);
my %seen;    # owner -> op -> "position|cycle" in its trajectory
for my $o (@load_owners)
{
	my $p = $owner_part{$o};
	my @pos;
	my %by_op;
	for my $line (split /\n/, $part[$p]->safe_psql('postgres', "SELECT position, cycle, operation_id FROM lake.trajectory('$o')"))
	{
		my ($pos, $cycle, $op) = split /\|/, $line;
		push @pos, $pos;
		$by_op{$op}{"$pos|$cycle"}++;
	}
	$gaps++ unless join(',', @pos) eq join(',', 1 .. scalar(@pos));
	for my $op (keys %by_op)
	{
		$dup++ if keys %{ $by_op{$op} } != 1;
		$extra++ unless $acked_coord{"$o|$op"};
		$seen{$o}{$op} = (keys %{ $by_op{$op} })[0];
	}
}
for my $k (keys %acked_coord)
{
	my ($o, $op) = split /\|/, $k;
	my ($pc) = keys %{ $acked_coord{$k} };
	$missing++ unless keys %{ $acked_coord{$k} } == 1
	  && $seen{$o}{$op} && $seen{$o}{$op} eq $pc;
}
is("$dup $missing $gaps $extra", '0 0 0 0', 'coordinates: none twice, none missing, positions gap-free, none unacknowledged');
is( $router->safe_psql('postgres', 'SELECT coalesce(sum(applied), 0) FROM lake.recover()'),
	'0', 'lake.recover() through the router applies nothing on any partition');
cmp_ok($router->safe_psql('postgres', "SELECT epoch FROM lake.stats() WHERE partition = $VICTIM"),
	'>', $victim_epoch, 'the victim serves under a new epoch');
is($router->safe_psql('postgres', "SELECT epoch % $N FROM lake.stats() WHERE partition = $VICTIM"),
	$VICTIM, 'in its residue class');

# ----------------------------------------------------------------------
# Promotion: a standby of partition 3, promoted; the router repointed
# ----------------------------------------------------------------------
my $PROMOTED = 3;
my $primary  = $part[$PROMOTED];
$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('part3_standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->start;
# check() says why a pN naming a standby is not ok.
$router->safe_psql('postgres', "ALTER SERVER lake OPTIONS (SET p$PROMOTED '" . part_connstr($standby) . "')");
is( $router->safe_psql('postgres',
		"SELECT in_recovery, ok, error FROM lake_router.check() WHERE partition = $PROMOTED"),
	't|f|the server is a standby', 'check() flags a standby, and says why');
$router->safe_psql('postgres', "ALTER SERVER lake OPTIONS (SET p$PROMOTED '" . part_connstr($primary) . "')");
my @p3_owners = grep { $owner_part{$_} == $PROMOTED } @load_owners;
my $p3_owner  = $p3_owners[0];
my $coord = $router->safe_psql('postgres',
	"SELECT (c).position FROM lake.cast_durable('$p3_owner', NULL, NULL, 'before promotion', NULL, 'pre-promotion') c");
my $traj_sql = 'SELECT o.name, t.position, t.cycle, t.epoch, t.seq, t.payload FROM lake_data.owner o, '
  . 'LATERAL lake.trajectory(o.name) t ORDER BY 1, 2';
my $ver_sql = 'SELECT d.name, v.* FROM lake_data.dataset d, LATERAL lake.versions(d.name) v ORDER BY 1, 2';
my $traj_before = $primary->safe_psql('postgres', $traj_sql);
my $ver_before  = $primary->safe_psql('postgres', $ver_sql);
my $epoch_before = $primary->safe_psql('postgres', 'SELECT epoch FROM lake.stats()');
$primary->stop('fast');    # streams what it wrote to the standby first
$standby->promote;
ok($standby->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the promoted standby serves');
my ($state) = call($router, "SELECT lake.cast_durable('$p3_owner', NULL, NULL)");
like($state, qr/^ERROR/, "before the router is repointed, partition ${PROMOTED}'s calls fail");
$router->safe_psql('postgres', "ALTER SERVER lake OPTIONS (SET p$PROMOTED '" . part_connstr($standby) . "')");
is($router->safe_psql('postgres', "SELECT ok FROM lake_router.check() WHERE partition = $PROMOTED"),
	't', 'after ALTER SERVER the router reaches the promoted partition');
is($standby->safe_psql('postgres', $traj_sql), $traj_before, 'every acknowledged landing is there');
is($standby->safe_psql('postgres', $ver_sql),  $ver_before,  'every acknowledged version is there');
is( $router->safe_psql('postgres',
		"SELECT (c).position FROM lake.cast_durable('$p3_owner', NULL, NULL, 'before promotion', NULL, 'pre-promotion') c"),
	$coord, 'a replay of a cast acknowledged before the promotion returns its coordinate');
my $next = $router->safe_psql('postgres',
	"SELECT (c).position FROM lake.cast_durable('$p3_owner', NULL, NULL, 'after promotion', NULL, 'post-promotion') c");
is($next, $coord + 1, 'casts resume at the next position');
my $epoch_after = $router->safe_psql('postgres', "SELECT epoch FROM lake.trajectory('$p3_owner') ORDER BY position DESC LIMIT 1");
ok($epoch_after > $epoch_before && $epoch_after % $N == $PROMOTED,
	"under a new epoch of partition $PROMOTED ($epoch_before -> $epoch_after)");

# ----------------------------------------------------------------------
# lake.partition must be below lake.partitions
# ----------------------------------------------------------------------
my $p1 = $part[1];
$p1->stop('fast');
$p1->append_conf('postgresql.conf', "lake.partition = $N\n");
ok(!$p1->start(fail_ok => 1), "a server with lake.partition = $N of $N refuses to start");
like(slurp_file($p1->logfile), qr/lake\.partition \($N\) must be below lake\.partitions \($N\)/,
	'and says why');

done_testing();
