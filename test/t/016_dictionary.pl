# Per-dataset zstd dictionaries (store_dict.h) are ordinary WAL-logged rows:
# - a streaming standby reads versions compressed with a dictionary trained
#   on the primary, byte for byte, and cannot train one itself;
# - after a crash (immediate stop) the primary reads every version, those
#   written before the dictionary, with it, and in the transaction that
#   trained it, and keeps compressing with it;
# - the promoted standby reads them all and compresses its own appends with
#   the dictionary it replicated.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $primary = lake_node('primary', init => { allows_streaming => 1 });
$primary->start;
$primary->safe_psql(
	'postgres', q{
CREATE EXTENSION lake;
CREATE FUNCTION dj(n int) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
  SELECT convert_to(format('{"op":"op-%s","event":"order.updated","order":%s,"status":"%s","trace":"%s"}',
                           n, n * 7919 % 1000000, (ARRAY['shipped','paid','lost'])[1 + n % 3], md5(n::text)), 'UTF8')
$$;
-- Whether version v's stored chunk names a dictionary (its zstd frame's
-- Dictionary_ID_flag; codec.h: tag, checksum, descriptor: no magic number).
CREATE FUNCTION named(v bigint) RETURNS bool LANGUAGE sql AS $$
  SELECT get_byte(x.data, 0) = ascii('Z') AND get_byte(x.data, 5) & 3 <> 0
  FROM lake_data.version x JOIN lake_data.dataset d ON d.id = x.dataset_id
  WHERE d.name = 'ds' AND x.version = v
$$;
-- How many of versions 1..n read back as dj(1..n).
CREATE FUNCTION reads_ok(n int) RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FILTER (WHERE lake.read('ds', i) = dj(i)) FROM generate_series(1, n) i
$$;
SELECT lake.create_dataset('ds');
SELECT count(lake.append('ds', 't', 'op-' || n, dj(n))) FROM generate_series(1, 200) n;
});
$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->start;

# Trained, and used, in one transaction; then more appends.
my $dict = $primary->safe_psql(
	'postgres', q{
BEGIN;
SELECT lake.train_dictionary('ds');
SELECT count(lake.append('ds', 't', 'op-' || n, dj(n))) FROM generate_series(201, 250) n;
COMMIT;
});
($dict) = split /\n/, $dict;
cmp_ok($dict, '>=', 32768, "trained dictionary $dict");
$primary->safe_psql('postgres',
	q{SELECT count(lake.append('ds', 't', 'op-' || n, dj(n))) FROM generate_series(251, 300) n});
is($primary->safe_psql('postgres',
		'SELECT bool_and(named(v)), bool_and(NOT named(v - 100)) FROM generate_series(201, 300) v'),
	't|t', 'versions 201..300 name a dictionary, 101..200 do not');

$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', 'SELECT reads_ok(300)'),
	'300', 'the standby reads all 300 versions, with and without the dictionary');
my ($state, $msg) = sql_error($standby, "SELECT lake.train_dictionary('ds')");
is($state, '25006', 'the standby cannot train a dictionary');
like($msg, qr/lake\.train_dictionary\(\)/, "refused up front, before training ($msg)");

# A crash: every version reads back, and appends still use the dictionary.
$primary->stop('immediate');
$primary->start;
is($primary->safe_psql('postgres', 'SELECT reads_ok(300)'),
	'300', 'after a crash the primary reads all 300 versions');
$primary->safe_psql('postgres',
	q{SELECT count(lake.append('ds', 't', 'op-' || n, dj(n))) FROM generate_series(301, 320) n});
is($primary->safe_psql('postgres',
		'SELECT bool_and(named(v)) FROM generate_series(301, 320) v'),
	't', 'after the crash appends still compress with the dictionary');
$primary->wait_for_catchup($standby);

# Failover: the promoted standby reads everything and compresses its own
# appends with the dictionary it replicated.
$primary->stop('immediate');
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'the standby was not promoted';
is($standby->safe_psql('postgres', 'SELECT reads_ok(320)'),
	'320', 'the promoted standby reads all 320 versions');
$standby->safe_psql('postgres',
	q{SELECT count(lake.append('ds', 't', 'op-' || n, dj(n))) FROM generate_series(321, 340) n});
is($standby->safe_psql('postgres',
		'SELECT bool_and(named(v)), reads_ok(340) FROM generate_series(321, 340) v'),
	't|340', 'the promoted standby compresses with the replicated dictionary and reads it back');

done_testing();
