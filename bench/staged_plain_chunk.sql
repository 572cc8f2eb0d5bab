-- bench/staged.sh baseline: the same chunk as a plain bytea row, one per transaction.
INSERT INTO staged.plain_chunk (upload, chunk_no, data) VALUES ('u' || :upload, :n, (SELECT substring(s.data FROM 1 + (:n * 4099) % (length(s.data) - 1048576) FOR 1048576) FROM staged.seed s WHERE s.kind = :kind));
\set n :n + 1
