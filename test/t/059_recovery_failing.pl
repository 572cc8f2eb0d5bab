# A recovery that fails at its commit, after the replay itself succeeded:
# here a deferred trigger an administrator put on lake_data.owner, which
# fires when the recovery quarantines an owner. Like a recovery that fails
# in the replay, it must be reported as failing, with the error, to
# lake.stats() and to every session that waits for the owners (55000, at
# once), and be retried once a second. It was taken for a recovery still
# under way: sessions waited out lake.admission_queue_wait (53000), and
# each of them woke the worker into another attempt at once (hundreds a
# second). Nor may the server log say a recovery happened that did not.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('recovery_failing', conf => "lake.admission_queue_wait = '10s'\n");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION lake;
SELECT lake.define_lifecycle('ab', 'A', '{{A,B},{B,A}}');
SELECT lake.create_owner('o', 'ab');
SELECT lake.create_owner('p');
});
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the worker serves');
$node->safe_psql('postgres', q{SELECT lake.cast_durable('o', 'A', 'B')});
$node->safe_psql('postgres', q{
CREATE FUNCTION lake_data.boom() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'boom at commit';
END
$$;
CREATE CONSTRAINT TRIGGER boom AFTER UPDATE ON lake_data.owner
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION lake_data.boom();
});
my $epoch = $node->safe_psql('postgres', 'SELECT epoch FROM lake.stats()');

# The edit drops o's landed step: its recovery quarantines o (an UPDATE of
# its registry row), and the trigger fails that transaction's commit.
my $log0 = -s $node->logfile;
$node->safe_psql('postgres', q{UPDATE lake_data.lifecycle SET edges = '{{A,C},{C,A}}' WHERE name = 'ab'});
ok($node->poll_query_until('postgres', "SELECT worker_state = 'recovery failing' FROM lake.stats()"),
	'lake.stats() says the recovery is failing');
like(slurp_file($node->logfile, $log0), qr/boom at commit/, 'the commit failed on the trigger');

my $t0 = time;
my ($state, $msg) = sql_error($node, q{
\set VERBOSITY verbose
SELECT phase FROM lake.owner_state('p')});
is($state, '55000', 'a session waiting for the owners is told (55000)') or diag($msg);
like($msg, qr/the worker could not recover them/, 'that the worker could not recover them');
cmp_ok(time - $t0, '<', 8, 'at once, not after lake.admission_queue_wait');
my ($rc, $out, $err) = $node->psql('postgres', q{SELECT phase FROM lake.owner_state('p')});
like($err, qr/DETAIL:  The last recovery failed: boom at commit\./, 'the detail gives the error');

# Sessions asking meanwhile do not make the worker retry in a loop.
my $log1 = -s $node->logfile;
my $t1 = time;
$node->psql('postgres', q{SELECT lake.owner_state('p')}) for 1 .. 30;
my $asked = time - $t1;
sleep(1) if $asked < 2;    # a window of at least two seconds
my $window = time - $t1;
my @tries = slurp_file($node->logfile, $log1) =~ /ERROR:  boom at commit/g;
cmp_ok(scalar(@tries), '<=', $window + 2,
	"one retry a second at most ($window s; 30 sessions asked)");
cmp_ok(scalar(@tries), '>=', 1, 'and it does retry');
unlike(slurp_file($node->logfile, $log0), qr/lake recovery: epoch/,
	'no failed attempt was logged as a recovery');
is($node->safe_psql('postgres', 'SELECT epoch FROM lake.stats()'), $epoch,
	'the epoch in force is still the last recovered one');

# Without the trigger the next attempt commits: o quarantined, p served.
$node->safe_psql('postgres', 'DROP TRIGGER boom ON lake_data.owner');
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the next attempt recovers');
my @done = slurp_file($node->logfile, $log0) =~ /lake recovery: epoch (\d+)/g;
is(scalar(@done), 1, 'logged once, as it committed');
is($done[0], $node->safe_psql('postgres', 'SELECT epoch FROM lake.stats()'), 'under the epoch in force');
is($node->safe_psql('postgres', q{SELECT quarantined FROM lake.owner_state('o')}), 't',
	'o is quarantined (its step no longer applies)');
is($node->safe_psql('postgres', q{SELECT (lake.cast_durable('p', 'Planning', 'CognitiveWork')).position}),
	'1', 'p takes a durable cast');

$node->stop;
done_testing();
