-- DUE TIMES. When a long poll's pop comes back empty, the time from which something in its
-- scope may become available to its group without any further write: a lease that runs
-- out, a retry's wait that ends (retryDelay), a partition's window buffer that closes
-- (windowBuffer: no message for that long), the first pending message's delay that ends
-- (delayedProcessing). The poll worker that popped arms a timer for it, so the waiter is
-- offered the message at that time, in whichever process or instance it waits
-- (docs/architecture.md, "Due times"). Everything else that makes messages available is a
-- write that wakes waiters itself (a push, an ack, a release).
--
-- The time is a lower bound: each term is a condition the partition must pass before the
-- pop's claim takes it, so a pop at the due time finds the partition or computes the next
-- due time; nothing is reported that is not after p_now, so a partition whose terms have
-- all passed (but is not available: its newest message is older than maxWaitTimeSeconds,
-- a pop took it) arms no timer. maxWaitTimeSeconds only ever removes messages: a partition
-- whose newest message will be stale by its due time has none.
--
-- p_parts: the pop's partitions in scope; p_group: its consumer group; p_now: the pop's
-- now(). Returns NULL when nothing in scope is due later.
CREATE OR REPLACE FUNCTION queen._pop_due(p_parts uuid[], p_group text, p_now timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
BEGIN
    -- plpgsql, not sql: its plan is cached across calls (a sql function is planned anew).
    RETURN (SELECT min(x.at)
      FROM (SELECT greatest(
                       pc.lease_expires_at,
                       pc.retry_available_at,
                       CASE WHEN q.window_buffer > 0
                            THEN pl.last_message_created_at + make_interval(secs => q.window_buffer)
                       END,
                       CASE WHEN q.delayed_processing > 0
                            THEN (SELECT m.created_at
                                    FROM queen.messages m
                                   WHERE m.partition_id = pl.partition_id
                                     AND (m.created_at, m.id)
                                         > (coalesce(pc.last_consumed_created_at, '-infinity'),
                                            coalesce(pc.last_consumed_id, 0))
                                   ORDER BY m.created_at, m.id
                                   LIMIT 1) + make_interval(secs => q.delayed_processing)
                       END) AS at,
                   q.max_wait_time_seconds AS max_wait,
                   pl.last_message_created_at AS newest
              FROM unnest(p_parts) AS u(pid)  -- key lookups per partition in scope
              JOIN queen.partition_lookup pl ON pl.partition_id = u.pid
              JOIN queen.queues q ON q.id = pl.queue_id
              LEFT JOIN queen.partition_consumers pc
                ON pc.partition_id = u.pid AND pc.consumer_group = p_group
               -- something beyond the group's cursor (a partition it never visited: anything)
             WHERE (pc.partition_id IS NULL
                    OR (pl.last_message_created_at, pl.last_message_id)
                       > (coalesce(pc.last_consumed_created_at, '-infinity'), pc.last_consumed_id))) x
     WHERE x.at > p_now
       AND (x.max_wait <= 0 OR x.at < x.newest + make_interval(secs => x.max_wait)));
END;
$$;
