-- KEY/VALUE writes and checks, one key each (queen.kv_apply_v1 calls them in key order).
-- Each returns the verdict without its index: {op, applied, key, value, version, reason?}
-- where value/version are what a reader sees after the call (docs/kv.md). The op was
-- validated before (queen_threads/kv/body.py): the shapes here are trusted.

-- put / putIfAbsent. `expect` NULL: an upsert that replaces value and expiry. 0: "must
-- not exist", which wins against an expired row not swept yet (a new lineage). N > 0: a
-- pure update of the live row at version N; it never creates a row.
CREATE OR REPLACE FUNCTION queen._kv_put(p_ns text, p_key text, p_value jsonb,
                                         p_expiry timestamptz, p_expect bigint,
                                         p_now timestamptz, p_op text)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_ver bigint;
    r     queen.kv;
BEGIN
    IF p_expect IS NULL THEN
        INSERT INTO queen.kv AS k (namespace, key, value, version, expires_at, created_at, updated_at)
        VALUES (p_ns, p_key, p_value, nextval('queen.kv_version_seq'), p_expiry, p_now, p_now)
        ON CONFLICT (namespace, key) DO UPDATE
           SET value = EXCLUDED.value, version = EXCLUDED.version,
               expires_at = EXCLUDED.expires_at,
               created_at = CASE WHEN queen._kv_live(k.expires_at, p_now)
                                 THEN k.created_at ELSE EXCLUDED.created_at END,
               updated_at = EXCLUDED.updated_at
        RETURNING k.version INTO v_ver;
        RETURN queen._kv_verdict(p_op, p_key, true, NULL, p_value, v_ver);
    END IF;
    IF p_expect = 0 THEN
        -- The conflict arm locks the row before its WHERE: of N concurrent callers one
        -- applies, and each loser then reads the winner's row (a fresh snapshot).
        INSERT INTO queen.kv AS k (namespace, key, value, version, expires_at, created_at, updated_at)
        VALUES (p_ns, p_key, p_value, nextval('queen.kv_version_seq'), p_expiry, p_now, p_now)
        ON CONFLICT (namespace, key) DO UPDATE
           SET value = EXCLUDED.value, version = EXCLUDED.version,
               expires_at = EXCLUDED.expires_at, created_at = EXCLUDED.created_at,
               updated_at = EXCLUDED.updated_at
         WHERE NOT queen._kv_live(k.expires_at, p_now)
        RETURNING k.version INTO v_ver;
        IF v_ver IS NOT NULL THEN
            RETURN queen._kv_verdict(p_op, p_key, true, NULL, p_value, v_ver);
        END IF;
        SELECT * INTO r FROM queen.kv WHERE namespace = p_ns AND key = p_key;
        RETURN queen._kv_verdict(p_op, p_key, false, 'exists', r.value,
                                 queen._kv_ver(r.version, r.expires_at, p_now));
    END IF;
    SELECT * INTO r FROM queen.kv WHERE namespace = p_ns AND key = p_key FOR UPDATE;
    v_ver := queen._kv_ver(r.version, r.expires_at, p_now);
    IF v_ver <> p_expect THEN
        RETURN queen._kv_verdict(p_op, p_key, false,
                                 CASE WHEN v_ver = 0 THEN 'absent' ELSE 'version' END,
                                 CASE WHEN v_ver = 0 THEN NULL ELSE r.value END, v_ver);
    END IF;
    v_ver := nextval('queen.kv_version_seq');  -- (a variable: Citus refuses nextval in an UPDATE)
    UPDATE queen.kv SET value = p_value, version = v_ver,
                        expires_at = p_expiry, updated_at = p_now
     WHERE namespace = p_ns AND key = p_key;
    RETURN queen._kv_verdict(p_op, p_key, true, NULL, p_value, v_ver);
END;
$$;

-- delete: idempotent (`absent` when there was nothing live); with `expect` 0 it asserts
-- absence, with N > 0 it deletes only the live row at version N.
CREATE OR REPLACE FUNCTION queen._kv_delete(p_ns text, p_key text, p_expect bigint,
                                            p_now timestamptz)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_ver bigint;
    r     queen.kv;
BEGIN
    SELECT * INTO r FROM queen.kv WHERE namespace = p_ns AND key = p_key FOR UPDATE;
    v_ver := queen._kv_ver(r.version, r.expires_at, p_now);
    IF p_expect = 0 THEN
        RETURN queen._kv_verdict('delete', p_key, v_ver = 0, 'exists',
                                 CASE WHEN v_ver = 0 THEN NULL ELSE r.value END, v_ver);
    END IF;
    IF v_ver = 0 OR (p_expect IS NOT NULL AND v_ver <> p_expect) THEN
        RETURN queen._kv_verdict('delete', p_key, false,
                                 CASE WHEN v_ver = 0 THEN 'absent' ELSE 'version' END,
                                 CASE WHEN v_ver = 0 THEN NULL ELSE r.value END, v_ver);
    END IF;
    DELETE FROM queen.kv WHERE namespace = p_ns AND key = p_key;
    RETURN queen._kv_verdict('delete', p_key, true, NULL, r.value, v_ver);
END;
$$;

-- check: is the key at version `expect` (0: not there)? Writes nothing. The row is
-- locked FOR SHARE, so inside a transaction the precondition holds until the commit: a
-- lock's take-over or renew waits for a guarded bundle instead of slipping under it.
-- FOR UPDATE when the same call also writes the key (p_exclusive): two calls that both
-- held it shared and then both wanted to write it would deadlock.
CREATE OR REPLACE FUNCTION queen._kv_check(p_ns text, p_key text, p_expect bigint,
                                           p_now timestamptz, p_exclusive boolean)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_ver bigint;
    r     queen.kv;
BEGIN
    IF p_exclusive THEN
        SELECT * INTO r FROM queen.kv WHERE namespace = p_ns AND key = p_key FOR UPDATE;
    ELSE
        SELECT * INTO r FROM queen.kv WHERE namespace = p_ns AND key = p_key FOR SHARE;
    END IF;
    v_ver := queen._kv_ver(r.version, r.expires_at, p_now);
    RETURN queen._kv_verdict('check', p_key, v_ver = p_expect,
                             CASE WHEN p_expect = 0 THEN 'exists'
                                  WHEN v_ver = 0 THEN 'absent' ELSE 'version' END,
                             CASE WHEN v_ver = 0 THEN NULL ELSE r.value END, v_ver);
END;
$$;

-- incr: add `delta` to the live number (an absent, expired or swept row counts 0).
-- `min`/`max` refuse (reason `limit`) instead of clamping, on the first write of a window
-- too; a live non-number refuses with `type`. The expiry is set only when the row is
-- created (or its lineage expired): a fixed window closes however busy its key is.
CREATE OR REPLACE FUNCTION queen._kv_incr(p_ns text, p_key text, p_delta numeric,
                                          p_min numeric, p_max numeric,
                                          p_expiry timestamptz, p_now timestamptz)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_next numeric;
    v_ver  bigint;
    r      queen.kv;
BEGIN
    LOOP
        SELECT * INTO r FROM queen.kv WHERE namespace = p_ns AND key = p_key FOR UPDATE;
        v_ver := queen._kv_ver(r.version, r.expires_at, p_now);
        IF v_ver <> 0 AND jsonb_typeof(r.value) <> 'number' THEN
            RETURN queen._kv_verdict('incr', p_key, false, 'type', r.value, v_ver);
        END IF;
        v_next := queen._kv_num(r.value, r.expires_at, p_now) + p_delta;
        IF (p_min IS NOT NULL AND v_next < p_min) OR (p_max IS NOT NULL AND v_next > p_max) THEN
            RETURN queen._kv_verdict('incr', p_key, false, 'limit',
                                     to_jsonb(trim_scale(v_next - p_delta)), v_ver);
        END IF;
        IF r.key IS NOT NULL THEN
            -- (the new values in variables: Citus refuses nextval, and a CASE over
            -- non-immutable values, in an UPDATE of a distributed table)
            r.expires_at := CASE WHEN v_ver <> 0 THEN r.expires_at ELSE p_expiry END;
            r.created_at := CASE WHEN v_ver <> 0 THEN r.created_at ELSE p_now END;
            v_ver := nextval('queen.kv_version_seq');
            UPDATE queen.kv
               SET value = to_jsonb(trim_scale(v_next)), version = v_ver,
                   expires_at = r.expires_at, created_at = r.created_at, updated_at = p_now
             WHERE namespace = p_ns AND key = p_key;
        ELSE
            INSERT INTO queen.kv (namespace, key, value, version, expires_at, created_at, updated_at)
            VALUES (p_ns, p_key, to_jsonb(trim_scale(v_next)),
                    nextval('queen.kv_version_seq'), p_expiry, p_now, p_now)
            ON CONFLICT (namespace, key) DO NOTHING
            RETURNING version INTO v_ver;
            CONTINUE WHEN v_ver IS NULL;  -- a concurrent first write: read it and add again
        END IF;
        RETURN queen._kv_verdict('incr', p_key, true, NULL, to_jsonb(trim_scale(v_next)), v_ver);
    END LOOP;
END;
$$;
