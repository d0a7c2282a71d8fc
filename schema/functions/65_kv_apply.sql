-- KEY/VALUE batches: POST /api/v1/kv (queen.kv_batch_v1) and the `kv` rider of
-- POST /api/v1/transaction (queen.transaction_kv_v1, called by execute_transaction_v2).
-- The ops were validated by queen_threads/kv/body.py (names, expiry, expect, budgets, one
-- write per key per call).
--
-- Apply order: every single-key op in ascending (namespace, key) COLLATE "C", then the
-- multi-key reads, so concurrent batches take their row locks in one order (no deadlock
-- between two batches) and a getMany sees the writes of its own batch. Answers are
-- index-aligned to the input whatever the apply order.
--
-- A lost precondition is a verdict (`applied: false`), not an error. An op marked
-- `required` turns it into SQLSTATE QK001, whose DETAIL is the verdict as JSON
-- {index, op, ns, key, reason, version, value}: the caller rolls the whole call back
-- and answers it (queen._kv_precondition_answer).

CREATE OR REPLACE FUNCTION queen.kv_apply_v1(p_ops jsonb)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    v_now    timestamptz := now();
    v_budget bigint := 4194304;  -- bytes of values the prefix pages of one call may return
    v_out    jsonb[] := array_fill(NULL::jsonb, ARRAY[jsonb_array_length(p_ops)]);
    v_res    jsonb;
    v_kind   text;
    v_ns     text;
    v_key    text;
    v_expect bigint;
    -- [ns, key] of every key the call writes (a check of one locks it FOR UPDATE)
    v_written jsonb := coalesce((SELECT jsonb_agg(jsonb_build_array(o ->> 'ns', o ->> 'key'))
                                   FROM jsonb_array_elements(p_ops) o
                                  WHERE o ->> 'op' IN ('put', 'putIfAbsent', 'delete', 'incr')),
                                '[]'::jsonb);
    rec      record;
BEGIN
    FOR rec IN
        SELECT o.op, o.ord::integer AS ord
          FROM jsonb_array_elements(p_ops) WITH ORDINALITY o(op, ord)
         ORDER BY CASE WHEN o.op ->> 'op' IN ('getMany', 'getPrefix') THEN 1 ELSE 0 END,
                  (o.op ->> 'ns') COLLATE "C",
                  (coalesce(o.op ->> 'key', o.op ->> 'prefix', '')) COLLATE "C",
                  o.ord
    LOOP
        v_kind := rec.op ->> 'op';
        v_ns := rec.op ->> 'ns';
        v_key := rec.op ->> 'key';
        v_expect := CASE WHEN v_kind = 'putIfAbsent' THEN 0
                         ELSE (rec.op ->> 'expect')::bigint END;
        v_res := CASE v_kind
            WHEN 'get' THEN queen._kv_get(v_ns, v_key, v_now)
            WHEN 'getMany' THEN queen._kv_get_many(v_ns, rec.op -> 'keys', v_now)
            WHEN 'getPrefix' THEN queen._kv_get_prefix(v_ns, rec.op, v_now, v_budget)
            WHEN 'put' THEN queen._kv_put(v_ns, v_key, rec.op -> 'value',
                                          queen._kv_expiry(rec.op, v_now), v_expect, v_now, v_kind)
            WHEN 'putIfAbsent' THEN queen._kv_put(v_ns, v_key, rec.op -> 'value',
                                                  queen._kv_expiry(rec.op, v_now), 0, v_now, v_kind)
            WHEN 'delete' THEN queen._kv_delete(v_ns, v_key, v_expect, v_now)
            WHEN 'check' THEN queen._kv_check(v_ns, v_key, v_expect, v_now,
                v_written @> jsonb_build_array(jsonb_build_array(v_ns, v_key)))
            WHEN 'incr' THEN queen._kv_incr(v_ns, v_key, (rec.op ->> 'delta')::numeric,
                                            (rec.op ->> 'min')::numeric,
                                            (rec.op ->> 'max')::numeric,
                                            queen._kv_expiry(rec.op, v_now), v_now)
        END;
        IF v_res IS NULL THEN
            RAISE EXCEPTION 'kv: unknown operation %', coalesce(v_kind, 'null');
        END IF;
        IF v_kind = 'getPrefix' THEN
            v_budget := v_budget - coalesce((SELECT sum(octet_length((r -> 'value')::text))
                                               FROM jsonb_array_elements(v_res -> 'rows') r), 0);
        END IF;
        IF v_res ->> 'applied' = 'false' AND rec.op -> 'required' = 'true'::jsonb THEN
            RAISE EXCEPTION 'kv_precondition'
                USING ERRCODE = 'QK001',
                      DETAIL = jsonb_build_object(
                          'index', rec.ord - 1, 'op', v_kind, 'ns', v_ns, 'key', v_key,
                          'reason', v_res -> 'reason', 'version', v_res -> 'version',
                          'value', v_res -> 'value')::text;
        END IF;
        v_out[rec.ord] := jsonb_build_object('index', rec.ord - 1) || v_res;
    END LOOP;
    RETURN to_jsonb(v_out);
END;
$$;

-- The answer of a call rolled back by a required precondition (HTTP 200: a verdict, not
-- an error). `failedIndex` is p_base + the op's index: in a transaction, the flat index
-- of results[] (every pushed item and every ack come first).
CREATE OR REPLACE FUNCTION queen._kv_precondition_answer(p_detail text, p_base integer)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object(
        'success', false, 'ok', false, 'reason', 'kv_precondition',
        'error', format('kv precondition %s failed at index %s', d ->> 'reason',
                        p_base + (d ->> 'index')::integer),
        'failedIndex', p_base + (d ->> 'index')::integer,
        'kvReason', d -> 'reason', 'version', d -> 'version', 'value', d -> 'value')
      FROM (SELECT p_detail::jsonb AS d) x
$$;

-- POST /api/v1/kv: {operations} -> {results} in one transaction. A block (and its
-- subtransaction) only when an op is `required`.
CREATE OR REPLACE FUNCTION queen.kv_batch_v1(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    v_ops    jsonb := p -> 'operations';
    v_detail text;
BEGIN
    IF NOT jsonb_path_exists(v_ops, '$[*] ? (@.required == true)') THEN
        RETURN jsonb_build_object('results', queen.kv_apply_v1(v_ops));
    END IF;
    BEGIN
        RETURN jsonb_build_object('results', queen.kv_apply_v1(v_ops));
    EXCEPTION WHEN SQLSTATE 'QK001' THEN
        GET STACKED DIAGNOSTICS v_detail = PG_EXCEPTION_DETAIL;
        RETURN queen._kv_precondition_answer(v_detail, 0) || jsonb_build_object('results', '[]'::jsonb);
    END;
END;
$$;

-- The `kv` rider of a transaction: results with their flat index (p_base + i) and
-- `type: "kv"`. A required precondition raises QK001 (the transaction answers it).
CREATE OR REPLACE FUNCTION queen.transaction_kv_v1(p_ops jsonb, p_base integer)
RETURNS jsonb
LANGUAGE sql
AS $$
    SELECT coalesce(jsonb_agg(r || jsonb_build_object('index', p_base + (r ->> 'index')::integer,
                                                      'kvIndex', r -> 'index', 'type', 'kv')
                              ORDER BY (r ->> 'index')::integer), '[]'::jsonb)
      FROM jsonb_array_elements(queen.kv_apply_v1(p_ops)) r
$$;
