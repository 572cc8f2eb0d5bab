-- Measurement 4: WAL of lake.append, 64 kB of JSON lines (+ one line naming the operation).
\set n :n + 1
\set d :n % 20
SELECT lake.append('wal_64k', 't1', 'w64k-' || :n, convert_to('{"op":"w64k-' || :n || '"}' || chr(10), 'UTF8') || (SELECT x.body FROM bench.doc x WHERE x.id = :d));
