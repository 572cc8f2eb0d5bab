-- Measurement 4: WAL of lake.append, 256-byte JSON line, into a dataset with a trained dictionary.
\set n :n + 1
SELECT lake.append('wal_256_dict', 't1', 'w256-' || :n, bench.payload256('w256-' || :n));
