# A database's lake keeps the partition it was started as (SPEC §7): its
# epochs and stage ids carry the partition in their residue class, which a
# router routes receipts and stages by. Started again as another partition
# (lake.partition or lake.partitions changed), the worker refuses to
# recover, and casts say why (55000), rather than issue receipts in another
# partition's class. Set back, it serves again, past its old epochs.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

# Owner p3 and dataset pk hash to partition 1 of 4 (created elsewhere, 55000).
my $node = lake_node('partition_kept', conf => "lake.partitions = 4\nlake.partition = 1\n");
$node->start;
$node->safe_psql('postgres',
	"CREATE EXTENSION lake; SELECT lake.create_owner('p3'); SELECT lake.create_dataset('pk')");
ok($node->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'partition 1 of 4 serves');
my $epoch = $node->safe_psql('postgres', 'SELECT epoch FROM lake.stats()');
is($epoch % 4, 1, "its epoch ($epoch) is in partition 1's class");
is($node->safe_psql('postgres', 'SELECT partitions, partition_no FROM lake_data.writer'),
	'4|1', 'the writer row records the partition');
$node->safe_psql('postgres', "SELECT lake.cast_durable('p3', 'Planning', 'CognitiveWork')");

for my $wrong ("lake.partition = 2", "lake.partitions = 8")
{
	$node->stop;
	$node->append_conf('postgresql.conf', "$wrong\n");
	my $log_at = -s $node->logfile;
	$node->start;
	my $why = '';
	ok(defined wait_until(60, sub {
				($why) = (sql_error($node, "SELECT lake.cast_durable('p3', 'CognitiveWork', 'Evaluation')"))[0];
				$why eq '55000' }),
		"started with $wrong: a cast is refused (55000)");
	my ($state, $msg) = sql_error($node, "SELECT lake.cast('p3', 'CognitiveWork', 'Evaluation')");
	is($state, '55000', '... and a plain cast too (55000)');
	like($msg, qr/could not recover/, '... because the worker could not recover the owners');
	like(slurp_file($node->logfile, $log_at), qr/this database's lake is partition 1 of 4, not/,
		'... and the server log says which partition the data belongs to');
	is($node->safe_psql('postgres', 'SELECT epoch FROM lake_data.writer'), $epoch,
		'... and no epoch was taken');
	($state, $msg) = sql_error($node, "SELECT lake.begin_append('pk', 'default', 'op')");
	is($state, '55000', '... nor a stage id, which would be in another partition\'s class');
	like($msg, qr/this database's lake is partition 1 of 4, not/, '... saying why');
	$node->stop;
	$node->append_conf('postgresql.conf', "lake.partitions = 4\nlake.partition = 1\n");
	$node->start;
	ok($node->poll_query_until('postgres',
			"SELECT worker_state = 'serving' AND epoch > $epoch FROM lake.stats()"),
		'set back, it serves again past its old epoch');
	$epoch = $node->safe_psql('postgres', 'SELECT epoch FROM lake.stats()');
	is($epoch % 4, 1, "... in partition 1's class ($epoch)");
}
is($node->safe_psql('postgres',
		"SELECT (lake.cast_durable('p3', 'CognitiveWork', 'Evaluation')).position"),
	'2', 'and casts land again');
is($node->safe_psql('postgres', "SELECT lake.begin_append('pk', 'default', 'op') % 4"),
	'1', "and stage ids come in partition 1's class");

$node->stop;
done_testing();
