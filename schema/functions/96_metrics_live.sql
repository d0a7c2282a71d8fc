-- LIVE analytics counts (migration 0018): one worker process's counts not flushed yet.
-- Input: {hostname, port, workerId, queues: [{queue, minute, pushed, popped, acked, failed,
-- dlq, pollWaits}]} (the flush's `queues` shape); an empty `queues` deletes the row.
-- Also deletes the rows of processes that stopped writing 10 minutes ago.
CREATE OR REPLACE FUNCTION queen.metrics_live_v1(p jsonb)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF jsonb_array_length(coalesce(p -> 'queues', '[]')) = 0 THEN
        DELETE FROM queen.metrics_live
         WHERE hostname = p ->> 'hostname' AND port = (p ->> 'port')::integer
           AND worker_id = p ->> 'workerId';
    ELSE
        INSERT INTO queen.metrics_live AS t (hostname, port, worker_id, queues, updated_at)
        VALUES (p ->> 'hostname', (p ->> 'port')::integer, p ->> 'workerId', p -> 'queues', now())
        ON CONFLICT (hostname, port, worker_id) DO UPDATE
           SET queues = EXCLUDED.queues, updated_at = EXCLUDED.updated_at;
    END IF;
    DELETE FROM queen.metrics_live WHERE updated_at < now() - interval '10 minutes';
END;
$$;

-- The live rows as flush rows ({queue, minute, counts}), skipping those of processes that
-- stopped writing 10 minutes ago (the chart statements add them to the flushed minutes).
CREATE OR REPLACE FUNCTION queen._metrics_live_rows()
RETURNS TABLE (queue_name text, minute timestamptz, pushed integer, popped integer,
               acked integer, failed integer, dlq integer, poll_waits integer)
LANGUAGE sql STABLE AS $$
    SELECT r.queue_name, r.minute, r.pushed, r.popped, r.acked, r.failed, r.dlq, r.poll_waits
      FROM queen.metrics_live l
     CROSS JOIN LATERAL queen._metrics_flush_rows(jsonb_build_object('queues', l.queues)) r
     WHERE l.updated_at >= now() - interval '10 minutes'
$$;
