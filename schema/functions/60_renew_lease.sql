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
DECLARE
    v_now     timestamptz := now();
    -- now() in UTC: the new expiry is computed with immutable operators only (Citus runs
    -- the UPDATE on the workers and refuses a stable one that reads a column)
    v_base    timestamp := now() AT TIME ZONE 'UTC';
    v_lease   uuid := queen._try_uuid(p ->> 'leaseId');
    v_seconds integer := queen._jint(p -> 'seconds', NULL);
    v_expires timestamptz;
    v_count   integer := 0;
    v_ts      text;
BEGIN
    IF v_seconds IS NOT NULL AND v_seconds <= 0 THEN
        v_seconds := NULL;
    END IF;
    IF v_lease IS NOT NULL THEN
        WITH upd AS (
            UPDATE queen.partition_consumers pc
               SET lease_expires_at = greatest(
                       pc.lease_expires_at,
                       (v_base + make_interval(secs => coalesce(v_seconds, nullif(q.lease_time, 0), 60)))
                           AT TIME ZONE 'UTC')
              FROM queen.partitions pt
              JOIN queen.queues q ON q.id = pt.queue_id
             WHERE pc.lease_id = v_lease
               AND pc.lease_expires_at > v_now
               AND pt.id = pc.partition_id
            RETURNING pc.lease_expires_at
        )
        SELECT max(lease_expires_at), count(*) INTO v_expires, v_count FROM upd;
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
