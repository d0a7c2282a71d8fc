-- QUEEN'S SQL API: the utilities (configure, seek, delete_consumer_group, lag, depth,
-- has_messages) over the HTTP face's functions (configure_queue_v1, seek_consumer_group_v1,
-- delete_consumer_group_v1) and the admin's counting (queen._messages_after,
-- queen._subscription_start). The rest of the API: 92_sql_api.sql; docs/sql.md.

-- Creates or updates a queue: the options not named go back to their defaults, as the HTTP
-- configure does; encryption, which SQL cannot set, stays as it is. True when done (false:
-- no queue name).
CREATE OR REPLACE FUNCTION queen.configure(
    queue text, lease_time integer DEFAULT 300, retry_limit integer DEFAULT 3,
    dead_letter_queue boolean DEFAULT false
) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp AS $$
BEGIN
    RETURN (queen.configure_queue_v1(jsonb_build_object(
        'queue', $1,
        'options', jsonb_build_object(
            'leaseTime', coalesce($2, 300), 'retryLimit', coalesce($3, 3),
            'deadLetterQueue', coalesce($4, false),
            'encryptionEnabled', coalesce((SELECT q.encryption_enabled FROM queen.queues q
                                            WHERE q.name = $1), false))))
            ->> 'configured')::boolean;
END;
$$;
REVOKE ALL ON FUNCTION queen.configure(text, integer, integer, boolean) FROM PUBLIC;

-- Moves the group's cursor on every partition of the queue (as the HTTP seek: a partition
-- it never read gets one) to the newest message (to_end) or to the last one at or before
-- to_timestamp, dropping its leases and retry waits. False when neither target is given or
-- the queue has no partition.
CREATE OR REPLACE FUNCTION queen.seek(
    consumer_group text, queue text, to_end boolean DEFAULT false,
    to_timestamp timestamptz DEFAULT NULL
) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp SET queen.commit_wakes = 'on' AS $$
BEGIN
    IF NOT coalesce($3, false) AND $4 IS NULL THEN
        RETURN false;
    END IF;
    RETURN (queen.seek_consumer_group_v1(jsonb_build_object(
        'consumerGroup', $1, 'queue', $2, 'toEnd', coalesce($3, false),
        'timestamp', queen._iso_us($4))) ->> 'partitionsUpdated')::integer > 0;
END;
$$;
REVOKE ALL ON FUNCTION queen.seek(text, text, boolean, timestamptz) FROM PUBLIC;

-- Deletes a group's cursors (of one queue, or of all), and its subscription records with
-- delete_metadata. True when something was deleted.
CREATE OR REPLACE FUNCTION queen.delete_consumer_group(
    consumer_group text, queue text DEFAULT NULL, delete_metadata boolean DEFAULT true
) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp AS $$
BEGIN
    RETURN (SELECT d.cursors + d.metadata > 0
          FROM queen.delete_consumer_group_v1($1, $2, coalesce($3, true)) d);
END;
$$;
REVOKE ALL ON FUNCTION queen.delete_consumer_group(text, text, boolean) FROM PUBLIC;

-- A group's backlog in a queue, partition by partition: the messages after its cursor
-- (those acked out of order left out; leased ones counted), or, where it has no cursor yet,
-- after where its first pop would start it (a named group's recorded subscription, else
-- the beginning). p_first: stop at the first partition with a message the group may take
-- now (not leased by it) and answer 1 (has_messages), else 0.
CREATE OR REPLACE FUNCTION queen._sql_backlog(p_queue text, p_group text, p_first boolean)
RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_group text := coalesce(nullif(p_group, ''), '__QUEUE_MODE__');
    q       queen.queues;
    r       record;
    c       record;
    v_ts    timestamptz;
    v_id    bigint;
    v_n     bigint;
    v_total bigint := 0;
BEGIN
    SELECT * INTO q FROM queen.queues WHERE name = p_queue;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    FOR r IN SELECT p.id, p.name FROM queen.partitions p WHERE p.queue_id = q.id LOOP
        -- (by the partition's key: on Citus a statement on the node that holds it)
        SELECT pc.last_consumed_created_at AS ts, pc.last_consumed_id AS id,
               coalesce(cardinality(pc.acked_ids), 0) AS acked,
               coalesce(pc.lease_expires_at > now(), false) AS leased
          INTO c
          FROM queen.partition_consumers pc
         WHERE pc.partition_id = r.id AND pc.consumer_group = v_group;
        IF FOUND THEN
            v_ts := coalesce(c.ts, '-infinity');
            v_id := c.id;
        ELSE
            v_ts := CASE WHEN v_group <> '__QUEUE_MODE__'
                         THEN queen._subscription_start(v_group, q.name, r.name, q.namespace,
                                                        q.task) END;
            v_id := CASE WHEN v_ts IS NULL THEN 0 ELSE 9223372036854775807 END;
            v_ts := coalesce(v_ts, '-infinity');
        END IF;
        SELECT greatest(s.n - coalesce(c.acked, 0), 0) INTO v_n
          FROM queen._messages_after(r.id, v_ts, v_id) s;
        IF p_first AND v_n > 0 AND NOT coalesce(c.leased, false) THEN
            RETURN 1;
        END IF;
        v_total := v_total + v_n;
    END LOOP;
    RETURN CASE WHEN p_first THEN 0 ELSE v_total END;
END;
$$;

CREATE OR REPLACE FUNCTION queen.lag(queue text, consumer_group text DEFAULT '__QUEUE_MODE__')
RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp AS $$
BEGIN
    RETURN queen._sql_backlog($1, $2, false);
END;
$$;
REVOKE ALL ON FUNCTION queen.lag(text, text) FROM PUBLIC;

-- depth: another name of lag (the contract has both).
CREATE OR REPLACE FUNCTION queen.depth(queue text, consumer_group text DEFAULT '__QUEUE_MODE__')
RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp AS $$
BEGIN
    RETURN queen.lag($1, $2);
END;
$$;
REVOKE ALL ON FUNCTION queen.depth(text, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION queen.has_messages(
    queue text, consumer_group text DEFAULT '__QUEUE_MODE__'
) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = queen_clock, pg_catalog, pg_temp AS $$
BEGIN
    RETURN queen._sql_backlog($1, $2, true) > 0;
END;
$$;
REVOKE ALL ON FUNCTION queen.has_messages(text, text) FROM PUBLIC;
