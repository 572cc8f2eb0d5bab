-- The background worker: registered, connected to lake.database, visible.
SELECT backend_type, datname FROM pg_stat_activity WHERE backend_type = 'lake worker';
SELECT database, worker_pid = (SELECT pid FROM pg_stat_activity WHERE backend_type = 'lake worker') AS pid_matches,
       worker_starts >= 1 AS started
FROM lake.stats();
