-- bench/staged.sh: one staged chunk per transaction: chunk :n of kind :kind,
-- the 1 MB window at offset :n * 4099 of staged.seed's value (the same
-- expression as staged_plain_chunk.sql).
SELECT lake.append_chunk(:stage, :n, (SELECT substring(s.data FROM 1 + (:n * 4099) % (length(s.data) - 1048576) FOR 1048576) FROM staged.seed s WHERE s.kind = :kind));
\set n :n + 1
