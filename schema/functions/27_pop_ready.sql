-- THE READY INDEX (migration 0019): how a pop finds the partitions its group may take now
-- without looking at the others. Each step is a function of its own so that a pop reads
-- as its steps (30_pop.sql), and so that "find candidates, then lease each one" stays two
-- steps: on a cluster whose partitions live on several nodes, the candidates come from
-- every node and each claim runs on the node that holds its partition.

-- The queues a pop reads (a queue by name, or every queue of a namespace and/or task), and
-- for a pop of one partition that partition (NULL queue list when it has no message yet).
CREATE OR REPLACE FUNCTION queen._pop_scope(
    p_queue text, p_part text, p_ns text, p_task text,
    OUT queue_ids uuid[], OUT partition_id uuid
) LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_queue IS NOT NULL THEN
        SELECT array_agg(q.id) INTO queue_ids FROM queen.queues q WHERE q.name = p_queue;
        IF queue_ids IS NOT NULL AND p_part IS NOT NULL THEN
            SELECT p.id INTO partition_id
              FROM queen.partitions p
             WHERE p.queue_id = queue_ids[1] AND p.name = p_part;
            -- (by its id: on Citus a statement on the one worker that holds it)
            PERFORM 1 FROM queen.partition_lookup pl WHERE pl.partition_id = _pop_scope.partition_id;
            IF NOT FOUND THEN
                partition_id := NULL;
                queue_ids := NULL;
            END IF;
        END IF;
    ELSIF p_ns IS NOT NULL OR p_task IS NOT NULL THEN
        SELECT array_agg(q.id ORDER BY q.id) INTO queue_ids
          FROM queen.queues q
         WHERE (p_ns IS NULL OR q.namespace = p_ns) AND (p_task IS NULL OR q.task = p_task);
    END IF;
    queue_ids := coalesce(queue_ids, '{}');
END;
$$;

-- The cursor rows of every group registered for each partition's queue (what
-- queen._cursor_rows does with p_group NULL: the commit-time trigger of 0019, which runs on
-- the shard's worker on Citus). Its own statement, with the subscription starts computed
-- inside it: run from the trigger of a delegated push on a Citus 13.2.2 worker, the form
-- with the starts computed before the INSERT made the worker crash at COMMIT PREPARED
-- (tests/citus/test_citus_push.py, after a delegated push).
CREATE OR REPLACE FUNCTION queen._cursor_rows_registered(p_pids uuid[])
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    WITH r AS MATERIALIZED (
        SELECT pl.partition_id AS pid, c.consumer_group AS grp, pl.queue_id AS qid,
               pl.last_message_created_at AS hts, pl.last_message_id AS hid,
               q.name AS qname, p.name AS pname, q.namespace AS ns, q.task AS tk
          FROM queen.partition_lookup pl
          JOIN queen.partitions p ON p.id = pl.partition_id
          JOIN queen.queues q ON q.id = pl.queue_id
          JOIN queen.queue_consumer_groups c ON c.queue_id = pl.queue_id
         WHERE pl.partition_id = ANY (p_pids)
    ),
    -- The subscription's start once per (group, queue); a partition's own metadata row,
    -- where there is one, wins (the order of queen._subscription_start).
    qs AS (
        SELECT k.grp, k.qid,
               CASE WHEN k.grp = '__QUEUE_MODE__' THEN NULL
                    ELSE queen._subscription_start(k.grp, k.qname, '', k.ns, k.tk) END AS start_ts
          FROM (SELECT DISTINCT r.grp, r.qid, r.qname, r.ns, r.tk FROM r) k
    )
    INSERT INTO queen.partition_consumers AS pc
           (partition_id, consumer_group, queue_id, head_created_at, head_id,
            last_consumed_created_at, last_consumed_id, not_before)
    SELECT x.pid, x.grp, x.qid, x.hts, x.hid, x.start_ts,
           CASE WHEN x.start_ts IS NULL THEN 0 ELSE 9223372036854775807 END,
           x.hts  -- in the ready set since its newest message: the oldest first
      FROM (SELECT r.pid, r.grp, r.qid, r.hts, r.hid,
                   CASE WHEN r.grp = '__QUEUE_MODE__' THEN NULL
                        WHEN m.id IS NOT NULL THEN m.subscription_timestamp
                        ELSE qs.start_ts END AS start_ts
              FROM r
              JOIN qs ON qs.grp = r.grp AND qs.qid = r.qid
              LEFT JOIN queen.consumer_groups_metadata m
                     ON m.consumer_group = r.grp AND m.queue_name = r.qname
                    AND m.partition_name = r.pname AND m.namespace = '' AND m.task = ''
                    AND r.pname <> '') x
     ORDER BY x.pid, x.grp
    ON CONFLICT (partition_id, consumer_group) DO UPDATE
       SET queue_id = EXCLUDED.queue_id,
           head_created_at = EXCLUDED.head_created_at,
           head_id = EXCLUDED.head_id
     WHERE pc.queue_id IS NULL OR pc.head_id IS NULL;
END;
$$;

-- Cursor rows of the given partitions (those with a message) for p_group, or with
-- p_group NULL for every group registered for each partition's queue; an existing row gets
-- its queue and head filled in when it lacks them (a row a seek or an ack created). A new
-- row starts where the group's subscription says (queue mode and 'all': the beginning).
-- Rows in (partition, group) order. (The groups by a LEFT JOIN, not a LATERAL UNION: Citus
-- refuses a LATERAL subquery that a distributed table feeds.)
CREATE OR REPLACE FUNCTION queen._cursor_rows(p_pids uuid[], p_group text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_grps   text[];
    v_qids   uuid[];
    v_qnames text[];
    v_nss    text[];
    v_tks    text[];
    v_keys   jsonb[] := '{}';  -- [group, queue id]
    v_starts timestamptz[] := '{}';
    v_pid    uuid;
    v_qid    uuid;
    v_hts    timestamptz;
    v_hid    bigint;
    v_start  timestamptz;
BEGIN
    IF p_group IS NULL THEN
        PERFORM queen._cursor_rows_registered(p_pids);
        RETURN;
    END IF;
    -- The subscription's start once per (group, queue), computed here and handed to the
    -- INSERT as values: on Citus a statement keyed by one partition runs on its shard,
    -- where a function that reads another table may not run (and a join to the values
    -- would make Citus run the INSERT through the coordinator, also from a shard's trigger).
    -- One statement into arrays, then a loop over them (no query left open: on Citus 13.2.2
    -- a loop over a query in the commit-time trigger on a shard made the worker crash at
    -- COMMIT PREPARED in tests/citus/test_citus_push.py).
    SELECT array_agg(k.grp), array_agg(k.qid), array_agg(k.qname), array_agg(k.ns),
           array_agg(k.tk)
      INTO v_grps, v_qids, v_qnames, v_nss, v_tks
      FROM (SELECT DISTINCT coalesce(p_group, c.consumer_group) AS grp, pl.queue_id AS qid,
                   q.name AS qname, q.namespace AS ns, q.task AS tk
              FROM queen.partition_lookup pl
              JOIN queen.queues q ON q.id = pl.queue_id
              LEFT JOIN queen.queue_consumer_groups c
                     ON p_group IS NULL AND c.queue_id = pl.queue_id
             WHERE pl.partition_id = ANY (p_pids)
               AND (p_group IS NOT NULL OR c.consumer_group IS NOT NULL)) k;
    FOR i IN 1 .. coalesce(cardinality(v_grps), 0) LOOP
        v_keys := array_append(v_keys, jsonb_build_array(v_grps[i], v_qids[i]));
        v_starts := v_starts || CASE WHEN v_grps[i] = '__QUEUE_MODE__' THEN NULL
                                     ELSE queen._subscription_start(v_grps[i], v_qnames[i], '',
                                                                    v_nss[i], v_tks[i]) END;
    END LOOP;
    IF cardinality(v_keys) = 0 THEN
        RETURN;
    END IF;
    -- One row per partition (p_group is given here), in partition order: read by its key,
    -- then written as values, each statement keyed by the partition (on Citus on the one
    -- worker that holds it: an INSERT ... SELECT, also with `partition_id = v_pid`, went to
    -- every shard, so a pop of a partition on a live worker failed while another was
    -- down: tests/citus/test_citus_faults.py).
    FOREACH v_pid IN ARRAY ARRAY(SELECT DISTINCT u.id FROM unnest(p_pids) AS u(id) ORDER BY u.id)
    LOOP
        SELECT pl.queue_id, pl.last_message_created_at, pl.last_message_id,
               -- a partition's own metadata row, where there is one, wins (the order of
               -- queen._subscription_start)
               CASE WHEN p_group = '__QUEUE_MODE__' THEN NULL
                    WHEN m.id IS NOT NULL THEN m.subscription_timestamp
                    ELSE v_starts[array_position(v_keys,
                                                 jsonb_build_array(p_group, pl.queue_id))]
               END
          INTO v_qid, v_hts, v_hid, v_start
          FROM queen.partition_lookup pl
          JOIN queen.partitions p ON p.id = pl.partition_id
          JOIN queen.queues q ON q.id = pl.queue_id
          LEFT JOIN queen.consumer_groups_metadata m
                 ON m.consumer_group = p_group
                AND m.queue_name = q.name AND m.partition_name = p.name
                AND m.namespace = '' AND m.task = '' AND p.name <> ''
         WHERE pl.partition_id = v_pid;
        CONTINUE WHEN NOT FOUND;
        INSERT INTO queen.partition_consumers AS pc
               (partition_id, consumer_group, queue_id, head_created_at, head_id,
                last_consumed_created_at, last_consumed_id, not_before)
        VALUES (v_pid, p_group, v_qid, v_hts, v_hid, v_start,
                CASE WHEN v_start IS NULL THEN 0 ELSE 9223372036854775807 END,
                v_hts)  -- in the ready set since its newest message: the oldest first
        ON CONFLICT (partition_id, consumer_group) DO UPDATE
           SET queue_id = EXCLUDED.queue_id,
               head_created_at = EXCLUDED.head_created_at,
               head_id = EXCLUDED.head_id
         WHERE pc.queue_id IS NULL OR pc.head_id IS NULL;
    END LOOP;
END;
$$;

-- Register p_group for the queues of p_qids it is not registered for yet: from then on
-- every partition of the queue with a message has a cursor row of the group. Once per
-- (queue, group). The queue's registration lock (exclusive here, shared by each push's
-- commit-time bookkeeping, migration 0019) waits for the pushes that are committing; those
-- that commit later see the registration. So no partition's head is missed, and no open
-- transaction holds a registration up. The bookkeeping runs where the partition is stored,
-- so the lock is taken on every node that stores partitions: once per row of
-- queen.shard_anchors (migration 0022: one row on plain PostgreSQL; on Citus one in every
-- shard, so each statement runs on the worker that holds it).
CREATE OR REPLACE FUNCTION queen._register_group(p_qids uuid[], p_group text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_q       uuid;
    v_anchors uuid[];
    v_a       uuid;
BEGIN
    FOR v_q IN
        SELECT u.id FROM unnest(p_qids) AS u(id)
         WHERE NOT EXISTS (SELECT 1 FROM queen.queue_consumer_groups r
                            WHERE r.queue_id = u.id AND r.consumer_group = p_group)
         ORDER BY u.id
    LOOP
        v_anchors := coalesce(v_anchors, ARRAY(SELECT a.partition_id FROM queen.shard_anchors a
                                                ORDER BY a.partition_id));
        FOREACH v_a IN ARRAY v_anchors LOOP
            PERFORM queen._registration_lock(v_q)
               FROM queen.shard_anchors a WHERE a.partition_id = v_a;
        END LOOP;
        INSERT INTO queen.queue_consumer_groups (queue_id, consumer_group)
        VALUES (v_q, p_group)
        ON CONFLICT DO NOTHING;
        CONTINUE WHEN NOT FOUND;
        PERFORM queen._cursor_rows_of_queue(v_q, p_group);
    END LOOP;
END;
$$;

-- The cursor rows of every partition of a queue with a message for p_group, in one
-- statement: on Citus an INSERT ... SELECT between the co-located partition_lookup and
-- partition_consumers, one command per shard (a registration reaches every node anyway:
-- its lock is taken on each). One statement per partition, as queen._cursor_rows writes
-- them, cost 1.7 ms each there: 17 s at 10,000 partitions. The same rows as
-- queen._cursor_rows(<the queue's partitions>, p_group).
CREATE OR REPLACE FUNCTION queen._cursor_rows_of_queue(p_qid uuid, p_group text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    q       queen.queues;
    v_start timestamptz;
BEGIN
    SELECT * INTO q FROM queen.queues WHERE id = p_qid;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_start := CASE WHEN p_group = '__QUEUE_MODE__' THEN NULL
                    ELSE queen._subscription_start(p_group, q.name, '', q.namespace, q.task) END;
    INSERT INTO queen.partition_consumers AS pc
           (partition_id, consumer_group, queue_id, head_created_at, head_id,
            last_consumed_created_at, last_consumed_id, not_before)
    SELECT pl.partition_id, p_group, pl.queue_id, pl.last_message_created_at,
           pl.last_message_id,
           CASE WHEN p_group = '__QUEUE_MODE__' THEN NULL
                WHEN m.id IS NOT NULL THEN m.subscription_timestamp
                ELSE v_start END,
           CASE WHEN (CASE WHEN p_group = '__QUEUE_MODE__' THEN NULL
                           WHEN m.id IS NOT NULL THEN m.subscription_timestamp
                           ELSE v_start END) IS NULL
                THEN 0 ELSE 9223372036854775807 END,
           pl.last_message_created_at  -- in the ready set since its newest message
      FROM queen.partition_lookup pl
      JOIN queen.partitions p ON p.id = pl.partition_id
      LEFT JOIN queen.consumer_groups_metadata m
             ON m.consumer_group = p_group
            AND m.queue_name = q.name AND m.partition_name = p.name
            AND m.namespace = '' AND m.task = '' AND p.name <> ''
     WHERE pl.queue_id = p_qid
    ON CONFLICT (partition_id, consumer_group) DO UPDATE
       SET queue_id = EXCLUDED.queue_id,
           head_created_at = EXCLUDED.head_created_at,
           head_id = EXCLUDED.head_id
     WHERE pc.queue_id IS NULL OR pc.head_id IS NULL;
END;
$$;

-- The cursor row of one partition for a pop of that partition, when it lacks one (or its
-- head), under the queue's registration lock like a registration (taken where the
-- partition is stored: a statement on its partition_lookup row).
CREATE OR REPLACE FUNCTION queen._cursor_row(p_pid uuid, p_group text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM queen.partition_consumers pc
      WHERE pc.partition_id = p_pid AND pc.consumer_group = p_group
        AND pc.queue_id IS NOT NULL AND pc.head_id IS NOT NULL;
    IF NOT FOUND THEN
        PERFORM queen._registration_lock(pl.queue_id)
           FROM queen.partition_lookup pl WHERE pl.partition_id = p_pid;
        PERFORM queen._cursor_rows(ARRAY[p_pid], p_group);
    END IF;
END;
$$;

CREATE OR REPLACE FUNCTION queen._registration_lock(p_queue_id uuid)
RETURNS void
LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock(1364218452, hashtext(p_queue_id::text))
$$;

-- Up to p_limit partitions of the queues p_qids that p_group may take at p_now, in claim
-- order (higher queue priority first, then the one that has waited longest), leaving out
-- p_skip. One range scan of the ready index per queue, queue by queue (one statement per
-- queue: Citus refuses a LIMIT in a LATERAL subquery that a table or a function feeds),
-- and none for the queues of a lower priority once the higher ones gave p_limit.
CREATE OR REPLACE FUNCTION queen._pop_candidates(
    p_qids uuid[], p_group text, p_now timestamptz, p_skip uuid[], p_limit integer
) RETURNS uuid[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_q     record;
    v_prio  integer;
    v_pids  uuid[] := '{}';
    v_ats   timestamptz[] := '{}';
    v_prios integer[] := '{}';
    r       record;
BEGIN
    IF cardinality(p_qids) = 1 THEN
        RETURN ARRAY(SELECT pc.partition_id
                       FROM queen.partition_consumers pc
                      WHERE pc.queue_id = p_qids[1] AND pc.consumer_group = p_group
                        AND pc.available_at <= p_now
                        AND pc.partition_id <> ALL (p_skip)
                      ORDER BY pc.available_at
                      LIMIT p_limit);
    END IF;
    FOR v_q IN
        SELECT q.id, q.priority FROM queen.queues q
         WHERE q.id = ANY (p_qids) ORDER BY q.priority DESC, q.id
    LOOP
        EXIT WHEN v_q.priority IS DISTINCT FROM v_prio AND cardinality(v_pids) >= p_limit;
        v_prio := v_q.priority;
        FOR r IN
            SELECT pc.partition_id AS pid, pc.available_at AS at
              FROM queen.partition_consumers pc
             WHERE pc.queue_id = v_q.id AND pc.consumer_group = p_group
               AND pc.available_at <= p_now
               AND pc.partition_id <> ALL (p_skip)
             ORDER BY pc.available_at
             LIMIT p_limit
        LOOP
            v_pids := v_pids || r.pid;
            v_ats := v_ats || r.at;
            v_prios := v_prios || v_q.priority;
        END LOOP;
    END LOOP;
    RETURN ARRAY(SELECT u.pid FROM unnest(v_pids, v_ats, v_prios) AS u(pid, at, prio)
                  ORDER BY u.prio DESC, u.at, u.pid
                  LIMIT p_limit);
END;
$$;

-- How many partitions of the scope p_group may take now, counted up to p_cap (the pop
-- autopilot needs no more: it never takes more than 16 partitions). Queue by queue.
CREATE OR REPLACE FUNCTION queen._pop_ready_count(
    p_qids uuid[], p_group text, p_now timestamptz, p_cap integer
) RETURNS integer
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_q uuid;
    v_n integer := 0;
BEGIN
    FOREACH v_q IN ARRAY p_qids LOOP
        v_n := v_n + (SELECT count(*) FROM (
                          SELECT 1 FROM queen.partition_consumers pc
                           WHERE pc.queue_id = v_q AND pc.consumer_group = p_group
                             AND pc.available_at <= p_now
                           LIMIT p_cap - v_n) r);
        EXIT WHEN v_n >= p_cap;
    END LOOP;
    RETURN v_n;
END;
$$;

-- Consumers holding a live lease in the scope (distinct leases), counted up to p_cap.
CREATE OR REPLACE FUNCTION queen._pop_active_leases(
    p_qids uuid[], p_group text, p_now timestamptz, p_cap integer
) RETURNS integer
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_q      uuid;
    v_leases uuid[] := '{}';
BEGIN
    FOREACH v_q IN ARRAY p_qids LOOP
        v_leases := v_leases || ARRAY(
            SELECT pc.lease_id FROM queen.partition_consumers pc
             WHERE pc.queue_id = v_q AND pc.consumer_group = p_group
               AND pc.available_at > p_now AND pc.lease_expires_at > p_now
             LIMIT p_cap);
        EXIT WHEN cardinality(v_leases) >= p_cap;
    END LOOP;
    RETURN (SELECT count(DISTINCT l.id) FROM (SELECT u.id FROM unnest(v_leases) AS u(id)
                                              LIMIT p_cap) l);
END;
$$;
