-- LEASE RENEW: {leaseId, seconds|null}. Extends every live partition_consumers row holding
-- the lease to greatest(current expiry, now + seconds); seconds NULL / missing = the queue's
-- lease time (60 when it is 0).
-- Returns {leaseId, success, renewed, newExpiresAt, expiresAt, error, known} (timestamps ms
-- ISO with Z): `renewed` counts the (partition, group) rows extended (a multi-partition pop
-- holds one lease on each). When nothing was extended, `known` says whether the server
-- still remembers the lease (expired, or freed by an ack or a release: 0011_client26_core.sql)
-- or never handed it out; the HTTP layer answers 200 for the first and 404 for the second.
CREATE OR REPLACE FUNCTION queen.renew_lease_v3(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql
-- Generic plans: these statements are cheap to run but costly to re-plan on every call.
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN queen._renew_lease(p, NULL);
END;
$$;

-- The same for a lease the caller knows to be held on the partition p_pid only (the server
-- remembers the partition of the leases its pops gave out): on Citus a distributed function
-- delegated by p_pid (schema/citus/40_delegate.sql), run on the worker that holds the
-- partition in one round trip. As text.
CREATE OR REPLACE FUNCTION queen.renew_partition_v1(p_pid uuid, p jsonb)
RETURNS text
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN queen._renew_lease(p, p_pid)::text;
END;
$$;

-- The renewal: each (partition, group) row holding the lease (on p_pid only when given),
-- one statement per partition (on Citus each on the worker that holds the partition).
CREATE OR REPLACE FUNCTION queen._renew_lease(p jsonb, p_pid uuid)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_now     timestamptz := now();
    -- now() in UTC: the new expiry is computed with immutable operators only (Citus runs
    -- the UPDATE on the workers and refuses a stable one that reads a column)
    v_base    timestamp := now() AT TIME ZONE 'UTC';
    v_lease   uuid := queen._try_uuid(p ->> 'leaseId');
    v_seconds integer := queen._jint(p -> 'seconds', NULL);
    v_pids    uuid[];
    v_pid     uuid;
    v_max     timestamptz;
    v_n       integer;
    v_expires timestamptz;
    v_count   integer := 0;
    v_ts      text;
BEGIN
    IF v_seconds IS NOT NULL AND v_seconds <= 0 THEN
        v_seconds := NULL;
    END IF;
    IF v_lease IS NOT NULL THEN
        v_pids := CASE WHEN p_pid IS NOT NULL THEN ARRAY[p_pid]
                       ELSE ARRAY(SELECT DISTINCT pc.partition_id
                                    FROM queen.partition_consumers pc
                                   WHERE pc.lease_id = v_lease AND pc.lease_expires_at > v_now)
                  END;
        FOREACH v_pid IN ARRAY v_pids LOOP
            WITH upd AS (
                UPDATE queen.partition_consumers pc
                   SET lease_expires_at = greatest(
                           pc.lease_expires_at,
                           (v_base + make_interval(secs => coalesce(v_seconds, nullif(q.lease_time, 0), 60)))
                               AT TIME ZONE 'UTC')
                  FROM queen.partitions pt
                  JOIN queen.queues q ON q.id = pt.queue_id
                 WHERE pc.partition_id = v_pid
                   AND pc.lease_id = v_lease
                   AND pc.lease_expires_at > v_now
                   AND pt.id = pc.partition_id
                RETURNING pc.lease_expires_at
            )
            SELECT max(lease_expires_at), count(*) INTO v_max, v_n FROM upd;
            v_expires := greatest(v_expires, v_max);
            v_count := v_count + v_n;
        END LOOP;
    END IF;
    IF v_expires IS NULL THEN
        RETURN jsonb_build_object(
            'leaseId', p ->> 'leaseId', 'success', false, 'renewed', 0,
            'newExpiresAt', NULL, 'expiresAt', NULL,
            'error', 'Lease not renewed: it expired, was released by an ack or nack, or does not exist',
            'known', v_lease IS NOT NULL AND EXISTS (
                SELECT 1 FROM queen.partition_consumers pc
                 WHERE pc.lease_id = v_lease OR pc.last_lease_id = v_lease));
    END IF;
    v_ts := queen._iso_ms(v_expires);
    RETURN jsonb_build_object('leaseId', v_lease::text, 'success', true, 'renewed', v_count,
                              'newExpiresAt', v_ts, 'expiresAt', v_ts, 'error', NULL,
                              'known', true);
END;
$$;

-- The earlier answer, kept for SQL callers during a deploy: v3 without renewed/known.
CREATE OR REPLACE FUNCTION queen.renew_lease_v2(p jsonb)
RETURNS jsonb
LANGUAGE sql AS $$
    SELECT r - 'renewed' - 'known'
           || CASE WHEN (r ->> 'success')::boolean THEN '{}'::jsonb
                   ELSE jsonb_build_object('error', 'Lease not found or expired') END
      FROM queen.renew_lease_v3(p) AS r
$$;
