# The writer row once its page is full. Every recovery advances the writer
# epoch by updating lake_data.writer's one row. While a snapshot older than
# the row's versions is held (pg_dump, a long report, a standby's
# hot_standby_feedback), pruning cannot reclaim them: after about 150
# recoveries the page is full, the update is not HOT, and the new version
# goes to another page with new index entries. Made through the executor
# without a range table, that index insertion crashed the worker
# (SIGSEGV in ExecGetUpdatedCols) and with it the whole cluster.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('writer_row_pages');
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.define_lifecycle('ab', 'A', '{{A,B},{B,A}}');
SELECT lake.create_owner('o', 'ab');
-- Each lifecycle edit makes the worker recover under a new epoch; wait
-- for that epoch before the next edit (bounded: 60 s for each).
CREATE PROCEDURE recoveries(n int) LANGUAGE plpgsql AS $$
DECLARE
    e int;
BEGIN
    FOR i IN 1..n LOOP
        SELECT epoch INTO e FROM lake.stats();
        UPDATE lake_data.lifecycle SET edges = edges WHERE name = 'ab';
        COMMIT;
        FOR t IN 1..12000 LOOP
            EXIT WHEN (SELECT epoch > e AND worker_state = 'serving' FROM lake.stats());
            IF t = 12000 THEN
                RAISE EXCEPTION 'recovery % did not end', i;
            END IF;
            PERFORM pg_sleep(0.005);
        END LOOP;
    END LOOP;
END
$$;
});
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the worker serves');
my $started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
my $epoch0 = $node->safe_psql('postgres', 'SELECT epoch FROM lake.stats()');
is($node->safe_psql('postgres', q{SELECT (ctid::text::point)[0] FROM lake_data.writer}),
	'0', 'the writer row starts on page 0');
my $log0 = -s $node->logfile;

# A snapshot held across every recovery below.
my $old = $node->background_psql('postgres', on_error_stop => 0);
$old->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
$old->query_safe('SELECT count(*) FROM pg_class');

my ($rc, $out, $err) = $node->psql('postgres', 'CALL recoveries(250)');
is($rc, 0, '250 recoveries, each under a new epoch') or diag($err);
cmp_ok($node->safe_psql('postgres', q{SELECT (ctid::text::point)[0] FROM lake_data.writer}),
	'>', 0, 'the writer row moved to another page (an update that was not HOT)');
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $started,
	'the server did not restart');
unlike(slurp_file($node->logfile, $log0), qr/terminated by signal|server process .* was terminated/,
	'no process was terminated');
$old->query_safe('COMMIT');
$old->quit;

# The row is read through its index as before: one more recovery, a cast.
cmp_ok($node->safe_psql('postgres', 'SELECT epoch FROM lake.stats()'), '>=', $epoch0 + 250,
	'the epoch advanced once a recovery');
is($node->safe_psql('postgres', q{SELECT count(*) FROM lake_data.writer}), '1', 'one writer row');
($rc, $out, $err) = $node->psql('postgres', 'CALL recoveries(1)');
is($rc, 0, 'a recovery after the snapshot is gone') or diag($err);
is($node->safe_psql('postgres', q{SELECT (lake.cast_durable('o', 'A', 'B')).position}), '1',
	'a durable cast after them');
is($node->safe_psql('postgres', q{SELECT count(*) FROM lake_data.writer WHERE epoch = (SELECT epoch FROM lake.stats())}),
	'1', 'the writer row holds the epoch in force');

$node->stop;
done_testing();
