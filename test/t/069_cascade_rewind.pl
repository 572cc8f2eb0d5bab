# A cascading standby (a standby of a standby) promoted after the primary
# went on alone (asynchronously: a lost line), then the old primary rewound
# with pg_rewind onto it, rejoined as its standby and promoted back. Each
# promotion recovers the owners exactly (state equals trajectory, recovery
# applies nothing), the lost line's receipts answer LK006 and its numbers
# are handed out again (README "Recovery": the asynchronous guarantee), and
# what the promoted line acknowledged is kept across the rewind.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

# The old primary keeps its WAL for pg_rewind; wal_log_hints lets it rewind.
my $p = lake_node('rw_primary', init => { allows_streaming => 1 },
	conf => "wal_keep_size = '256MB'\nwal_log_hints = on\nlake.cycle_interval = '1h'");
$p->start;
$p->safe_psql('postgres', q{CREATE EXTENSION lake;
SELECT lake.create_owner('o1'); SELECT lake.create_dataset('d');});
ok($p->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the primary serves');
$p->backup('b');
my $s = PostgreSQL::Test::Cluster->new('rw_standby');
$s->init_from_backup($p, 'b', has_streaming => 1);
$s->start;
$s->backup('bs');
my $c = PostgreSQL::Test::Cluster->new('rw_cascade');
$c->init_from_backup($s, 'bs', has_streaming => 1);
$c->start;

my $state_is_trajectory = q{SELECT (SELECT phase || '/' || position FROM lake.owner_state('o1'))
	= (SELECT to_phase || '/' || position FROM lake.trajectory('o1') ORDER BY position DESC LIMIT 1)};
sub receipt_of { my ($r) = @_; $r =~ s/^\((\d+),(\d+)\)$/($1,$2)/ or die "not a receipt: $r"; return $r; }

like($p->safe_psql('postgres', "SELECT lake.cast_durable('o1', 'Planning', 'CognitiveWork')"),
	qr/^\(\d+,1,/, 'a durable cast on the primary');
is($p->safe_psql('postgres', "SELECT lake.append('d', 't', 'v1', '\\x01'::bytea)"), '1', 'an append');
my $upto = $p->lsn('insert');
$p->wait_for_catchup($s, 'replay', $upto);
$s->wait_for_catchup($c, 'replay', $upto);

# The standby goes; the primary goes on alone, then crashes.
$s->stop('immediate');
my $lost = receipt_of($p->safe_psql('postgres',
		"SELECT r FROM lake.cast('o1', 'CognitiveWork', 'Evaluation') r"));
$p->safe_psql('postgres', 'SELECT lake.seal()');
is($p->safe_psql('postgres', "SELECT lake.append('d', 't', 'lost-v', '\\x02'::bytea)"), '2',
	'the primary appends alone');
$p->stop('immediate');

# The cascading standby is promoted.
$c->promote;
ok($c->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the promoted cascading standby serves');
is($c->safe_psql('postgres', $state_is_trajectory), 't', 'its owner state is its trajectory');
my ($st) = sql_error($c, "SELECT lake.await_durable('$lost'::lake.receipt)");
is($st, 'LK006', "the lost line's receipt is LK006 there");
is($c->safe_psql('postgres', "SELECT lake.append('d', 't', 'new-v', '\\x03'::bytea)"), '2',
	"the lost line's version number is handed out again");
my $kept = $c->safe_psql('postgres', "SELECT lake.cast_durable('o1', 'CognitiveWork', 'Evaluation')");
like($kept, qr/^\(\d+,2,/, 'a durable cast there takes position 2');
$c->safe_psql('postgres', 'CHECKPOINT');

# The old primary is rewound onto it and follows it.
command_ok(
	[ 'pg_rewind', '-D', $p->data_dir, '--source-server', $c->connstr('postgres') ],
	'pg_rewind of the old primary');
# pg_rewind copied the promoted node's configuration, its port with it.
$p->append_conf('postgresql.conf', 'port = ' . $p->port);
$p->enable_streaming($c);
$p->start;
$c->wait_for_catchup($p);
is($p->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't', 'it follows as a standby');
is($p->safe_psql('postgres',
		"SELECT string_agg(version || ':' || operation_id, ',' ORDER BY version) FROM lake.versions('d')"),
	'1:v1,2:new-v', "it reads the promoted line's versions");

# Promoted back: the promoted line is kept, the lost one stays lost.
$c->stop('immediate');
$p->promote;
ok($p->poll_query_until('postgres', "SELECT worker_state = 'serving' FROM lake.stats()"),
	'the old primary, promoted back, serves');
is($p->safe_psql('postgres', $state_is_trajectory), 't', 'its owner state is its trajectory');
is($p->safe_psql('postgres',
		"SELECT string_agg(position || ':' || to_phase, ',' ORDER BY position) FROM lake.trajectory('o1')"),
	'1:CognitiveWork,2:Evaluation', 'the trajectory of the promoted line');
($st) = sql_error($p, "SELECT lake.await_durable('$lost'::lake.receipt)");
is($st, 'LK006', "the lost line's receipt is still LK006");
my ($kept_cycle, $kept_lsn) = $kept =~ /^\((\d+),2,(\S+)\)$/;
is($p->safe_psql('postgres', "SELECT lsn FROM lake.cycles() WHERE cycle = $kept_cycle"),
	$kept_lsn, "the promoted line's acknowledged cycle is kept, at its coordinate's lsn");
is($p->safe_psql('postgres', 'SELECT coalesce(sum(applied), 0) FROM lake.recover()'),
	'0', 'recovery applies nothing');

$p->stop;
done_testing();
