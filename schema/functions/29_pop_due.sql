-- DUE TIMES. When a long poll's pop comes back empty, the time from which something in its
-- scope may become available to its group without any further write: a lease that runs
-- out, a retry's wait that ends (retryDelay), a partition's window buffer that closes
-- (windowBuffer: no message for that long), the first pending message's delay that ends
-- (delayedProcessing). The poll worker that popped arms a timer for it, so the waiter is
-- offered the message at that time, in whichever process or instance it waits
-- (docs/architecture.md, "Due times"). Everything else that makes messages available is a
-- write that wakes waiters itself (a push, an ack, a release).
--
-- It is the earliest future available_at of the scope's cursor rows (migration 0019), one
-- probe of the ready index per queue: a lease's expiry, a retry's wait, or the instant a
-- claim parked the row to (the window's end, the first message's delay). A time that turns
-- out early (a window a later push moved on) costs one empty pop, which computes the next.
-- Rows parked until the next push ('infinity') arm no timer.
--
-- p_qids: the pop's queues; p_pid: the partition of a pop of one partition, else NULL;
-- p_group: its consumer group; p_now: the pop's now(). NULL when nothing is due later.
DROP FUNCTION IF EXISTS queen._pop_due(uuid[], text, timestamptz);
CREATE OR REPLACE FUNCTION queen._pop_due(
    p_qids uuid[], p_pid uuid, p_group text, p_now timestamptz
) RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_at timestamptz;
    v_q  uuid;
BEGIN
    IF p_pid IS NOT NULL THEN
        SELECT pc.available_at INTO v_at
          FROM queen.partition_consumers pc
         WHERE pc.partition_id = p_pid AND pc.consumer_group = p_group;
    ELSE
        FOREACH v_q IN ARRAY p_qids LOOP  -- one probe per queue (as _pop_candidates)
            v_at := least(v_at, (SELECT pc.available_at
                                   FROM queen.partition_consumers pc
                                  WHERE pc.queue_id = v_q AND pc.consumer_group = p_group
                                    AND pc.available_at > p_now
                                  ORDER BY pc.available_at
                                  LIMIT 1));
        END LOOP;
    END IF;
    RETURN CASE WHEN v_at > p_now AND v_at < 'infinity' THEN v_at END;
END;
$$;
