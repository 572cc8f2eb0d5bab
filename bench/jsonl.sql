-- bench/jsonl.sql — included (\ir) by bench/setup.sql and
-- bench/staged_setup.sql, which set search_path to their own schema first.
-- About 'target' bytes of realistic JSON lines (application log events):
-- repeated keys, enumerated values, timestamps, random trace ids.
CREATE FUNCTION jsonl(seed int, target int) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT left(string_agg(format(
    '{"ts":"%s","level":"%s","service":"%s","trace_id":"%s","user_id":%s,"path":"/api/v1/orders/%s","status":%s,"latency_ms":%s,"msg":"%s"}',
    to_char(timestamp '2024-05-01' + (seed * 100000 + i) * interval '37 ms',
            'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    (ARRAY['info','info','info','warn','error','debug'])[1 + abs(hashint4(seed * 7919 + i)) % 6],
    (ARRAY['checkout','orders','inventory','billing','auth'])[1 + abs(hashint4(seed * 31 + i)) % 5],
    substr(md5((seed * 1000003 + i)::text), 1, 16),
    abs(hashint4(i * 13 + seed)) % 100000,
    abs(hashint4(i * 17 + seed)) % 1000000,
    (ARRAY[200,200,200,201,204,400,404,500])[1 + abs(hashint4(i * 19 + seed)) % 8],
    abs(hashint4(i * 23 + seed)) % 2000,
    (ARRAY['order created','payment authorized','item reserved','cache miss',
           'retrying upstream call','request completed'])[1 + abs(hashint4(i * 29 + seed)) % 6]),
    E'\n'), target - 1) || E'\n'
  FROM generate_series(1, target / 150) AS i
$$;
