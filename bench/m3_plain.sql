-- Measurement 3 baseline: plain unique-key lookup of the same operation.
\set i random(1, 100000)
SELECT 1 FROM bench.plain_replay WHERE tenant = 't1' AND operation_id = 'p' || :i;
