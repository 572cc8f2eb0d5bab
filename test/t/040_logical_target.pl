# lake's tables as the target of logical replication. A subscriber with
# lake installed took the publisher's cycles, owners and writer row under
# its own running worker: owner states that contradict its log, receipts
# of an epoch the replicated history had used (one answered another
# cast's coordinate), stages of the publisher expired by the subscriber's
# worker. The apply and table-sync workers now write no row of lake_data:
# they fail with 0A000 naming the table, and the subscriber's lake stays
# its own. Publishing lake's tables, and the application's tables next to
# them, goes on.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $pub = lake_node('publisher', init => { allows_streaming => 'logical' });
$pub->start;
my $sub = lake_node('subscriber', init => { allows_streaming => 'logical' });
$sub->start;

$pub->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_owner('a');
SELECT lake.cast_durable('a', 'Planning', 'CognitiveWork');
SELECT lake.create_dataset('d');
SELECT lake.append('d', 'default', 'op1', '\x01'::bytea);
CREATE TABLE app (id int PRIMARY KEY, note text);
INSERT INTO app VALUES (1, 'before');
CREATE PUBLICATION everything FOR ALL TABLES;
});
# Whether the subscriber's subscription 'name' streams its tables.
sub subscription_ready
{
	my ($name) = @_;
	return $sub->poll_query_until('postgres',
		"SELECT count(*) > 0 FROM pg_subscription_rel r JOIN pg_subscription s ON s.oid = r.srsubid "
		  . "WHERE s.subname = '$name' AND r.srsubstate = 'r'");
}

$sub->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.create_owner('a');
CREATE TABLE app (id int PRIMARY KEY, note text);
});
ok($sub->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the subscriber\'s worker serves');
my $epoch = $sub->safe_psql('postgres', 'SELECT epoch FROM lake.stats()');

# The initial copy: every lake_data table's sync fails; the application's
# table is copied.
my $conn = $pub->connstr . ' dbname=postgres';
$sub->safe_psql('postgres',
	"CREATE SUBSCRIPTION s CONNECTION '$conn' PUBLICATION everything");
ok($sub->poll_query_until('postgres', "SELECT count(*) = 1 FROM app"),
	'the application\'s table is copied');
ok($sub->wait_for_log(qr/lake_data\.\w+ cannot be a logical replication target/),
	'the sync of lake\'s tables fails, naming one');
like(slurp_file($sub->logfile),
	qr/ERROR:  lake_data\.\w+ cannot be a logical replication target/,
	'as an ERROR of the sync worker');
is($sub->safe_psql('postgres', q{
SELECT (SELECT count(*) FROM lake_data.dataset) || '|' ||
       (SELECT count(*) FROM lake_data.version) || '|' ||
       (SELECT count(*) FROM lake_data.cycle)}),
	'0|0|0', 'no row of the publisher\'s lake reached the subscriber\'s');

# Streamed changes, without the initial copy: the apply worker refuses the
# first row of lake's and writes none.
$sub->safe_psql('postgres', 'DROP SUBSCRIPTION s');
$sub->safe_psql('postgres',
	"CREATE SUBSCRIPTION s2 CONNECTION '$conn' PUBLICATION everything WITH (copy_data = false)");
ok(subscription_ready('s2'), 'the streaming subscription is ready');
my $offset = -s $sub->logfile;
$pub->safe_psql('postgres', q{
SELECT lake.append('d', 'default', 'op2', '\x02'::bytea);
});
ok($sub->wait_for_log(qr/lake_data\.\w+ cannot be a logical replication target/, $offset),
	'the apply worker refuses a replicated row of lake\'s');
is($sub->safe_psql('postgres', 'SELECT count(*) FROM lake_data.version'),
	'0', 'and writes none');
$sub->safe_psql('postgres', 'DROP SUBSCRIPTION s2');

# The subscriber's lake is its own: its owner at its own initial phase,
# its casts durable under its own epoch, a receipt answering its own cast.
my $coord = $sub->safe_psql('postgres',
	"SELECT (c).cycle || '|' || (c).position FROM lake.cast_durable('a', 'Planning', 'CognitiveWork') AS c");
is($coord, '1|1', 'the subscriber\'s own first cast is its cycle 1, position 1');
is($sub->safe_psql('postgres', "SELECT phase || '|' || position FROM lake.owner_state('a')"),
	'CognitiveWork|1', 'its owner state follows its own log');
is($sub->safe_psql('postgres', 'SELECT epoch FROM lake.stats()'), $epoch,
	'its worker was never fenced out by replicated rows');

# lake called by the application's own trigger on a replicated table (one
# enabled ALWAYS, so the apply worker fires it): lake's own writes go on.
$pub->safe_psql('postgres', 'CREATE PUBLICATION apponly FOR TABLE app');
$sub->safe_psql('postgres', q{
CREATE FUNCTION app_owner() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lake.create_owner('from_app_' || NEW.id);
    PERFORM lake.begin_append('r0', 'default', 'from_app_' || NEW.id);
    RETURN NEW;
END $$;
SELECT lake.create_dataset('r0');
CREATE TRIGGER app_owner AFTER INSERT ON app FOR EACH ROW EXECUTE FUNCTION app_owner();
ALTER TABLE app ENABLE ALWAYS TRIGGER app_owner;
});
$sub->safe_psql('postgres',
	"CREATE SUBSCRIPTION s3 CONNECTION '$conn' PUBLICATION apponly WITH (copy_data = false)");
ok(subscription_ready('s3'), 'the application\'s subscription is ready');
$pub->safe_psql('postgres', "INSERT INTO app VALUES (2, 'replicated')");
ok($sub->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM lake_data.owner WHERE name = 'from_app_2'"),
	'an owner and a stage created by lake in the apply worker, from the application\'s trigger');
is($sub->safe_psql('postgres', "SELECT count(*) FROM lake_data.stage WHERE operation_id = 'from_app_2'"),
	'1', 'the stage is there too');
$sub->safe_psql('postgres', 'DROP SUBSCRIPTION s3');

# A session of the subscriber's with session_replication_role = replica
# (as pg_restore --disable-triggers runs) is not a logical worker: lake's
# own writes go on.
is($sub->safe_psql('postgres', q{
SET session_replication_role = replica;
SELECT lake.create_dataset('r');
SELECT lake.append('r', 'default', 'op1', '\x03'::bytea);
}), "\n1", 'lake writes under session_replication_role = replica');

$sub->stop;
$pub->stop;
done_testing();
