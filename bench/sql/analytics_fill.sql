-- The (j) bench (bench/analytics.py): a synthetic history of %(minutes)s minutes, ending
-- with the minute before now, for every queue whose name starts with %(prefix)s, the
-- all-queue rollup over them, and 4 server processes. Rows are written minute by minute
-- (every queue's row of a minute next to each other), as the real flushes write them, so
-- one queue's rows are spread over the table as in production. Existing rows are kept.
INSERT INTO queen.metrics_queue_minutes
       (queue_name, minute, pushed, popped, acked, failed, dlq, poll_waits, depth, lag_s,
        group_lag_s)
SELECT q.name, m, (random() * 1000)::int, (random() * 1000)::int, (random() * 900)::int,
       (random() * 20)::int, (random() * 3)::int, (random() * 200)::int,
       (random() * 50000)::bigint, (random() * 120)::real, (random() * 600)::real
  FROM generate_series(date_trunc('minute', now()) - make_interval(mins => %(minutes)s),
                       date_trunc('minute', now()) - interval '1 minute',
                       interval '1 minute') m
 CROSS JOIN (SELECT name FROM queen.queues WHERE starts_with(name, %(prefix)s)) q
 ORDER BY m, q.name
ON CONFLICT DO NOTHING;

INSERT INTO queen.metrics_minutes AS t
       (minute, pushed, popped, acked, failed, dlq, poll_waits, depth, lag_s, group_lag_s)
SELECT minute, sum(pushed), sum(popped), sum(acked), sum(failed), sum(dlq), sum(poll_waits),
       sum(depth), max(lag_s), max(group_lag_s)
  FROM queen.metrics_queue_minutes
 WHERE starts_with(queue_name, %(prefix)s)
 GROUP BY minute
ON CONFLICT (minute) DO UPDATE
   SET pushed = t.pushed + EXCLUDED.pushed, popped = t.popped + EXCLUDED.popped,
       acked = t.acked + EXCLUDED.acked, failed = t.failed + EXCLUDED.failed,
       dlq = t.dlq + EXCLUDED.dlq, poll_waits = t.poll_waits + EXCLUDED.poll_waits,
       depth = greatest(t.depth, EXCLUDED.depth), lag_s = greatest(t.lag_s, EXCLUDED.lag_s),
       group_lag_s = greatest(t.group_lag_s, EXCLUDED.group_lag_s);

INSERT INTO queen.metrics_process_minutes
       (minute, hostname, port, worker_id, cpu_seconds, wall_seconds, rss_bytes, http_requests,
        http_active, pool_in_use, pool_size, pool_waiting, long_polls)
SELECT m, %(prefix)s || 'host', 6632, w::text, random() * 40, 60, 100000000 + (random() * 1e8)::bigint,
       (random() * 50000)::bigint, (random() * 500)::int, (random() * 10)::int, 10, 0,
       (random() * 400)::int
  FROM generate_series(date_trunc('minute', now()) - make_interval(mins => %(minutes)s),
                       date_trunc('minute', now()) - interval '1 minute',
                       interval '1 minute') m
 CROSS JOIN generate_series(1, 4) w
 ORDER BY m, w
ON CONFLICT DO NOTHING;
