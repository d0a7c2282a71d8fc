-- LOCKS and SEMAPHORES (POST /api/v1/locks, docs/kv.md). A permit is one row of
-- queen.kv in the namespace 'queen-locks', key '<name>#<slot>' (a name never contains
-- '#'), value {owner[, since]}, with the lock's lifetime as its expiry. A lock is slot 0;
-- a semaphore of `limit` permits has the slots 0..limit-1, so it never has more live
-- holders than its limit: each slot is one primary key. The fencing token is the row's
-- version (queen.kv_version_seq, no cache): every later holder of a slot, and every
-- renew, gets a higher one. The guard a grant answers is the kv `check` of that row at
-- that token, which a transaction's `kv` rider holds FOR SHARE until its commit.
--
-- The ops were validated by queen_threads/kv/lock_body.py. One call, one transaction; its
-- operations are independent (each on its own lock).

CREATE OR REPLACE FUNCTION queen._lock_key(p_name text, p_slot integer)
RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT p_name || '#' || p_slot $$;

CREATE OR REPLACE FUNCTION queen._lock_guard(p_name text, p_slot integer, p_token bigint)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('op', 'check', 'ns', 'queen-locks',
                              'key', queen._lock_key(p_name, p_slot),
                              'expect', p_token, 'required', true)
$$;

-- The live permits of `p_name` among slots 0..p_limit-1 (NULL: every slot), by slot.
CREATE OR REPLACE FUNCTION queen._lock_held(p_name text, p_limit integer, p_now timestamptz)
RETURNS TABLE (slot integer, owner jsonb, token bigint, since text, expires_at timestamptz,
               updated_at timestamptz)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT s.slot, coalesce(k.value -> 'owner', 'null'::jsonb), k.version,
           coalesce(k.value ->> 'since', queen._iso_us(k.updated_at)), k.expires_at, k.updated_at
      FROM queen.kv k
     CROSS JOIN LATERAL (SELECT substr(k.key, length(p_name) + 2) AS digits) d
     CROSS JOIN LATERAL (SELECT CASE WHEN d.digits ~ '^(0|[1-9][0-9]{0,3})$'
                                     THEN d.digits::integer END AS slot) s
     WHERE k.namespace = 'queen-locks'
       AND starts_with(k.key, p_name || '#') AND s.slot IS NOT NULL AND s.slot < 1024
       AND (p_limit IS NULL OR s.slot < p_limit)
       AND queen._kv_live(k.expires_at, p_now)
     ORDER BY s.slot;
END;
$$;

CREATE OR REPLACE FUNCTION queen._lock_brief(p_name text, p_limit integer, p_now timestamptz)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object('slot', h.slot, 'owner', h.owner)
                              ORDER BY h.slot), '[]'::jsonb)
      FROM queen._lock_held(p_name, p_limit, p_now) h
$$;

-- acquire: the owner's live permit if it has one (`already`), else a free slot (tried
-- in slot order, the order every caller locks them in), else `held`. Taking a slot whose row expired is
-- a take-over. Of N racing callers on one slot, the conflict arm's row lock lets one win.
CREATE OR REPLACE FUNCTION queen._lock_acquire(p_op jsonb, p_now timestamptz)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_name   text := p_op ->> 'name';
    v_owner  text := p_op ->> 'owner';
    v_limit  integer := coalesce((p_op ->> 'limit')::integer, 1);
    v_expiry timestamptz := p_now + make_interval(secs => (p_op ->> 'ttlSeconds')::double precision);
    v_slot   integer;
    v_token  bigint;
    v_over   boolean;
    v_base   jsonb := jsonb_build_object('op', 'acquire', 'name', p_op -> 'name');
BEGIN
    IF v_owner IS NOT NULL THEN
        SELECT h.slot, h.token INTO v_slot, v_token
          FROM queen._lock_held(v_name, v_limit, p_now) h
         WHERE h.owner = to_jsonb(v_owner) LIMIT 1;
        IF v_token IS NOT NULL THEN
            RETURN v_base || jsonb_build_object('acquired', true, 'slot', v_slot, 'token', v_token,
                'owner', v_owner, 'guard', queen._lock_guard(v_name, v_slot, v_token),
                'already', true, '_outcome', 'already');
        END IF;
    END IF;
    -- Slot by slot, in one order for every caller: a conflict locks the slot's row even
    -- when it is not taken, so racing callers in random orders deadlocked. (Each slot's
    -- row is read by its own key: on Citus a statement on one shard.)
    FOR v_slot IN 0 .. v_limit - 1 LOOP
        CONTINUE WHEN EXISTS (SELECT 1 FROM queen.kv k WHERE k.namespace = 'queen-locks'
                                 AND k.key = queen._lock_key(v_name, v_slot)
                                 AND queen._kv_live(k.expires_at, p_now));
        -- A row there (expired: the filter above) makes this a take-over (not `xmax <> 0`
        -- in RETURNING: Citus cannot plan a system column on a distributed table).
        v_over := EXISTS (SELECT 1 FROM queen.kv k WHERE k.namespace = 'queen-locks'
                             AND k.key = queen._lock_key(v_name, v_slot));
        INSERT INTO queen.kv AS k (namespace, key, value, version, expires_at, created_at, updated_at)
        VALUES ('queen-locks', queen._lock_key(v_name, v_slot),
                jsonb_build_object('owner', v_owner), nextval('queen.kv_version_seq'),
                v_expiry, p_now, p_now)
        ON CONFLICT (namespace, key) DO UPDATE
           SET value = EXCLUDED.value, version = EXCLUDED.version,
               expires_at = EXCLUDED.expires_at, created_at = EXCLUDED.created_at,
               updated_at = EXCLUDED.updated_at
         WHERE NOT queen._kv_live(k.expires_at, p_now)
        RETURNING k.version INTO v_token;
        IF v_token IS NULL AND v_owner IS NOT NULL THEN
            -- Lost the slot: to this owner itself, when an earlier answer was lost?
            SELECT k.version INTO v_token FROM queen.kv k
             WHERE k.namespace = 'queen-locks' AND k.key = queen._lock_key(v_name, v_slot)
               AND k.value -> 'owner' = to_jsonb(v_owner) AND queen._kv_live(k.expires_at, p_now);
            v_over := NULL;
        END IF;
        IF v_token IS NOT NULL THEN
            RETURN v_base || jsonb_build_object('acquired', true, 'slot', v_slot, 'token', v_token,
                'owner', v_owner, 'guard', queen._lock_guard(v_name, v_slot, v_token),
                '_outcome', CASE WHEN v_over IS NULL THEN 'already'
                                 WHEN v_over THEN 'takeover' ELSE 'grant' END)
                || CASE WHEN v_over IS NULL THEN '{"already": true}'::jsonb ELSE '{}'::jsonb END;
        END IF;
    END LOOP;
    RETURN v_base || jsonb_build_object('acquired', false, 'reason', 'held',
        'holders', queen._lock_brief(v_name, v_limit, p_now), '_outcome', 'refusal');
END;
$$;

-- renew / release: the row of the slot, locked. The token is the row's: this holder's
-- period. A stale token on a row this owner holds: its own earlier renew landed and only
-- the answer was lost, so a renew goes on at the row's token. Anything else is `lost`.
CREATE OR REPLACE FUNCTION queen._lock_renew_or_release(p_op jsonb, p_now timestamptz)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_kind  text := p_op ->> 'op';
    v_name  text := p_op ->> 'name';
    v_slot  integer := coalesce((p_op ->> 'slot')::integer, 0);
    v_flag  text := CASE WHEN v_kind = 'renew' THEN 'renewed' ELSE 'released' END;
    v_ver   bigint;
    v_token bigint;
    r       queen.kv;
BEGIN
    SELECT * INTO r FROM queen.kv
     WHERE namespace = 'queen-locks' AND key = queen._lock_key(v_name, v_slot) FOR UPDATE;
    v_ver := queen._kv_ver(r.version, r.expires_at, p_now);
    IF v_ver = 0 OR (v_ver <> (p_op ->> 'token')::bigint
                     AND NOT (v_kind = 'renew' AND r.value -> 'owner' = p_op -> 'owner')) THEN
        RETURN jsonb_build_object('op', v_kind, 'name', v_name, v_flag, false, 'reason', 'lost',
            'slot', v_slot,
            'holders', CASE WHEN v_ver = 0 THEN '[]'::jsonb
                            ELSE jsonb_build_array(jsonb_build_object(
                                'slot', v_slot, 'owner', coalesce(r.value -> 'owner', 'null'::jsonb)))
                       END);
    END IF;
    IF v_kind = 'release' THEN
        DELETE FROM queen.kv WHERE namespace = 'queen-locks' AND key = r.key;
        RETURN jsonb_build_object('op', v_kind, 'name', v_name, 'released', true, 'slot', v_slot);
    END IF;
    -- (the new values in variables: Citus refuses nextval and non-immutable expressions in
    -- an UPDATE of a distributed table)
    r.value := CASE WHEN jsonb_typeof(r.value) = 'object'
                    THEN r.value || jsonb_build_object('since',
                             coalesce(r.value ->> 'since', queen._iso_us(r.updated_at)))
                    ELSE r.value END;
    r.expires_at := p_now + make_interval(secs => (p_op ->> 'ttlSeconds')::double precision);
    v_token := nextval('queen.kv_version_seq');
    UPDATE queen.kv
       SET value = r.value, version = v_token, expires_at = r.expires_at, updated_at = p_now
     WHERE namespace = 'queen-locks' AND key = r.key;
    RETURN jsonb_build_object('op', v_kind, 'name', v_name, 'renewed', true, 'slot', v_slot,
                              'token', v_token, 'guard', queen._lock_guard(v_name, v_slot, v_token));
END;
$$;

CREATE OR REPLACE FUNCTION queen._lock_get(p_op jsonb, p_now timestamptz)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('op', 'get', 'name', p_op -> 'name', 'held', count(h.slot) > 0,
        'holders', coalesce(jsonb_agg(jsonb_build_object(
            'slot', h.slot, 'owner', h.owner, 'token', h.token, 'since', h.since,
            'expiresAt', queen._iso_us(h.expires_at), 'renewedAt', queen._iso_us(h.updated_at))
            ORDER BY h.slot) FILTER (WHERE h.slot IS NOT NULL), '[]'::jsonb))
      FROM queen._lock_held(p_op ->> 'name', NULL, p_now) h
$$;

-- {operations} -> {results, counts: {grant, takeover, already, refusal}}; the counts feed
-- the metrics (queen_threads/kv/) and are not part of the HTTP answer.
CREATE OR REPLACE FUNCTION queen.locks_apply_v1(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    v_now     timestamptz := now();
    v_results jsonb := '[]'::jsonb;
    v_counts  jsonb := '{}'::jsonb;
    v_res     jsonb;
    v_outcome text;
    rec       record;
BEGIN
    FOR rec IN SELECT o.op, o.ord::integer AS ord
                 FROM jsonb_array_elements(p -> 'operations') WITH ORDINALITY o(op, ord)
                ORDER BY o.ord
    LOOP
        v_res := CASE rec.op ->> 'op'
            WHEN 'acquire' THEN queen._lock_acquire(rec.op, v_now)
            WHEN 'get' THEN queen._lock_get(rec.op, v_now)
            ELSE queen._lock_renew_or_release(rec.op, v_now)
        END;
        v_outcome := v_res ->> '_outcome';
        IF v_outcome IS NOT NULL THEN
            v_counts := v_counts || jsonb_build_object(
                v_outcome, coalesce((v_counts ->> v_outcome)::integer, 0) + 1);
        END IF;
        v_results := v_results || jsonb_build_array(
            jsonb_build_object('index', rec.ord - 1) || (v_res - '_outcome'));
    END LOOP;
    RETURN jsonb_build_object('results', v_results, 'counts', v_counts);
END;
$$;
