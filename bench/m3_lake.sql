-- Measurement 3: replay of a random existing operation with its identical payload.
-- bench.replay_payload() is an IMMUTABLE literal, folded at plan time (bench/setup.sql).
\set i random(1, 100000)
SELECT lake.append('replay', 't1', 'p' || :i, bench.replay_payload());
