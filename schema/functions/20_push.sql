-- PUSH. queen._push_items is the shared implementation (also used by transactions);
-- queen.push_messages_v4 is the entry point the server calls (compact answer, wake-ups
-- left to the server), queen.push_messages_v3 the compact answer with the wake-ups sent
-- here, and queen.push_messages_v2 the same push answering objects; all run
-- queen._push_retrying.
--
-- Input: array of {queue, partition (default "Default"), payload (any JSON; missing = null),
--        transactionId, traceId|null, producerSub|null ('' is stored as NULL), isEncrypted?,
--        traceContext? (the W3C trace context, checked by the server, 0021)}
--        The HTTP push sets producerSub from the caller's verified token, never from the body.
-- Output: array in input order of
--   {index, transaction_id, transactionId, status: queued|duplicate|failed, message_id,
--    partition_id, trace_id, queueName, error and reason (only when failed)}
-- or, with p_compact, of arrays
--   [status, message_id, partition_id, trace_id, error, reason, generated_transaction_id]
--   error and reason NULL unless failed; generated_transaction_id is the transactionId this
--   function made up for an item that had none, else NULL (the caller knows the others).
--   About a third of the cost of the objects to build, and a third of their size: the
--   caller holds the items and fills in the rest (queen_threads/queue/store.py).
-- reason is machine-readable: queue_full (the queue's maxSize would be exceeded: every
-- item of that queue in the call is refused, nothing of it stored), queue_required,
-- encryption_key_missing, not_stored.
-- An item for a queue with encryption_enabled that arrives without isEncrypted (the server
-- that sent it has no QUEEN_ENCRYPTION_KEY) is not stored: it comes back failed, so that
-- plain text never lands in an encrypted queue.
-- p_probe: look up every item's (partition, transactionId) before inserting, to answer
-- 'duplicate' for messages already stored. Without it (the fast path) only capped queues
-- are probed (their room must not count stored messages), and a stored message makes the
-- INSERT fail with unique_violation: the caller then runs it again with p_probe (see
-- push_messages_v2). A probe costs an index lookup per item, about a quarter of a
-- 1000-item push, for a case (a retried push) that is rare.
-- The fast path (compact answer, first attempt, every item bound for an existing partition
-- of an uncapped queue, and encrypted when its queue is: nearly every push) skips the
-- per-item joins and answers from the rows it inserted: ids drawn in input order, one
-- timestamp for the request, each row's item found by its offset (about 30% of a
-- 1000-item push, docs/benchmarks.md). Anything it cannot answer (a duplicate makes its
-- INSERT fail) goes through the general path.
-- Steps: the request's (queue, partition) pairs (queen._push_pairs), missing queues and
-- partitions and the partition locks (queen._push_prepare), then the fast path
-- (queen._push_fast, NULL when it does not apply) or the general one (queen._push_general).
DROP FUNCTION IF EXISTS queen._push_items(jsonb);
DROP FUNCTION IF EXISTS queen._push_items(jsonb, boolean);
DROP FUNCTION IF EXISTS queen._push_items(jsonb, boolean, boolean);
-- p_partition: the id of the one partition every item names (queen.push_partition_v1),
-- NULL when not known. When the items do not name exactly that partition the answer is
-- NULL and nothing is written.
CREATE OR REPLACE FUNCTION queen._push_items(p_items jsonb, p_probe boolean,
                                             p_compact boolean DEFAULT false,
                                             p_partition uuid DEFAULT NULL)
RETURNS json
LANGUAGE plpgsql AS $$
DECLARE
    v_pairs  jsonb;
    v_result json;
BEGIN
    IF p_items IS NULL OR jsonb_typeof(p_items) <> 'array' OR jsonb_array_length(p_items) = 0 THEN
        RETURN '[]'::json;
    END IF;
    v_pairs := queen._push_pairs(p_items);
    IF p_partition IS NULL THEN
        v_pairs := queen._push_prepare(v_pairs);
    ELSE  -- (one partition's step only: on Citus its shard group's, schema/citus/70_twins.sql)
        v_pairs := queen._push_reserve(v_pairs, p_partition);
    END IF;
    IF v_pairs IS NULL THEN
        RETURN NULL;
    END IF;
    IF p_compact AND NOT p_probe THEN
        v_result := queen._push_fast(p_items, v_pairs);
        IF v_result IS NOT NULL THEN
            RETURN v_result;
        END IF;
    END IF;
    RETURN queen._push_general(p_items, v_pairs, p_probe, p_compact);
END;
$$;

CREATE OR REPLACE FUNCTION queen._push_pairs(p_items jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_pairs jsonb;
BEGIN
    -- 0. The request's distinct (queue, partition) pairs, read from the items once, with the
    --    0-based positions of each pair's first and last item (its span, for offsets).
    SELECT jsonb_agg(jsonb_build_array(s.qn, s.pn, s.first, s.last) ORDER BY s.qn, s.pn)
      INTO v_pairs
      FROM (SELECT o.e ->> 'queue' AS qn,
                   coalesce(nullif(o.e ->> 'partition', ''), 'Default') AS pn,
                   min(o.n) - 1 AS first, max(o.n) - 1 AS last
              FROM jsonb_array_elements(p_items) WITH ORDINALITY AS o(e, n)
             GROUP BY 1, 2) s;

    RETURN v_pairs;
END;
$$;

-- queen._push_prepare's step for the one partition p_partition the caller says every item
-- names: NULL, with nothing written, unless the items name exactly that existing partition of
-- an uncapped queue; then only that partition's counters row is written, by its key (on
-- Citus, where the call was delegated to the partition's node, a statement on that node
-- only). The pairs as _push_prepare answers them.
CREATE OR REPLACE FUNCTION queen._push_reserve(p_pairs jsonb, p_partition uuid)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_now  timestamptz := clock_timestamp();  -- (Citus: no volatile call in a write)
    v_next bigint;
BEGIN
    IF jsonb_array_length(p_pairs) <> 1 OR NOT EXISTS (
           SELECT 1 FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
            WHERE p.id = p_partition AND q.name = p_pairs -> 0 ->> 0
              AND p.name = p_pairs -> 0 ->> 1 AND q.max_queue_size <= 0) THEN
        RETURN NULL;
    END IF;
    INSERT INTO queen.partition_counters AS pc (partition_id, next_offset, last_activity)
    VALUES (p_partition, (p_pairs -> 0 ->> 3)::bigint - (p_pairs -> 0 ->> 2)::bigint + 1, v_now)
    ON CONFLICT (partition_id) DO UPDATE
       SET next_offset = pc.next_offset + EXCLUDED.next_offset,
           last_activity = EXCLUDED.last_activity
    RETURNING pc.next_offset INTO v_next;
    RETURN jsonb_build_array(p_pairs -> 0 || jsonb_build_array(p_partition, v_next));
END;
$$;

DROP FUNCTION IF EXISTS queen._push_prepare(jsonb);
-- The request's pairs, each with its partition and reservation:
-- [queue, partition, first, last, partition_id (NULL: no such queue), next_offset after
-- the reservation]. The partition of an item is where its pair says: no later statement
-- resolves names again.
-- With p_partition (the id of the one partition the caller says every item names): NULL,
-- with nothing written, unless the items name exactly that existing partition of an
-- uncapped queue; then only that partition's row is written, by its key (on Citus, where
-- the call was delegated to the partition's node, a statement on that node only).
CREATE OR REPLACE FUNCTION queen._push_prepare(p_pairs jsonb, p_partition uuid DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_pairs jsonb := p_pairs;
    v_now   timestamptz := clock_timestamp();  -- (Citus: no volatile call in a write)
    v_out   jsonb;
    v_next_by_id jsonb;
    v_missing_q boolean;
    v_missing_p boolean;
    v_capped    boolean;
BEGIN
    IF p_partition IS NOT NULL THEN
        RETURN queen._push_reserve(v_pairs, p_partition);
    END IF;
    -- 1. Missing queues (namespace/task derived from the dotted name), in a stable order.
    --    (Queues and partitions are rarely new: the inserts run only when one is missing.)
    --    (Every definition below is found by a key lookup per pair, whatever the planner
    --    estimates: planned for jsonb_array_elements' default 100 rows, a join read every
    --    row of queen.partitions or queen.queues per push. The lookups are LATERAL with
    --    LIMIT 1, the NOT EXISTS tests have OFFSET 0 so that they stay probes.)
    --    (Whether any queue or partition is missing, and whether a queue is capped, is one
    --    statement when nothing is missing, nearly always.)
    SELECT bool_or(q.id IS NULL AND pr ->> 0 <> ''),
           bool_or(q.id IS NOT NULL
                   AND NOT EXISTS (SELECT 1 FROM queen.partitions p
                                    WHERE p.queue_id = q.id AND p.name = pr ->> 1 OFFSET 0)),
           bool_or(q.max_queue_size > 0)
      INTO v_missing_q, v_missing_p, v_capped
      FROM jsonb_array_elements(v_pairs) pr
      LEFT JOIN LATERAL (SELECT q0.id, q0.max_queue_size FROM queen.queues q0
                          WHERE q0.name = pr ->> 0 LIMIT 1) q ON true;
    IF v_missing_q THEN
        PERFORM queen._definitions_lock();
        INSERT INTO queen.queues (name, namespace, task)
        SELECT DISTINCT pr ->> 0, queen._queue_namespace(pr ->> 0), queen._queue_task(pr ->> 0)
          FROM jsonb_array_elements(v_pairs) pr
         WHERE pr ->> 0 <> ''
           AND NOT EXISTS (SELECT 1 FROM queen.queues q WHERE q.name = pr ->> 0)
         ORDER BY 1
        ON CONFLICT (name) DO NOTHING;
        -- (one created meanwhile by someone else may be capped)
        v_capped := EXISTS (SELECT 1 FROM queen.queues q
                             WHERE q.max_queue_size > 0
                               AND q.name IN (SELECT pr ->> 0
                                                FROM jsonb_array_elements(v_pairs) pr));
    END IF;

    -- 2. Missing partitions (those of the queues just created too).
    IF v_missing_q OR v_missing_p THEN
        PERFORM queen._definitions_lock();
        INSERT INTO queen.partitions (queue_id, name)
        SELECT q.id, pr ->> 1
          FROM jsonb_array_elements(v_pairs) pr
          JOIN queen.queues q ON q.name = pr ->> 0
         WHERE NOT EXISTS (SELECT 1 FROM queen.partitions p
                            WHERE p.queue_id = q.id AND p.name = pr ->> 1)
         ORDER BY q.id, pr ->> 1
        ON CONFLICT (queue_id, name) DO NOTHING;
    END IF;

    -- 3. Serialize pushes per partition (and per capped queue, so the capacity check is
    --    exact): lock in id order, queues before partitions. Ids and the timestamp are drawn
    --    after the locks, so within a partition (created_at, id) follows commit order.
    --    The partition's lock is its counters row (migration 0020), and the same write
    --    reserves the partition's next offsets (0015), as many as the span of its items in
    --    the request (last - first + 1: its item count when they are contiguous, as in
    --    every push of a client that pushes one partition per request).
    --    The fast path numbers an item base + its position - first, with no sort; the
    --    general path numbers the stored items densely and gives back the rest (step 4).
    --    (The lock only when there is one to take: on Citus a lock of a reference table's
    --    rows is a statement on every node.)
    IF v_capped THEN
        PERFORM 1
           FROM queen.queues q
          WHERE q.max_queue_size > 0
            AND q.name IN (SELECT pr ->> 0 FROM jsonb_array_elements(v_pairs) pr)
          ORDER BY q.id
            FOR NO KEY UPDATE;
    END IF;

    --    (The INSERT reads the pairs and the definitions, not a CTE: on Citus a CTE's rows
    --    that a write reads are sent to every node, the INSERT's own rows only to theirs.)
    WITH res AS (
        INSERT INTO queen.partition_counters AS pc (partition_id, next_offset, last_activity)
        SELECT p.id, (pr ->> 3)::bigint - (pr ->> 2)::bigint + 1, v_now
          FROM jsonb_array_elements(v_pairs) pr
         CROSS JOIN LATERAL (SELECT q0.id FROM queen.queues q0
                              WHERE q0.name = pr ->> 0 LIMIT 1) q
         CROSS JOIN LATERAL (SELECT p0.id FROM queen.partitions p0
                              WHERE p0.queue_id = q.id AND p0.name = pr ->> 1 LIMIT 1) p
         ORDER BY p.id
        ON CONFLICT (partition_id) DO UPDATE
           SET next_offset = pc.next_offset + EXCLUDED.next_offset,
               last_activity = EXCLUDED.last_activity
        RETURNING pc.partition_id, pc.next_offset
    )
    SELECT jsonb_object_agg(res.partition_id, res.next_offset) INTO v_next_by_id FROM res;

    SELECT jsonb_agg(pr || jsonb_build_array(p.id, v_next_by_id -> (p.id::text))
                     ORDER BY pr ->> 0, pr ->> 1)
      INTO v_out
      FROM jsonb_array_elements(v_pairs) pr
      LEFT JOIN LATERAL (SELECT q0.id FROM queen.queues q0
                          WHERE q0.name = pr ->> 0 LIMIT 1) q ON true
      LEFT JOIN LATERAL (SELECT p0.id FROM queen.partitions p0
                          WHERE p0.queue_id = q.id AND p0.name = pr ->> 1 LIMIT 1) p ON true;
    RETURN v_out;
END;
$$;

-- The partition ids of the request's pairs (queen._push_prepare). (plpgsql: its plan is
-- kept for the session; an SQL function with an aggregate is parsed and planned again on
-- every call.)
DROP FUNCTION IF EXISTS queen._push_pids(jsonb);
CREATE OR REPLACE FUNCTION queen._push_pids(p_pairs jsonb)
RETURNS uuid[]
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN ARRAY(SELECT (pr ->> 4)::uuid
                   FROM jsonb_array_elements(p_pairs) pr
                  WHERE pr ->> 4 IS NOT NULL);
END;
$$;

-- The fast path's answer, or NULL when the request needs the general path.
CREATE OR REPLACE FUNCTION queen._push_fast(p_items jsonb, p_pairs jsonb)
RETURNS json
LANGUAGE plpgsql AS $$
DECLARE
    v_pairs   jsonb := p_pairs;
    v_ts      timestamptz;
    v_result  json;
    v_fast    boolean := false;
    v_floor   timestamptz;
    v_map     jsonb;
    v_shifts  jsonb;
    v_shift   bigint;
    v_pids    uuid[];
    v_pshift  jsonb;
    v_gen     boolean;
    v_enc     boolean;
BEGIN

    -- The fast path: every item goes to an existing partition of an uncapped queue (and
    -- comes encrypted when its queue is), and (first attempt) none is expected to be a
    -- duplicate. A duplicate, stored or
    -- within the request, makes its INSERT fail: the caller runs the push again with
    -- p_probe, on the general path below.
    -- The maps {queue: {partition: id}} and {queue: {partition: offset of the item at
    -- position 0}} are nested, so that no name is joined with another. A push to one
    -- partition (most) takes its offsets from one number instead of a map lookup per item.
    SELECT bool_and(x.ok), bool_or(x.enc),
           jsonb_object_agg(x.qn, x.parts) FILTER (WHERE x.qn IS NOT NULL),
           jsonb_object_agg(x.qn, x.shifts) FILTER (WHERE x.qn IS NOT NULL),
           min(x.shift)
      INTO v_fast, v_enc, v_map, v_shifts, v_shift
      FROM (SELECT pr ->> 0 AS qn,
                   bool_and(coalesce(pr ->> 4 IS NOT NULL AND q.max_queue_size <= 0, false))
                       AS ok,
                   bool_or(q.encryption_enabled) AS enc,
                   jsonb_object_agg(pr ->> 1, pr -> 4) AS parts,
                   jsonb_object_agg(pr ->> 1, (pr ->> 5)::bigint - (pr ->> 3)::bigint - 1)
                       AS shifts,
                   min((pr ->> 5)::bigint - (pr ->> 3)::bigint - 1) AS shift
              FROM jsonb_array_elements(v_pairs) pr
              -- (a key lookup per pair: see _push_prepare)
              LEFT JOIN LATERAL (SELECT q0.max_queue_size, q0.encryption_enabled
                                   FROM queen.queues q0 WHERE q0.name = pr ->> 0
                                  LIMIT 1) q ON true
             GROUP BY pr ->> 0) x;

    IF NOT coalesce(v_fast, false) THEN
        RETURN NULL;
    END IF;
    -- A queue with encryption_enabled takes only encrypted payloads (the general path
    -- refuses the others one by one): here when every item came encrypted (as the items
    -- of a server with QUEEN_ENCRYPTION_KEY do).
    IF v_enc AND jsonb_path_exists(p_items, '$[*] ? (!(@.isEncrypted == true))') THEN
        RETURN NULL;
    END IF;
    -- The target partitions' newest message (by key: one node's shard on Citus).
    v_pids := queen._push_pids(v_pairs);
    SELECT max(pl.last_message_created_at) INTO v_floor
      FROM queen.partition_lookup pl WHERE pl.partition_id = ANY (v_pids);
    -- One timestamp for the request, not before any target partition's newest message.
    v_ts := greatest(clock_timestamp(), v_floor);
    -- Ids drawn in input order (volatile select-list items are computed after ORDER
    -- BY), so the answer needs no RETURNING joined back to the items.
    IF jsonb_array_length(v_pairs) > 1 THEN
        v_shift := NULL;
    END IF;
    -- The INSERT reads the items themselves, not a CTE: on Citus an INSERT ... SELECT
    -- from an intermediate result is sent to every node, one from a function only to the
    -- nodes its rows go to. Each answer row finds its item by its offset (the item at
    -- 0-based position i got its partition's shift + i).
    -- (Looking an item up costs: only when some item came without a transactionId, which
    -- the server never sends.)
    v_gen := jsonb_path_exists(p_items,
                               '$[*] ? (!exists(@.transactionId) || @.transactionId == null)');
    IF v_shift IS NULL THEN
        SELECT jsonb_object_agg(pr ->> 4, (pr ->> 5)::bigint - (pr ->> 3)::bigint - 1)
          INTO v_pshift
          FROM jsonb_array_elements(v_pairs) pr;
    END IF;
    -- One item (most pushes): INSERT ... VALUES, which Citus routes to the partition's
    -- shard; an INSERT ... SELECT from the items is planned there through intermediate
    -- results even on the shard's own node (3.4 ms of a 7.5 ms delegated push).
    IF jsonb_array_length(p_items) = 1 AND v_shift IS NOT NULL THEN
        DECLARE
            e     jsonb := p_items -> 0;
            r_id  bigint;
            r_pid uuid;
            r_tid uuid;
            r_txn text;
        BEGIN
            INSERT INTO queen.messages
                   (id, transaction_id, partition_id, payload, trace_id, producer_sub,
                    is_encrypted, created_at, partition_offset, trace_context)
            OVERRIDING SYSTEM VALUE
            VALUES (nextval('queen.messages_id_seq'::regclass),
                    coalesce(e ->> 'transactionId', gen_random_uuid()::text),
                    (v_map -> (e ->> 'queue')
                           ->> coalesce(nullif(e ->> 'partition', ''), 'Default'))::uuid,
                    coalesce(e -> 'payload', 'null'::jsonb), queen._try_uuid(e ->> 'traceId'),
                    nullif(e ->> 'producerSub', ''),
                    coalesce(e -> 'isEncrypted' = 'true'::jsonb, false), v_ts, v_shift,
                    e -> 'traceContext')
            RETURNING id, partition_id, trace_id, transaction_id
                 INTO r_id, r_pid, r_tid, r_txn;
            v_result := json_build_array(json_build_array(
                'queued', r_id::text, r_pid, r_tid, NULL, NULL,
                CASE WHEN v_gen AND e ->> 'transactionId' IS NULL THEN r_txn END));
        END;
    ELSE
    WITH ins AS (
        INSERT INTO queen.messages
               (id, transaction_id, partition_id, payload, trace_id, producer_sub,
                is_encrypted, created_at, partition_offset, trace_context)
        OVERRIDING SYSTEM VALUE
        SELECT nextval('queen.messages_id_seq'::regclass), n.txn, n.pid, n.payload,
               n.trace_id, n.producer_sub, n.is_enc, v_ts, n.off, n.trace_context
          FROM (SELECT (v_map -> (o.e ->> 'queue')
                              ->> coalesce(nullif(o.e ->> 'partition', ''), 'Default'))::uuid
                           AS pid,
                       coalesce(v_shift,
                                (v_shifts -> (o.e ->> 'queue')
                                          ->> coalesce(nullif(o.e ->> 'partition', ''),
                                                       'Default'))::bigint)
                       + o.n - 1 AS off,
                       coalesce(o.e ->> 'transactionId', gen_random_uuid()::text) AS txn,
                       queen._try_uuid(o.e ->> 'traceId') AS trace_id,
                       coalesce(o.e -> 'payload', 'null'::jsonb) AS payload,
                       nullif(o.e ->> 'producerSub', '') AS producer_sub,
                       coalesce(o.e -> 'isEncrypted' = 'true'::jsonb, false) AS is_enc,
                       o.e -> 'traceContext' AS trace_context
                  FROM jsonb_array_elements(p_items) WITH ORDINALITY AS o(e, n)
                 ORDER BY o.n) n
        RETURNING id, partition_id, trace_id, transaction_id, partition_offset
    )
    SELECT json_agg(json_build_array('queued', r.id::text, r.partition_id, r.trace_id,
                                     NULL, NULL,
                                     CASE WHEN v_gen
                                               AND p_items -> r.idx ->> 'transactionId' IS NULL
                                          THEN r.transaction_id END)
                    ORDER BY r.idx)
      INTO v_result
      FROM (SELECT ins.*,
                   (ins.partition_offset
                    - coalesce(v_shift, (v_pshift ->> ins.partition_id::text)::bigint))::integer
                       AS idx
              FROM ins) r;
    END IF;
    IF current_setting('queen.server_wakes', true) IS DISTINCT FROM 'on' THEN
        PERFORM queen._wake(jsonb_build_object(
                    'kind', 'push', 'queue', q.name, 'partition', pr ->> 1,
                    'namespace', q.namespace, 'task', q.task))
           FROM jsonb_array_elements(v_pairs) pr
          CROSS JOIN LATERAL (SELECT q0.name, q0.namespace, q0.task FROM queen.queues q0
                               WHERE q0.name = pr ->> 0 LIMIT 1) q;
    END IF;
    RETURN v_result;
END;
$$;

CREATE OR REPLACE FUNCTION queen._push_general(p_items jsonb, p_pairs jsonb, p_probe boolean,
                                               p_compact boolean)
RETURNS json
LANGUAGE plpgsql AS $$
DECLARE
    v_pairs   jsonb := p_pairs;
    v_pids    uuid[] := queen._push_pids(p_pairs);
    v_ts      timestamptz;
    v_result  json;
    v_notify  jsonb;
BEGIN
    -- One timestamp for the request, not before any target partition's newest message.
    SELECT greatest(clock_timestamp(), max(pl.last_message_created_at)) INTO v_ts
      FROM queen.partition_lookup pl WHERE pl.partition_id = ANY (v_pids);
    -- 4. Dedup (existing rows and within the request: first occurrence wins), capacity,
    --    one set-based INSERT in input order, results in input order.
    WITH items AS MATERIALIZED (
        SELECT (o.n - 1)::integer AS idx,
               e ->> 'queue' AS qn,
               coalesce(nullif(e ->> 'partition', ''), 'Default') AS pn,
               coalesce(e -> 'payload', 'null'::jsonb) AS payload,
               coalesce(e ->> 'transactionId', gen_random_uuid()::text) AS txn,
               e ->> 'transactionId' IS NULL AS txn_generated,
               queen._try_uuid(e ->> 'traceId') AS trace_id,
               nullif(e ->> 'producerSub', '') AS producer_sub,
               coalesce(e -> 'isEncrypted' = 'true'::jsonb, false) AS is_enc,
               e -> 'traceContext' AS trace_context
          FROM jsonb_array_elements(p_items) WITH ORDINALITY AS o(e, n)
    ),
    mapped AS MATERIALIZED (
        SELECT i.*, (pr.x ->> 4)::uuid AS pid, q.id AS qid, q.max_queue_size AS maxsz,
               -- the partition's first reserved offset (step 3)
               (pr.x ->> 5)::bigint - (pr.x ->> 3)::bigint + (pr.x ->> 2)::bigint - 1 AS base,
               q.namespace AS ns, q.task AS tk,
               coalesce(q.encryption_enabled AND NOT i.is_enc, false) AS plain_in_enc
          FROM items i
          -- (a key lookup per item: see _push_prepare)
          LEFT JOIN LATERAL (SELECT q0.id, q0.max_queue_size, q0.namespace, q0.task,
                                    q0.encryption_enabled
                               FROM queen.queues q0 WHERE q0.name = i.qn LIMIT 1) q ON true
          LEFT JOIN jsonb_array_elements(v_pairs) pr(x)
                 ON pr.x ->> 0 = i.qn AND pr.x ->> 1 = i.pn
    ),
    -- The first item of each (partition, transactionId) in the request, the one stored:
    -- a hash aggregate over narrow columns, cheaper than a window over the wide rows
    -- (which sorts them).
    firsts AS MATERIALIZED (
        SELECT min(mp.idx) AS idx
          FROM mapped mp
         WHERE mp.pid IS NOT NULL
         GROUP BY mp.pid, mp.txn
    ),
    -- One unique-index probe per (partition, transactionId) (with p_probe, or for a capped
    -- queue): a plan that cannot turn into a scan of the whole table when statistics are
    -- missing or stale (cached generic plan).
    existing AS MATERIALIZED (
        SELECT k.pid AS partition_id, k.txn AS transaction_id, m.id
          FROM (SELECT DISTINCT pid, txn FROM mapped
                 WHERE pid IS NOT NULL AND (p_probe OR maxsz > 0)) k
          JOIN queen.messages m ON m.partition_id = k.pid AND m.transaction_id = k.txn
         WHERE m.partition_id = ANY (v_pids)
    ),
    cand AS MATERIALIZED (
        SELECT mp.*
          FROM mapped mp
         WHERE mp.pid IS NOT NULL AND NOT mp.plain_in_enc
           AND EXISTS (SELECT 1 FROM firsts fi WHERE fi.idx = mp.idx)
           AND NOT EXISTS (SELECT 1 FROM existing x
                            WHERE x.partition_id = mp.pid AND x.transaction_id = mp.txn)
    ),
    full_q AS MATERIALIZED (
        SELECT c.qid, c.maxsz
          FROM cand c
         WHERE c.maxsz > 0
         GROUP BY c.qid, c.maxsz
        HAVING queen._queue_depth(c.qid) + count(*) > c.maxsz
    ),
    ins AS (
        INSERT INTO queen.messages
               (transaction_id, partition_id, payload, trace_id, producer_sub, is_encrypted,
                created_at, partition_offset, trace_context)
        SELECT c.txn, c.pid, c.payload, c.trace_id, c.producer_sub, c.is_enc,
               v_ts, c.base + row_number() OVER (PARTITION BY c.pid ORDER BY c.idx) - 1,
               c.trace_context
          FROM cand c
         WHERE NOT EXISTS (SELECT 1 FROM full_q f WHERE f.qid = c.qid)
         ORDER BY c.idx
        RETURNING id, partition_id, transaction_id, trace_id
    ),
    -- Offsets reserved for items that were not stored go back: the partition's next offset
    -- is one past the last one stored (offsets stay dense).
    unreserve AS (
        UPDATE queen.partition_counters pc
           SET next_offset = b.base + coalesce(s.n, 0)
          FROM (SELECT DISTINCT mp.pid, mp.base FROM mapped mp WHERE mp.pid IS NOT NULL) b
          LEFT JOIN (SELECT partition_id, count(*) AS n FROM ins GROUP BY 1) s
                 ON s.partition_id = b.pid
         WHERE pc.partition_id = b.pid AND pc.partition_id = ANY (v_pids)
           AND pc.next_offset <> b.base + coalesce(s.n, 0)
    ),
    res AS (
        SELECT mp.idx, mp.qn, mp.pn, mp.ns, mp.tk, mp.txn, mp.txn_generated, mp.pid,
               coalesce(ins.id, x.id) AS mid,
               coalesce(ins.trace_id, mp.trace_id) AS trace_id,
               CASE
                   WHEN ins.id IS NOT NULL AND fi.idx IS NOT NULL THEN 'queued'
                   WHEN ins.id IS NOT NULL OR x.id IS NOT NULL THEN 'duplicate'
                   ELSE 'failed'
               END AS status,
               CASE
                   WHEN ins.id IS NOT NULL OR x.id IS NOT NULL THEN NULL
                   WHEN mp.qn IS NULL OR mp.qn = '' THEN 'Queue name is required'
                   WHEN mp.plain_in_enc THEN
                       format('Queue %s has encryptionEnabled but QUEEN_ENCRYPTION_KEY is not '
                              'set on this server: message not stored', mp.qn)
                   WHEN f.qid IS NOT NULL THEN
                       format('Queue %s would exceed its maximum size of %s messages', mp.qn, f.maxsz)
                   ELSE 'Message could not be stored'
               END AS error,
               CASE
                   WHEN ins.id IS NOT NULL OR x.id IS NOT NULL THEN NULL
                   WHEN mp.qn IS NULL OR mp.qn = '' THEN 'queue_required'
                   WHEN mp.plain_in_enc THEN 'encryption_key_missing'
                   WHEN f.qid IS NOT NULL THEN 'queue_full'
                   ELSE 'not_stored'
               END AS reason
          FROM mapped mp
          LEFT JOIN ins ON ins.partition_id = mp.pid AND ins.transaction_id = mp.txn
          LEFT JOIN existing x ON x.partition_id = mp.pid AND x.transaction_id = mp.txn
          LEFT JOIN full_q f ON f.qid = mp.qid
          LEFT JOIN firsts fi ON fi.idx = mp.idx
    )
    -- The answer is json (text), about half the cost of a jsonb object per item; the
    -- wake-up list only when this transaction sends the wake-ups itself (queen._wake).
    -- One aggregate whose CASE picks the form per row (two aggregates under an outer CASE
    -- would both be computed).
    SELECT (SELECT json_agg(
                       CASE WHEN p_compact
                            THEN json_build_array(
                                     r.status, r.mid::text, r.pid, r.trace_id, r.error,
                                     r.reason, CASE WHEN r.txn_generated THEN r.txn END)
                            WHEN r.error IS NULL
                            THEN json_build_object(
                                     'index', r.idx, 'transaction_id', r.txn,
                                     'transactionId', r.txn, 'status', r.status,
                                     'message_id', r.mid::text, 'partition_id', r.pid,
                                     'trace_id', r.trace_id, 'queueName', r.qn)
                            ELSE json_build_object(
                                     'index', r.idx, 'transaction_id', r.txn,
                                     'transactionId', r.txn, 'status', r.status,
                                     'message_id', r.mid::text, 'partition_id', r.pid,
                                     'trace_id', r.trace_id, 'queueName', r.qn,
                                     'error', r.error, 'reason', r.reason)
                       END ORDER BY r.idx)
              FROM res r),
           CASE WHEN current_setting('queen.server_wakes', true) IS DISTINCT FROM 'on' THEN
               (SELECT jsonb_agg(jsonb_build_object(
                           'kind', 'push', 'queue', d.qn, 'partition', d.pn,
                           'namespace', d.ns, 'task', d.tk))
                  FROM (SELECT DISTINCT r.qn, r.pn, r.ns, r.tk
                          FROM res r WHERE r.status = 'queued') d)
           END
      INTO v_result, v_notify;

    -- 5. Wake long polls everywhere (see queen._wake).
    IF v_notify IS NOT NULL THEN
        PERFORM queen._wake(n) FROM jsonb_array_elements(v_notify) n;
    END IF;

    RETURN coalesce(v_result, '[]'::json);
END;
$$;

-- The push with its retries, in either answer form (see queen._push_items).
DROP FUNCTION IF EXISTS queen._push_retrying(jsonb, boolean);
CREATE OR REPLACE FUNCTION queen._push_retrying(p_items jsonb, p_compact boolean,
                                                p_partition uuid DEFAULT NULL)
RETURNS json
LANGUAGE plpgsql
-- Generic plans: these statements are cheap to run but costly to re-plan on every call.
SET plan_cache_mode = force_generic_plan
-- Every table this reaches is read by key: a plan made while a table was small (a generic
-- plan is made once per connection) must not stay a sequential scan after it grew
-- (measured: 4 scans of queen.partitions per push after 20,000 partitions appeared).
SET enable_seqscan = off
AS $$
DECLARE
    v_probe     boolean := false;
    v_deadlocks integer := 0;
BEGIN
    -- Also accept {"items": [...]}.
    IF jsonb_typeof(p_items) = 'object' THEN
        p_items := p_items -> 'items';
    END IF;
    -- Concurrent pushes lock their partitions in id order, but PostgreSQL can still pick a
    -- push as a deadlock victim when a waiter holds a row's tuple lock while the pusher
    -- touches that row again (multixact rows: foreign-key share locks of pops and acks).
    -- The failed attempt is rolled back to this block's savepoint, which releases its
    -- locks (and discards its notifications); the other push goes on, and this one retries.
    -- The first attempt skips the duplicate probe (queen._push_items); when an item was
    -- stored already, its INSERT fails and the push runs again with the probe.
    FOR attempt IN 1..4 LOOP
        BEGIN
            RETURN queen._push_items(p_items, v_probe, p_compact, p_partition);
        EXCEPTION
            WHEN unique_violation OR internal_error THEN
                -- (Citus reports a unique violation met by an INSERT ... SELECT as XX000)
                IF v_probe OR (SQLSTATE = 'XX000' AND SQLERRM NOT LIKE 'duplicate key value%') THEN
                    RAISE;  -- cannot happen: the probe excluded every stored message
                END IF;
                v_probe := true;
            WHEN deadlock_detected OR foreign_key_violation THEN
                -- (foreign_key_violation: the partition was deleted, by retention's cleanup
                -- of idle empty partitions, between its lookup and its counters row; the
                -- next attempt creates it again)
                v_deadlocks := v_deadlocks + 1;
                IF v_deadlocks = 3 THEN
                    RAISE;
                END IF;
        END;
    END LOOP;
    RAISE EXCEPTION 'push: no attempt left';
END;
$$;

-- Objects per item (tests and SQL users).
DROP FUNCTION IF EXISTS queen.push_messages_v2(jsonb);
CREATE OR REPLACE FUNCTION queen.push_messages_v2(p_items jsonb)
RETURNS json
LANGUAGE sql
AS $$ SELECT queen._push_retrying(p_items, false) $$;

-- Arrays per item: what the server calls.
CREATE OR REPLACE FUNCTION queen.push_messages_v3(p_items jsonb)
RETURNS json
LANGUAGE sql
AS $$ SELECT queen._push_retrying(p_items, true) $$;

-- What the server calls: arrays per item, wake-ups left to the server (queen.server_wakes)
-- and the wake-interest epoch it needs to decide whom to notify (queen._wake_epoch).
CREATE OR REPLACE FUNCTION queen.push_messages_v4(
    p_items jsonb, OUT results json, OUT wake_epoch bigint
)
LANGUAGE plpgsql AS $$
DECLARE
    v_wakes text;
BEGIN
    v_wakes := set_config('queen.server_wakes', 'on', true);  -- (no statement)
    wake_epoch := queen._wake_epoch();
    results := queen._push_retrying(p_items, true);
END;
$$;

DROP FUNCTION IF EXISTS queen.push_partition_v1(uuid, jsonb);
-- One partition's push, what the server calls when every item of a request names one
-- partition whose id it knows (queue_threads/queue/store.py): the compact answer of
-- push_messages_v4, or NULL (nothing written) when the items do not name exactly that
-- partition, or it is gone, or its queue is capped (the caller then pushes with
-- push_messages_v4). Wake-ups are left to the server; the wake-interest epoch is its own
-- statement (queen._wake_epoch), in the same transaction.
-- On Citus this function is delegated by its first argument to the node that holds the
-- partition (schema/citus/30_push.sql): the whole push runs there, in one round trip.
-- (JSON as text: what the server parses itself.)
-- The items come as text (push_partition_v2): a jsonb argument is parsed and printed again
-- by the Citus coordinator before it delegates the call, which cost it 7.3-8.0 ms for 1000
-- items against 2.7-3.3 as text (docs/benchmarks.md, Citus (z)). push_partition_v1 (the
-- items as jsonb) stays for servers of the previous release during a rolling upgrade.
CREATE OR REPLACE FUNCTION queen.push_partition_v2(p_partition_id uuid, p_items text)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_wakes text;
BEGIN
    v_wakes := set_config('queen.server_wakes', 'on', true);  -- (no statement)
    RETURN queen._push_retrying(p_items::jsonb, true, p_partition_id)::text;
END;
$$;

-- One partition's push, v3 (issue 41): what the server calls since this release, with the
-- answer and the declining of push_partition_v2. A push of one item (most: a producer's
-- single message) takes its own path of three statements instead of push_partition_v2's
-- thirteen (pairs, checks, reservation, maps and answer built through jsonb aggregates,
-- a savepoint per call): the offset reserved on the partition's counters row (the
-- partition's lock, as in _push_prepare), by its key and only when the partition is the
-- named one, of an uncapped queue, and the item comes encrypted when its queue is (an
-- UPDATE: a partition that never had a message has no row); then, under that lock, the
-- timestamp's floor (its newest message, _push_fast); then the message stored. A
-- duplicate transactionId (a stored message: the INSERT's ON CONFLICT, no savepoint)
-- gives its offset back and answers `duplicate` with the stored message's id, as the
-- general path does. Anything else (several items, a check that fails) takes
-- push_partition_v2's path, which declines or answers as before.
-- On Citus every statement names the partition (a router statement on its node) or reads
-- the reference tables, as push_partition_v2's do.
CREATE OR REPLACE FUNCTION queen.push_partition_v3(p_partition_id uuid, p_items text)
RETURNS text
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
    v_items jsonb := p_items::jsonb;
    e       jsonb;
    v_txn   text;
    v_off   bigint;
    v_ts    timestamptz;
    v_id    bigint;
    v_tid   uuid;
    v_wakes text;
BEGIN
    IF jsonb_typeof(v_items) = 'object' THEN  -- also {"items": [...]}, as _push_retrying
        v_items := v_items -> 'items';
    END IF;
    IF jsonb_typeof(v_items) = 'array' AND jsonb_array_length(v_items) = 1 THEN
        e := v_items -> 0;
        -- The partition's lock and its next offset, when the partition is the named one,
        -- of an uncapped queue, and takes this item.
        v_ts := clock_timestamp();  -- (Citus: no volatile call in a write)
        UPDATE queen.partition_counters c
           SET next_offset = c.next_offset + 1, last_activity = v_ts
          FROM queen.partitions p
          JOIN queen.queues q ON q.id = p.queue_id
         WHERE c.partition_id = p_partition_id AND p.id = p_partition_id
           AND q.name = e ->> 'queue'
           AND p.name = coalesce(nullif(e ->> 'partition', ''), 'Default')
           AND q.max_queue_size <= 0
           AND (NOT q.encryption_enabled OR e -> 'isEncrypted' = 'true'::jsonb)
        RETURNING c.next_offset - 1 INTO v_off;
    END IF;
    IF v_off IS NOT NULL THEN
        -- Under the lock: not before the partition's newest message.
        SELECT max(pl.last_message_created_at) INTO v_ts
          FROM queen.partition_lookup pl WHERE pl.partition_id = p_partition_id;
        v_ts := greatest(clock_timestamp(), v_ts);
    END IF;
    IF v_off IS NULL THEN
        v_wakes := set_config('queen.server_wakes', 'on', true);  -- (no statement)
        RETURN queen._push_retrying(v_items, true, p_partition_id)::text;
    END IF;
    v_txn := coalesce(e ->> 'transactionId', gen_random_uuid()::text);
    INSERT INTO queen.messages
           (id, transaction_id, partition_id, payload, trace_id, producer_sub, is_encrypted,
            created_at, partition_offset, trace_context)
    OVERRIDING SYSTEM VALUE
    VALUES (nextval('queen.messages_id_seq'::regclass), v_txn, p_partition_id,
            coalesce(e -> 'payload', 'null'::jsonb), queen._try_uuid(e ->> 'traceId'),
            nullif(e ->> 'producerSub', ''), coalesce(e -> 'isEncrypted' = 'true'::jsonb, false),
            v_ts, v_off, e -> 'traceContext')
    ON CONFLICT (partition_id, transaction_id) DO NOTHING
    RETURNING id, trace_id INTO v_id, v_tid;
    IF v_id IS NOT NULL THEN
        RETURN json_build_array(json_build_array(
            'queued', v_id::text, p_partition_id, v_tid, NULL, NULL,
            CASE WHEN e ->> 'transactionId' IS NULL THEN v_txn END))::text;
    END IF;
    -- Stored already: the offset goes back (offsets stay dense), the stored id answers.
    UPDATE queen.partition_counters SET next_offset = v_off
     WHERE partition_id = p_partition_id;
    SELECT m.id INTO v_id FROM queen.messages m
     WHERE m.partition_id = p_partition_id AND m.transaction_id = v_txn;
    RETURN json_build_array(json_build_array(
        'duplicate', v_id::text, p_partition_id, queen._try_uuid(e ->> 'traceId'), NULL, NULL,
        NULL))::text;
END;
$$;

CREATE OR REPLACE FUNCTION queen.push_partition_v1(p_partition_id uuid, p_items jsonb)
RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    RETURN queen.push_partition_v2(p_partition_id, p_items::text);
END;
$$;

-- The id of a queue's partition, created with its queue when missing (NULL for a name a push
-- would refuse). On Citus the server asks this before the delegated push of a partition
-- whose id it does not know yet (queen_threads/queue/store.py), instead of the general
-- push: a lookup is a read of the coordinator's copy of the definitions, and a creation
-- writes them once per partition for the whole cluster.
CREATE OR REPLACE FUNCTION queen.partition_id_v1(p_queue text, p_partition text)
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_id uuid;
BEGIN
    IF coalesce(p_queue, '') = '' OR p_partition IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT p.id INTO v_id FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
     WHERE q.name = p_queue AND p.name = p_partition;
    IF v_id IS NULL THEN
        PERFORM queen._definitions_lock();
        INSERT INTO queen.queues (name, namespace, task)
        VALUES (p_queue, queen._queue_namespace(p_queue), queen._queue_task(p_queue))
        ON CONFLICT (name) DO NOTHING;
        INSERT INTO queen.partitions (queue_id, name)
        SELECT q.id, p_partition FROM queen.queues q WHERE q.name = p_queue
        ON CONFLICT (queue_id, name) DO NOTHING;
        SELECT p.id INTO v_id FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
         WHERE q.name = p_queue AND p.name = p_partition;
    END IF;
    RETURN v_id;
END;
$$;
