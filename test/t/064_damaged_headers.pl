# Damaged varlena headers and over-long names in lake's rows (SPEC §5: a
# damaged record is XX001 or a quarantine, never a crash or different
# data). PostgreSQL's detoasting trusts the header it reads from a page:
# - a cycle record's TOAST pointer turned into an in-memory one (indirect)
#   was followed by the worker's recovery: SIGSEGV, and the server
#   restarted, recovered and crashed again, in a loop;
# - a compressed header whose size lies, or a TOAST pointer to a relation
#   that is not there, failed every recovery (XX000, every second), with
#   every owner unavailable.
# Now each is that cycle's damage: its owner is quarantined, the others
# are served. And a name or tenant in lake_data.owner longer than lake
# writes (by hand) was cut to 63 bytes: two owners shared one state, or an
# owner moved into another tenant. Now it is XX001. And a receipt of a past
# epoch whose last cycle row was altered was called lost (LK006, "cast it
# again"); it is XX001.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakeTAP;

my $node = lake_node('headers', conf => "lake.checkpoint_cycles = 1000000\n");
$node->start;

sub psql { return $node->safe_psql('postgres', $_[0]); }

my $serving = "SELECT worker_state = 'serving' FROM lake.stats()";

sub state_of
{
	my ($o) = @_;
	return psql("SELECT coalesce(quarantine_reason, 'live') FROM lake_data.owner WHERE name = '$o'");
}

sub read_at
{
	my ($file, $offset, $n) = @_;
	open(my $fh, '<', $file) or die "open $file: $!";
	binmode $fh;
	seek($fh, $offset, 0) or die;
	read($fh, my $bytes, $n) == $n or die;
	close $fh;
	return $bytes;
}

# Stops the server, edits the tuple of the row of 'table' where 'where'
# holds with 'edit' (given the tuple's bytes to the end of its page,
# returning them changed), starts it: where the log stood.
sub damage_row
{
	my ($table, $where, $edit) = @_;
	psql('CHECKPOINT');
	my ($file, $off) = tuple_at($node, $table, $where);
	$node->stop;
	poke($file, $off, $edit->(read_at($file, $off, 8192 - $off % 8192)));
	my $from = -s $node->logfile;
	$node->start;
	return $from;
}

sub damage_cycle
{
	my ($cycle, $edit) = @_;
	return damage_row('lake_data.cycle', "cycle = $cycle", $edit);
}

# 'tuple' with the bytes 'old' (found once) replaced by as many 'new' ones.
sub replaced
{
	my ($tuple, $old, $new) = @_;
	my $at = index($tuple, $old);
	die 'bytes not found in the tuple' if $at < 0;
	die 'a replacement must keep the length' if length($new) != length($old);
	substr($tuple, $at, length($old)) = $new;
	return $tuple;
}

# Random bytes of n md5s: 16 kB (1000) are stored out of line.
sub md5s { return "(SELECT decode(string_agg(md5(i::text), ''), 'hex') FROM generate_series(1, $_[0]) i)"; }

# Two new owners, each cast to durably in a cycle of its own, the first
# with 'payload': the first one's cycle.
sub cycle_pair
{
	my ($x, $y, $payload) = @_;
	psql("SELECT lake.create_owner('$x'), lake.create_owner('$y')");
	psql("SELECT lake.cast_durable('$x', 'Planning', 'CognitiveWork', $payload)");
	psql("SELECT lake.cast_durable('$y', 'Planning', 'CognitiveWork')");
	return psql("SELECT cycle FROM lake.trajectory('$x')");
}

psql('CREATE EXTENSION lake; CREATE EXTENSION pageinspect');
my $toastrel = psql("SELECT reltoastrelid::int FROM pg_class WHERE oid = 'lake_data.cycle'::regclass");

# Where the cycle record's TOAST pointer starts in the tuple: its 1-byte
# header and on-disk tag, then sizes, value id and the TOAST relation.
sub pointer_at
{
	my ($tuple) = @_;
	my $at = -1;
	while (($at = index($tuple, "\x01\x12", $at + 1)) >= 0)
	{
		return $at if substr($tuple, $at + 14, 4) eq pack('V', $toastrel);
	}
	die 'no TOAST pointer to the cycle table in the tuple';
}

# Cycle 'c' with 'bytes' written at 'offset' of its record's TOAST
# pointer: where the log stood.
sub damage_pointer
{
	my ($c, $offset, $bytes) = @_;
	return damage_cycle(
		$c,
		sub {
			my ($t) = @_;
			substr($t, pointer_at($t) + $offset, length($bytes)) = $bytes;
			return $t;
		});
}

# The worker recovers over cycle 'c' damaged as 'what': owner 'x' of it is
# quarantined with the reason 'why', owner 'y' of another cycle is live.
sub contained
{
	my ($c, $x, $y, $why, $what) = @_;
	ok($node->poll_query_until('postgres', $serving), "the worker recovers over $what");
	like(state_of($x), qr/cycle $c is damaged: .*$why/, "$x is quarantined, the reason named");
	is(state_of($y), 'live', "$y, of another cycle, is not");
}

# 1. The pointer's tag made indirect (a pointer into memory): the
# smallint after it moved to where the shorter pointer puts it.
my $c1 = cycle_pair('i1', 'i2', md5s(1000));
my $from = damage_cycle(
	$c1,
	sub {
		my ($t) = @_;
		my $at = pointer_at($t);
		my $enc = ($at + 18) % 2 ? $at + 19 : $at + 18;
		my $to = ($at + 10) % 2 ? $at + 11 : $at + 10;
		substr($t, $to, 2) = substr($t, $enc, 2);
		substr($t, $at + 1, 1) = "\x01";
		return $t;
	});
contained($c1, 'i1', 'i2', 'its stored bytes are unreadable: its TOAST pointer is of a kind no table stores',
	'a record whose pointer is into memory');
is(psql("SELECT phase || '/' || position FROM lake.owner_state('i2')"), 'CognitiveWork/1', 'and has its landing');
my ($state) = sql_error($node, "SELECT count(*) FROM lake.log(0)");
is($state, 'XX001', 'a read of the log through it is XX001');
unlike(slurp_file($node->logfile, $from), qr/terminated by signal/, 'no process crashed');

# 2. The pointer's TOAST relation one that is not there.
my $c2 = cycle_pair('r1', 'r2', md5s(1000));
$from = damage_pointer($c2, 14, pack('V', 4000000000));
contained($c2, 'r1', 'r2', 'names a relation that is not a TOAST table', 'a pointer to no relation');
unlike(slurp_file($node->logfile, $from), qr/could not open relation/, 'no failed recovery');

# 3. An inline record (a 4-byte header) marked compressed, its size 1 GB.
my $c3 = cycle_pair('z1', 'z2', md5s(20));
my $data = psql("SELECT encode(substr(data, 1, 16), 'hex') FROM lake_data.cycle WHERE cycle = $c3");
my $len = psql("SELECT octet_length(data) FROM lake_data.cycle WHERE cycle = $c3");
cmp_ok($len, '>', 126, 'the record has a 4-byte header');
$from = damage_cycle(
	$c3,
	sub {
		my ($t) = @_;
		my $at = index($t, pack('V', ($len + 4) << 2) . pack('H*', $data));
		die 'record not found in the tuple' if $at < 0;
		substr($t, $at, 8) = pack('V', (($len + 4) << 2) | 2) . pack('V', 0x3FFFFFFF);
		return $t;
	});
contained($c3, 'z1', 'z2', 'its compressed header is impossible', 'a compressed size that lies');
unlike(slurp_file($node->logfile, $from), qr/invalid memory alloc request size/, 'nothing allocated by it');

# 4. Names and tenants longer than lake writes, put in by hand: XX001,
# never a name cut short.
my $x63 = 'x' x 63;
psql("SELECT lake.create_owner('$x63')");
psql("SELECT lake.cast_durable('$x63', 'Planning', 'CognitiveWork')");
psql("INSERT INTO lake_data.owner (name, lifecycle, tenant) "
	  . "SELECT '${x63}yyy', lifecycle, tenant FROM lake_data.owner WHERE name = '$x63'");
my $msg;
($state, $msg) = sql_error($node, 'SELECT count(*) FROM lake.recover()');
is("$state $msg", 'XX001 a row of lake_data.owner is damaged', 'the registry read is XX001');
psql("DELETE FROM lake_data.owner WHERE name = '${x63}yyy'");
is(psql("SELECT position FROM lake.owner_state('$x63')"), '1', 'the owner it would have shared a state with is whole');

psql('CREATE ROLE t63 LOGIN; GRANT USAGE ON SCHEMA lake TO t63');
my $t63 = 'T' x 63;
psql("SELECT lake.grant_tenant('t63', '$t63')");
psql("INSERT INTO lake_data.owner (name, lifecycle, tenant) "
	  . "SELECT 'victim', lifecycle, '${t63}Z' FROM lake_data.owner WHERE name = '$x63'");
($state, $msg) = sql_error($node, "SET ROLE t63; SELECT lake.cast('victim', 'Planning', 'CognitiveWork')");
is("$state $msg", 'XX001 a row of lake_data.owner is damaged', "a cast by the role of the cut tenant is XX001");
psql("DELETE FROM lake_data.owner WHERE name = 'victim'");

# 5. A past epoch's last cycle row, its range cut short or moved to a later
# epoch: no row of the epoch reaches the receipt any more, and it was
# called lost (LK006, "cast it again": a second cast of a durable step).
psql("SELECT lake.create_owner('e1'), lake.create_owner('e2')");
psql("SELECT lake.cast_durable('e1', 'Planning', 'CognitiveWork')");
my ($e, $s, $ce) = split /\|/, psql("SELECT (r).epoch, (r).seq, (lake.await_durable(r)).cycle FROM "
	  . "(SELECT lake.cast('e1', 'CognitiveWork', 'Evaluation') r) x");
restart_recovered($node) or die 'the worker did not recover';
cmp_ok(psql('SELECT max(epoch) FROM lake_data.cycle') + 0, '<=', $e, 'no cycle of a later epoch yet');
psql("SELECT lake.cast_durable('e2', 'Planning', 'CognitiveWork')");
isnt(psql("SELECT epoch FROM lake_data.cycle WHERE cycle = $ce + 1"), $e, 'the next cycle is of a later epoch');
my $await = "SELECT (lake.await_durable(ROW($e, $s)::lake.receipt)).cycle";
is(psql($await), $ce, "receipt ($e,$s) is in cycle $ce, the last of its epoch");
psql("UPDATE lake_data.cycle SET last_seq = last_seq - 1 WHERE cycle = $ce");
($state, $msg) = sql_error($node, $await);
is("$state $msg", "XX001 cycle $ce is damaged", 'its range cut short: XX001, not lost');
psql("UPDATE lake_data.cycle SET last_seq = last_seq + 1, epoch = epoch + 1000 WHERE cycle = $ce");
($state, $msg) = sql_error($node, $await);
is("$state $msg", "XX001 cycle $ce is damaged", 'moved to a later epoch: XX001, not lost');
psql("UPDATE lake_data.cycle SET epoch = $e WHERE cycle = $ce");
is(psql($await), $ce, 'put back, the receipt is found');

# 6. The same of an epoch with one cycle row: moved up or down, no row of
# the epoch is left to start from; the rows at its edges are read.
restart_recovered($node) or die 'the worker did not recover';
psql("SELECT lake.create_owner('e3')");
($e, $s, $ce) = split /\|/, psql("SELECT (r).epoch, (r).seq, (lake.await_durable(r)).cycle FROM "
	  . "(SELECT lake.cast('e3', 'Planning', 'CognitiveWork') r) x");
restart_recovered($node) or die 'the worker did not recover';
is(psql("SELECT count(*) FROM lake_data.cycle WHERE epoch = $e"), '1', "epoch $e has one cycle row");
$await = "SELECT (lake.await_durable(ROW($e, $s)::lake.receipt)).cycle";
for my $moved ('epoch + 1000', 'epoch - 1')
{
	psql("UPDATE lake_data.cycle SET epoch = $moved WHERE cycle = $ce");
	($state, $msg) = sql_error($node, $await);
	is("$state $msg", "XX001 cycle $ce is damaged", "the epoch's one row moved ($moved): XX001, not lost");
	psql("UPDATE lake_data.cycle SET epoch = $e WHERE cycle = $ce");
}
is(psql($await), $ce, 'put back, the receipt is found');

# 7. A version row whose last column's length runs past the row (its
# digest's 1-byte header made to claim 126 bytes): read by position, the
# bytes after the row were taken for it. XX001 at the read.
psql("SELECT lake.create_dataset('hd')");
psql("SELECT lake.append('hd', 't', 'op-hd', '\\x0102'::bytea)");
my $digest = psql("SELECT encode(sha256('\\x0102'::bytea), 'hex')");
damage_row('lake_data.version', "operation_id = 'op-hd'",
	sub { return replaced($_[0], pack('C', (32 + 1) << 1 | 1) . pack('H*', $digest), pack('C', 0xFF) . pack('H*', $digest)); });
($state, $msg) = sql_error($node, "SELECT lake.read('hd', 1)");
is("$state $msg", 'XX001 a row of lake_data.version is damaged', 'a read of it is XX001');
my (undef, undef, $err) = $node->psql('postgres', "SELECT lake.read('hd', 1)");
like($err, qr/DETAIL:  Its column "digest" is unreadable: it reaches past its row/, '... naming the column');

# An in-memory pointer (indirect, 10 bytes: its tag and an address) in
# place of a 9-byte id and its 1-byte header: the row keeps its layout.
my $indirect = "\x01\x01" . pack('Q<', 16);
sub id_header { return pack('C', (length($_[0]) + 1) << 1 | 1) . $_[0]; }
my $no_kind = 'its TOAST pointer is of a kind no table stores';

# 8. A version row's operation id, read by the operation's look-up (a
# retry of its append), not by a whole-row read: followed, the pointer
# was a SIGSEGV of the backend.
psql("SELECT lake.create_dataset('h8')");
psql("SELECT lake.append('h8', 't', 'op-abcdef', '\\x08'::bytea)");
damage_row('lake_data.version', "operation_id = 'op-abcdef'",
	sub { return replaced($_[0], id_header('op-abcdef'), $indirect); });
my $log_at = -s $node->logfile;
($state, $msg) = sql_error($node, "SELECT lake.append('h8', 't', 'op-abcdef', '\\x08'::bytea)");
is("$state $msg", "XX001 a row of lake's tables is damaged", "the operation's look-up is XX001");
(undef, undef, $err) = $node->psql('postgres', "SELECT lake.append('h8', 't', 'op-abcdef', '\\x08'::bytea)");
like($err, qr/DETAIL:  Its column "operation_id" is unreadable: $no_kind/, '... naming the column and the damage');

# 9. A stage row's operation id, read through SPI (every append_chunk and
# commit_append reads the stage's row first).
my $stage = psql("SELECT lake.begin_append('h8', 't', 'st-abcdef')");
damage_row('lake_data.stage', "id = $stage",
	sub { return replaced($_[0], id_header('st-abcdef'), $indirect); });
(undef, undef, $err) = $node->psql('postgres', "SELECT lake.append_chunk($stage, 0, '\\x09'::bytea)");
like($err, qr/ERROR:  a row of lake's tables is damaged\nDETAIL:  Its column "operation_id" is unreadable: $no_kind/,
	'a chunk for a stage whose row is damaged is refused, naming the column');
unlike(slurp_file($node->logfile, $log_at), qr/terminated by signal/, 'no backend crashed');

# 10. An owner renamed by hand past what lake writes: lake.log names the
# owners of its landings one by one, and cut the name to 63 bytes.
psql("SELECT lake.create_owner('n10')");
psql("SELECT lake.cast_durable('n10', 'Planning', 'CognitiveWork')");
# From its cycle on: the earlier cases' damaged cycles are not read.
my $after = psql("SELECT cycle - 1 FROM lake.trajectory('n10')");
psql("UPDATE lake_data.owner SET name = repeat('n', 66) WHERE name = 'n10'");
($state, $msg) = sql_error($node, "SELECT owner FROM lake.log($after) WHERE owner LIKE 'nnn%'");
is("$state $msg", 'XX001 a row of lake_data.owner is damaged', 'a log naming it is XX001, not a name cut short');
psql("UPDATE lake_data.owner SET name = 'n10' WHERE name = repeat('n', 66)");
is(psql("SELECT count(*) FROM lake.log($after) WHERE owner = 'n10'"), '1', 'renamed back, the log names it');

# 11 and 12. The cycle record's TOAST pointer with a size no value has,
# then marked compressed by a method there is none of: each that cycle's
# damage (followed, the size was an allocation refused with XX000, every
# recovery, every second).
my $c11 = cycle_pair('s1', 's2', md5s(1000));
$from = damage_pointer($c11, 2, pack('V', 0x7FFFFFF0));
contained($c11, 's1', 's2', 'its TOAST pointer gives impossible sizes', 'a pointer whose size is impossible');
unlike(slurp_file($node->logfile, $from), qr/invalid memory alloc request size/, 'nothing allocated by it');

my $c12 = cycle_pair('m1', 'm2', md5s(1000));
$from = damage_cycle(
	$c12,
	sub {
		my ($t) = @_;
		my $at = pointer_at($t);
		my $raw = unpack('V', substr($t, $at + 2, 4));
		substr($t, $at + 6, 4) = pack('V', (3 << 30) | ($raw - 4 - 1));
		return $t;
	});
contained($c12, 'm1', 'm2', 'its TOAST pointer names an unknown compression method',
	'an unknown compression method');

$node->stop;
done_testing();
