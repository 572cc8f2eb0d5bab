# Bounds and cadences the other tests set but never measured (found by
# mutation testing: an off-by-one in each passed every suite):
# - an equal lake.max_buffered_bytes / lake.max_stream_bytes pair is valid
#   (SPEC §2: buffered >= stream), at start and at a reload;
# - the worker snapshots every lake.checkpoint_cycles sealed cycles, not
#   one later (SPEC §5);
# - a cycle holds at most lake.cycle_max_casts casts (SPEC §4);
# - a cast that found the cycle buffer full goes on as soon as a seal frees
#   room, not when its lake.admission_queue_wait runs out;
# - an idle stage is kept for lake.stage_ttl and expired within a few of the
#   passes (a quarter of the TTL each) after it, not at twice the TTL.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use LakeTAP;

my $MB = 1024 * 1024;
my $node = lake_node('bounds_cadence',
	conf => "lake.max_stream_bytes = 2MB\nlake.max_buffered_bytes = 2MB\n"
	  . "lake.checkpoint_cycles = 2\nlake.cycle_interval = '1h'\nlake.cycle_max_casts = 3\n"
	  . "lake.cycle_buffer_size = '64kB'\nlake.admission_queue_wait = '20s'\nlake.stage_ttl = '10s'");
ok($node->start(fail_ok => 1), 'the server starts with an equal pair (2MB, 2MB)');
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_owner(o) FROM unnest('{ck1,mc1,sw1}'::text[]) o;
SELECT lake.create_dataset('ds');});
is($node->safe_psql('postgres', 'SELECT max_stream_bytes, max_buffered_bytes FROM lake.admission()'),
	2 * $MB . '|' . 2 * $MB, 'the equal pair is in force');

# --- the snapshot cadence ---------------------------------------------------
is($node->safe_psql('postgres', 'SELECT count(*) FROM lake_data.snapshot'), '0', 'no snapshot yet');
# One worker seal per durable cast (each returns once its cycle is
# published; the worker snapshots, if due, before it seals the next one).
foreach my $m ([ 'Planning', 'CognitiveWork' ], [ 'CognitiveWork', 'Evaluation' ], [ 'Evaluation', 'Commit' ])
{
	$node->safe_psql('postgres', "SELECT lake.cast_durable('ck1', '$m->[0]', '$m->[1]')");
}
is($node->safe_psql('postgres', 'SELECT max(cycle) FROM lake_data.cycle'), '3', 'three cycles sealed');
ok($node->poll_query_until('postgres', 'SELECT count(*) > 0 FROM lake_data.snapshot'), 'a snapshot was taken');
is($node->safe_psql('postgres', "SELECT string_agg(cycle::text, ',' ORDER BY cycle) FROM lake_data.snapshot"),
	'2', 'it is of cycle 2: taken after lake.checkpoint_cycles seals, not one later');

# --- lake.cycle_max_casts -----------------------------------------------------
# No seal can write while lake_data.cycle is held in SHARE mode: nine casts
# pend, then the seals take them in cuts.
my $holder = $node->background_psql('postgres');
$holder->query_safe('BEGIN; LOCK TABLE lake_data.cycle IN SHARE MODE;');
$node->safe_psql('postgres', "SELECT count(lake.cast('mc1', NULL, NULL, '\\x01'::bytea)) FROM generate_series(1, 9)");
$holder->query_safe('COMMIT');
ok($node->poll_query_until('postgres', "SELECT pending = 0 FROM lake.owner_state('mc1')"),
	'nine pending casts are sealed');
is($node->safe_psql('postgres', 'SELECT max(casts) FROM lake.cycles() WHERE cycle > 3'), '3',
	'no cycle holds more than lake.cycle_max_casts casts');

# --- a cast waiting for room in the cycle buffer ------------------------------
# Four 16000-byte casts fill the 64 kB ring while no seal can write; a fifth
# waits for room. A record never straddles the ring's end, so how many fit
# depends on where the ring's tail stands: a restart's recovery puts it at
# the start.
$holder->quit;
$node->restart;
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"), 'restarted and serving');
$holder = $node->background_psql('postgres');
$holder->query_safe('BEGIN; LOCK TABLE lake_data.cycle IN SHARE MODE;');
$node->safe_psql('postgres',
	"SELECT count(lake.cast('sw1', NULL, NULL, decode(repeat('ab', 16000), 'hex'))) FROM generate_series(1, 4)");
my $fifth = background($node, "SELECT lake.cast('sw1', NULL, NULL, decode(repeat('cd', 16000), 'hex')) IS NOT NULL");
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE query LIKE '%repeat(''cd''%' AND wait_event_type = 'Extension'}),
	'a fifth cast waits for room in the ring');
$holder->query_safe('COMMIT');
my $took = wait_until(30, sub { finished($fifth) });
is($fifth->{out}, "t\n", 'the fifth cast is accepted');
ok(defined $took && $took < 8, 'as soon as a seal frees room, not at the end of its 20 s queue wait')
  or diag('took ' . ($took // 'over 30') . ' s');
$holder->quit;

# --- lake.stage_ttl -----------------------------------------------------------
my $stage = $node->safe_psql('postgres', "SELECT lake.begin_append('ds', 't', 'idle-op')");
$node->safe_psql('postgres', "SELECT lake.append_chunk($stage, 0, '\\x01'::bytea)");
$took = wait_until(60,
	sub { $node->safe_psql('postgres', "SELECT count(*) FROM lake_data.stage WHERE id = $stage") eq '0' });
ok(defined $took && $took >= 9, 'an idle stage is kept for lake.stage_ttl (10 s)')
  or diag('took ' . ($took // 'over 60') . ' s');
ok(defined $took && $took < 16, 'and expired within a few passes after it, not at twice the TTL')
  or diag('took ' . ($took // 'over 60') . ' s');

# --- an equal pair at a reload ------------------------------------------------
$node->append_conf('postgresql.conf', "lake.max_stream_bytes = 3MB\nlake.max_buffered_bytes = 3MB");
$node->reload;
ok($node->poll_query_until('postgres',
		'SELECT max_stream_bytes = 3 * 1048576 AND max_buffered_bytes = 3 * 1048576 FROM lake.admission()'),
	'a reload to an equal pair (3MB, 3MB) takes effect');

$node->stop;
done_testing();
