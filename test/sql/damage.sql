-- Stored bytes damaged on disk (the decoders fuzzed in test/fuzz) fail
-- closed from SQL: a damaged cycle record is XX001 for every reader, never
-- partial or invented landings. (What recovery does with a damaged cycle or
-- snapshot is in test/t/008_quarantine.pl.)
SELECT lake.create_owner('d_owner');
SELECT (lake.cast_durable('d_owner', 'Planning', 'CognitiveWork', '\x01'::bytea)).cycle AS c \gset
CREATE TABLE t.d_good AS SELECT data FROM lake_data.cycle WHERE cycle = :c;

-- Replace the cycle's bytes, read it every way, put the bytes back.
CREATE FUNCTION t.d_try(bad bytea, c bigint) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text;
BEGIN
    UPDATE lake_data.cycle SET data = bad WHERE cycle = c;
    r := regexp_replace(t.err(format('SELECT count(*) FROM lake.trajectory(%L)', 'd_owner')),
                        'cycle \d+', 'cycle <c>')
         || ' | log: ' || left(t.err(format('SELECT count(*) FROM lake.log(%s)', c - 1)), 5);
    UPDATE lake_data.cycle SET data = (SELECT data FROM t.d_good) WHERE cycle = c;
    RETURN r;
END $$;

-- Well-formed raw chunks (t.raw_chunk: tag and checksum) around damaged
-- landing records: 'L', version 1, a uint32 count, then per landing int32
-- owner, int64 position, seq, lap and a flags byte.
SELECT name, t.d_try(bad, :c) AS refused
FROM (VALUES
    ('empty',               ''::bytea),
    ('unknown tag',         '\x7801'::bytea),
    ('corrupt zstd frame',  '\x5a0000000028b52ffd0000ffff'::bytea),
    ('frame cut short',     substring((SELECT data FROM t.d_good) FROM 1 FOR 12)),
    ('not a landing record',t.raw_chunk('\x68656c6c6f')),
    ('landing version 2',   t.raw_chunk('\x4c0200000000')),
    ('count past the end',  t.raw_chunk('\x4c0101000000')),
    ('landing cut short',   t.raw_chunk('\x4c010100000001000000')),
    ('unknown flags',       t.raw_chunk(('\x4c0101000000' || repeat('00', 28) || '80')::bytea)),
    ('phase past the end',  t.raw_chunk(('\x4c0101000000' || repeat('00', 28) || '01' || 'ffff')::bytea)),
    ('payload past the end',t.raw_chunk(('\x4c0101000000' || repeat('00', 28) || '02' || 'ffffffff')::bytea)),
    ('trailing bytes',      t.raw_chunk('\x4c010000000000'))
) AS cases(name, bad);
-- Put back, the cycle reads as before.
SELECT position, from_phase, to_phase, payload FROM lake.trajectory('d_owner');

DROP FUNCTION t.d_try(bytea, bigint);
DROP TABLE t.d_good;
