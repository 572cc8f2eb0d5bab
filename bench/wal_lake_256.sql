-- Measurement 4: WAL of lake.append, 256-byte JSON line.
\set n :n + 1
SELECT lake.append('wal_256', 't1', 'w256-' || :n, bench.payload256('w256-' || :n));
