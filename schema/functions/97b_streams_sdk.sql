-- THE STREAMING SDK (/streams/v1/*): query registration, cycle commits and state reads,
-- over the tables of migration 0017. The routes validate the shapes (queen_threads/
-- streams_sdk/body.py); these functions decide. A refusal answers
-- {success:false, code: not_found | conflict, error} and has changed nothing.

-- Register a query by name (idempotent). Input: {name, sourceQueue, sinkQueue|null,
-- configHash, reset}. A name registered with another configHash is refused (conflict)
-- unless `reset`, which drops the query's state and takes the new shape.
-- Output: {success, query_id, name, config_hash, fresh, reset}.
CREATE OR REPLACE FUNCTION queen.sdk_register_v1(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_name  text := p ->> 'name';
    v_hash  text := p ->> 'configHash';
    v_reset boolean := coalesce(queen._jbool(p -> 'reset', false), false);
    v_q     queen.sdk_queries;
    v_fresh boolean := false;
    v_wiped boolean := false;
    v_now   timestamptz := now();  -- a value: Citus allows no now() in a CASE of an UPDATE
BEGIN
    INSERT INTO queen.sdk_queries (name, source_queue, sink_queue, config_hash)
    VALUES (v_name, p ->> 'sourceQueue', p ->> 'sinkQueue', v_hash)
    ON CONFLICT (name) DO NOTHING
    RETURNING * INTO v_q;
    v_fresh := FOUND;
    IF NOT v_fresh THEN
        -- A registration of the same name at the same moment waits here for the first.
        SELECT * INTO v_q FROM queen.sdk_queries WHERE name = v_name FOR UPDATE;
        IF v_q.config_hash <> v_hash THEN
            IF NOT v_reset THEN
                RETURN jsonb_build_object(
                    'success', false, 'code', 'conflict',
                    'query_id', v_q.id, 'name', v_name,
                    'error', format('config_hash mismatch: the operator chain of query %L '
                                    'changed since it was registered; pass reset=True to '
                                    'drop its state, or use a new query name', v_name));
            END IF;
            DELETE FROM queen.sdk_shards WHERE query_id = v_q.id;  -- its state cascades
            v_wiped := true;
        END IF;
        UPDATE queen.sdk_queries
           SET source_queue = p ->> 'sourceQueue', sink_queue = p ->> 'sinkQueue',
               config_hash = v_hash, updated_at = v_now,
               reset_at = CASE WHEN v_wiped THEN v_now ELSE reset_at END
         WHERE id = v_q.id;
    END IF;
    RETURN jsonb_build_object('success', true, 'query_id', v_q.id, 'name', v_name,
                              'config_hash', v_hash, 'fresh', v_fresh, 'reset', v_wiped);
END;
$$;

-- State rows of one (query, partition). Input: {queryId, partitionId, keys: [] (all when
-- empty), keyPrefix|null, ripeAtOrBefore|null (only rows whose value.windowEnd, a number,
-- is at most this: the idle flush's ripe windows)}. Output: {success, rows:[{key, value,
-- updated_at}]} in key order.
CREATE OR REPLACE FUNCTION queen.sdk_state_get_v1(p jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_qid    uuid := queen._try_uuid(p ->> 'queryId');
    v_pid    uuid := queen._try_uuid(p ->> 'partitionId');
    v_keys   text[] := ARRAY(SELECT jsonb_array_elements_text(coalesce(p -> 'keys', '[]')));
    v_prefix text := nullif(p ->> 'keyPrefix', '');
    v_ripe   numeric := CASE WHEN jsonb_typeof(p -> 'ripeAtOrBefore') = 'number'
                             THEN (p ->> 'ripeAtOrBefore')::numeric END;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM queen.sdk_queries WHERE id = v_qid) THEN
        RETURN jsonb_build_object('success', false, 'code', 'not_found',
                                  'error', format('Query not found: %s', p ->> 'queryId'));
    END IF;
    RETURN jsonb_build_object('success', true, 'rows', coalesce((
        SELECT jsonb_agg(jsonb_build_object('key', s.key, 'value', s.value,
                                            'updated_at', queen._iso_us(s.updated_at))
                         ORDER BY s.key)
          FROM queen.sdk_state s
         WHERE s.query_id = v_qid AND s.partition_id = v_pid
           AND (cardinality(v_keys) = 0 OR s.key = ANY (v_keys))
           -- starts_with, not LIKE: a key may hold % and _
           AND (v_prefix IS NULL OR starts_with(s.key, v_prefix))
           AND (v_ripe IS NULL OR (jsonb_typeof(s.value -> 'windowEnd') = 'number'
                                   AND (s.value ->> 'windowEnd')::numeric <= v_ripe))),
        '[]'::jsonb));
END;
$$;

-- Acknowledge, inside a cycle, the source messages the caller processed: those of its
-- lease's batch that come at or before the one named by `p_ack` {transactionId, status,
-- error} in the order the SDK processes a batch in: createdAt in whole milliseconds, then
-- the id as a string (its runner sorts by exactly that, the same float arithmetic
-- included). That is the whole batch for an ordinary cycle, and the allowed head for a
-- gate's partial one. Within a millisecond string order is not delivery order ("1000" <
-- "999"), so the named message alone cannot say where the cycle ends. Each one goes
-- through the project's ack rules (queen._ack_items, 40_ack.sql), the named one with the
-- given status, the others completed; out of delivery order is fine, the cursor moves
-- over what is done. The caller holds the (partition, group) row locked and has checked
-- the lease. Raises (QSD09) on any item the ack rules refuse. Returns the items' results.
CREATE OR REPLACE FUNCTION queen._sdk_ack_through(
    p_pc queen.partition_consumers, p_mid bigint, p_ack jsonb
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_items   jsonb;
    v_results jsonb;
    v_refused text;
BEGIN
    WITH b AS (
        SELECT m.id, m.transaction_id, m.id::text COLLATE "C" AS sid,
               floor(extract(epoch FROM m.created_at)::float8 * 1000) AS ms
          FROM unnest(p_pc.batch_ids) AS d(id)
          JOIN queen.messages m ON m.id = d.id
    )
    SELECT jsonb_agg(jsonb_build_object(
               'transactionId', b.transaction_id, 'partitionId', p_pc.partition_id,
               'consumerGroup', p_pc.consumer_group, 'leaseId', p_pc.lease_id,
               'status', CASE WHEN b.id = p_mid THEN coalesce(p_ack ->> 'status', 'completed')
                              ELSE 'completed' END,
               'error', CASE WHEN b.id = p_mid THEN p_ack -> 'error' END)
           ORDER BY b.ms, b.sid)
      INTO v_items
      FROM b, (SELECT ms, sid FROM b WHERE b.id = p_mid) n
     WHERE (b.ms, b.sid) <= (n.ms, n.sid);
    v_results := queen._ack_items(v_items, false);
    SELECT r ->> 'error' INTO v_refused
      FROM jsonb_array_elements(v_results) r
     WHERE NOT (r ->> 'success')::boolean
     LIMIT 1;
    IF v_refused IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QSD09', MESSAGE = 'Ack refused: ' || v_refused;
    END IF;
    RETURN v_results;
END;
$$;

-- Apply a cycle's state operations to the shard; raises (QSD09) when a delete finds no
-- row: the state changed since the caller read it (another worker or flush emitted that
-- window already), so the whole cycle must not commit. Returns how many were applied.
CREATE OR REPLACE FUNCTION queen._sdk_apply_state(p_qid uuid, p_pid uuid, p_ops jsonb)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_op  jsonb;
    v_n   integer := 0;
    v_now timestamptz := now();  -- a value: Citus wants no now() in DO UPDATE SET
BEGIN
    FOR v_op IN SELECT e FROM jsonb_array_elements(p_ops) e LOOP
        IF v_op ->> 'type' = 'upsert' THEN
            INSERT INTO queen.sdk_state (query_id, partition_id, key, value)
            VALUES (p_qid, p_pid, v_op ->> 'key', v_op -> 'value')
            ON CONFLICT (query_id, partition_id, key)
            DO UPDATE SET value = EXCLUDED.value, updated_at = v_now;
        ELSE
            DELETE FROM queen.sdk_state
             WHERE query_id = p_qid AND partition_id = p_pid AND key = v_op ->> 'key';
            IF NOT FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'QSD09', MESSAGE = format(
                    'State changed since it was read: key %L no longer exists', v_op ->> 'key');
            END IF;
        END IF;
        v_n := v_n + 1;
    END LOOP;
    RETURN v_n;
END;
$$;

-- One cycle, all or nothing. Input: {queryId, partitionId, consumerGroup, stateOps:
-- [{type: upsert|delete, key, value}], pushItems: [validated push items], ack:
-- {transactionId, leaseId, status, error} | null, releaseLease}.
-- An ack needs the caller's live lease on (partition, group), and its message delivered
-- under it; otherwise nothing is written (conflict). It acknowledges the messages of the
-- lease's batch up to the named one (queen._sdk_ack_through); when some remain, `releaseLease`
-- gives them back at once, else the caller keeps the lease (they are delivered again, in
-- order, when it ends). Output: {success, query_id, partition_id, state_ops_applied,
-- push_results, ack_result: {success, count, status, lease_released} | null,
-- released: {queue, partition} | null (a lease given back)}.
CREATE OR REPLACE FUNCTION queen.sdk_cycle_v1(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_qid      uuid := queen._try_uuid(p ->> 'queryId');
    v_pid      uuid := queen._try_uuid(p ->> 'partitionId');
    v_group    text := coalesce(nullif(p ->> 'consumerGroup', ''), '__QUEUE_MODE__');
    v_ack      jsonb := CASE WHEN jsonb_typeof(p -> 'ack') = 'object' THEN p -> 'ack' END;
    v_items    jsonb := coalesce(p -> 'pushItems', '[]'::jsonb);
    v_pc       queen.partition_consumers;
    v_mid      bigint;
    v_applied  integer := 0;
    v_push     jsonb := '[]'::jsonb;
    v_acks     jsonb;
    v_ack_res  jsonb := 'null'::jsonb;
    v_released jsonb := 'null'::jsonb;
    v_freed    boolean := false;
    v_failed   text;
    v_place    record;
BEGIN
    -- A reset or delete of the query waits for the cycle (and the other way round).
    PERFORM 1 FROM queen.sdk_queries WHERE id = v_qid FOR KEY SHARE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('success', false, 'code', 'not_found',
                                  'error', format('Query not found: %s', p ->> 'queryId'));
    END IF;
    SELECT q.name AS queue, pt.name AS partition, q.namespace, q.task INTO v_place
      FROM queen.partitions pt JOIN queen.queues q ON q.id = pt.queue_id
     WHERE pt.id = v_pid;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('success', false, 'code', 'not_found',
                                  'error', format('Partition not found: %s', p ->> 'partitionId'));
    END IF;

    -- The fence: the ack's lease must be the live lease of (partition, group).
    IF v_ack IS NOT NULL THEN
        SELECT * INTO v_pc FROM queen.partition_consumers
         WHERE partition_id = v_pid AND consumer_group = v_group
           FOR UPDATE;
        IF NOT FOUND OR v_pc.lease_id IS NULL
           OR v_pc.lease_id IS DISTINCT FROM queen._try_uuid(v_ack ->> 'leaseId')
           OR v_pc.lease_expires_at <= now() THEN
            RETURN jsonb_build_object('success', false, 'code', 'conflict',
                'error', 'Invalid or expired lease: the partition is no longer leased to '
                         'this worker, so the cycle was not applied');
        END IF;
        SELECT m.id INTO v_mid FROM queen.messages m
         WHERE m.partition_id = v_pid AND m.transaction_id = v_ack ->> 'transactionId';
        -- Delivered under this lease and not acked yet: a retried cycle whose first
        -- attempt committed (its answer lost) finds its message acked, and changes nothing.
        IF v_mid IS NULL OR array_position(v_pc.batch_ids, v_mid) IS NULL
           OR v_mid = ANY (coalesce(v_pc.acked_ids, '{}')) THEN
            RETURN jsonb_build_object('success', false, 'code', 'conflict',
                'error', format('Message %s was not delivered under this lease',
                                v_ack ->> 'transactionId'));
        END IF;
    END IF;

    BEGIN
        -- The shard row: its lock serialises this (query, partition)'s cycles.
        INSERT INTO queen.sdk_shards AS s (query_id, partition_id, consumer_group)
        VALUES (v_qid, v_pid, v_group)
        ON CONFLICT (query_id, partition_id) DO UPDATE SET consumer_group = EXCLUDED.consumer_group;

        v_applied := queen._sdk_apply_state(v_qid, v_pid, coalesce(p -> 'stateOps', '[]'::jsonb));

        IF jsonb_array_length(v_items) > 0 THEN
            v_push := queen._push_items(v_items, true)::jsonb;
            SELECT coalesce(r ->> 'error', r ->> 'status') INTO v_failed
              FROM jsonb_array_elements(v_push) r
             WHERE r ->> 'status' NOT IN ('queued', 'duplicate')
             LIMIT 1;
            IF v_failed IS NOT NULL THEN
                RAISE EXCEPTION USING ERRCODE = 'QSD09',
                    MESSAGE = 'Sink push refused: ' || v_failed;
            END IF;
        END IF;

        IF v_ack IS NOT NULL THEN
            v_acks := queen._sdk_ack_through(v_pc, v_mid, v_ack);
            v_freed := EXISTS (SELECT 1 FROM jsonb_array_elements(v_acks) r
                                WHERE (r ->> 'leaseReleased')::boolean);
            IF NOT v_freed AND coalesce(queen._jbool(p -> 'releaseLease', true), true) THEN
                UPDATE queen.partition_consumers
                   SET last_lease_id = lease_id,
                       lease_id = NULL, lease_expires_at = NULL, lease_acquired_at = NULL,
                       batch_ids = NULL, acked_ids = NULL
                 WHERE partition_id = v_pid AND consumer_group = v_group
                   AND lease_id = v_pc.lease_id;
                v_freed := FOUND;
                IF v_freed THEN
                    PERFORM queen._wake(jsonb_build_object(
                        'kind', 'free', 'queue', v_place.queue, 'partition', v_place.partition,
                        'consumerGroup', v_group, 'namespace', v_place.namespace,
                        'task', v_place.task));
                END IF;
            END IF;
            v_ack_res := jsonb_build_object(
                'success', true, 'count', jsonb_array_length(v_acks),
                'status', v_acks -> -1 -> 'status', 'lease_released', v_freed);
            IF v_freed THEN
                v_released := jsonb_build_object('queue', v_place.queue,
                                                 'partition', v_place.partition);
            END IF;
        END IF;

        UPDATE queen.sdk_shards
           SET cycles = cycles + 1,
               acked = acked + coalesce(jsonb_array_length(v_acks), 0),
               pushed = pushed + jsonb_array_length(v_items),
               last_cycle_at = now()
         WHERE query_id = v_qid AND partition_id = v_pid;
    EXCEPTION WHEN SQLSTATE 'QSD09' THEN
        RETURN jsonb_build_object('success', false, 'code', 'conflict', 'error', SQLERRM);
    END;

    RETURN jsonb_build_object(
        'success', true, 'query_id', v_qid, 'partition_id', v_pid,
        'state_ops_applied', v_applied, 'push_results', v_push,
        'ack_result', v_ack_res, 'released', v_released);
END;
$$;

-- A query's shard counters, state size and its consumer group's lag on the source queue,
-- for the query listing (GET /streams/v1/queries): {consumerGroup, partitions, cycles,
-- acked, pushed, lastCycleAt, stateRows, stateBytes, lag}. Read by the query's own key (on
-- Citus nested in the listing's statement on the definitions, 50_nested_reads.sql).
CREATE OR REPLACE FUNCTION queen._sdk_query_stats(p_qid uuid, p_name text, p_source text)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    sh record;
    st record;
    v_grp text;
    v_lag numeric;
BEGIN
    SELECT count(*) AS n, coalesce(sum(s.cycles), 0) AS cycles,
           coalesce(sum(s.acked), 0) AS acked, coalesce(sum(s.pushed), 0) AS pushed,
           max(s.last_cycle_at) AS last_at, min(s.consumer_group) AS grp
      INTO sh
      FROM queen.sdk_shards s WHERE s.query_id = p_qid;
    v_grp := coalesce(sh.grp, 'streams.' || p_name);
    SELECT count(*) AS n,
           coalesce(sum(octet_length(s.key) + pg_column_size(s.value)), 0) AS bytes
      INTO st
      FROM queen.sdk_state s WHERE s.query_id = p_qid;
    SELECT coalesce(sum(gp.lag), 0) INTO v_lag
      FROM queen._group_partitions(v_grp) gp WHERE gp.queue_name = p_source;
    RETURN jsonb_build_object(
        'consumerGroup', v_grp, 'partitions', sh.n, 'cycles', sh.cycles, 'acked', sh.acked,
        'pushed', sh.pushed, 'lastCycleAt', queen._iso_ms(sh.last_at),
        'stateRows', st.n, 'stateBytes', st.bytes, 'lag', v_lag);
END;
$$;
