-- KEY/VALUE reads: get, getMany, getPrefix. A row past its expiry is never returned,
-- swept or not (queen._kv_live). PL/pgSQL, as every function here that reads queen.kv with
-- its arguments: Citus cannot plan a SQL function's parameters in a query on a
-- distributed table.

CREATE OR REPLACE FUNCTION queen._kv_get(p_ns text, p_key text, p_now timestamptz)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce(
        (SELECT jsonb_build_object('op', 'get', 'found', true)
                || queen._kv_row(k.key, k.value, k.version, k.expires_at, k.updated_at)
           FROM queen.kv k
          WHERE k.namespace = p_ns AND k.key = p_key AND queen._kv_live(k.expires_at, p_now)),
        jsonb_build_object('op', 'get', 'found', false, 'key', p_key));
END;
$$;

-- Rows in key order and the keys with no live row, in the order asked: absence is a
-- datum, not something the caller computes by difference.
CREATE OR REPLACE FUNCTION queen._kv_get_many(p_ns text, p_keys jsonb, p_now timestamptz)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (WITH want AS (
        SELECT w.k, min(w.o) AS o FROM jsonb_array_elements_text(p_keys) WITH ORDINALITY w(k, o)
         GROUP BY w.k
    ), hit AS (
        SELECT k.* FROM want JOIN queen.kv k ON k.namespace = p_ns AND k.key = want.k
         WHERE queen._kv_live(k.expires_at, p_now)
    )
    SELECT jsonb_build_object(
        'op', 'getMany',
        'rows', coalesce((SELECT jsonb_agg(queen._kv_row(h.key, h.value, h.version, h.expires_at,
                                                         h.updated_at) ORDER BY h.key)
                            FROM hit h), '[]'::jsonb),
        'missing', coalesce((SELECT jsonb_agg(to_jsonb(w.k) ORDER BY w.o) FROM want w
                              WHERE NOT EXISTS (SELECT 1 FROM hit h WHERE h.key = w.k)),
                            '[]'::jsonb),
        'truncated', false));
END;
$$;

-- Upper bound of the byte range of keys starting with p_prefix (NULL: none computable;
-- starts_with() alone then decides). Skips the surrogate block, backtracks past U+10FFFF.
CREATE OR REPLACE FUNCTION queen._kv_prefix_end(p_prefix text)
RETURNS text LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    v_s  text := p_prefix;
    v_cp integer;
BEGIN
    WHILE length(v_s) > 0 LOOP
        v_cp := ascii(right(v_s, 1));
        IF v_cp >= 1114111 THEN
            v_s := left(v_s, -1);
            CONTINUE;
        END IF;
        RETURN left(v_s, -1) || chr(CASE WHEN v_cp = 55295 THEN 57344 ELSE v_cp + 1 END);
    END LOOP;
    RETURN NULL;
END;
$$;

-- One page of the live keys starting with `prefix` (starts_with, never LIKE: `%` and `_`
-- are data), after the exclusive cursor `after`, at most `limit` (clamped to 1..1000,
-- default 100) and at most p_budget bytes of values (the row that crosses it is kept).
-- Every page is its own snapshot.
CREATE OR REPLACE FUNCTION queen._kv_get_prefix(p_ns text, p_op jsonb, p_now timestamptz,
                                                p_budget bigint)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_prefix    text := p_op ->> 'prefix';
    v_end       text := queen._kv_prefix_end(p_op ->> 'prefix');
    v_after     text := nullif(p_op ->> 'after', '');
    v_keys_only boolean := coalesce((p_op ->> 'keysOnly')::boolean, false);
    v_limit     integer := least(greatest(coalesce((p_op ->> 'limit')::integer, 100), 1), 1000);
    v_rows      jsonb;
    v_kept      integer;
    v_seen      integer;
    v_last      text;
BEGIN
    WITH page AS (
        SELECT k.*, row_number() OVER (ORDER BY k.key) AS rn,
               CASE WHEN v_keys_only THEN 0 ELSE octet_length(k.value::text) END AS blen
          FROM queen.kv k
         WHERE k.namespace = p_ns AND k.key >= v_prefix
           AND (v_end IS NULL OR k.key < v_end) AND starts_with(k.key, v_prefix)
           AND (v_after IS NULL OR k.key > v_after)
           AND queen._kv_live(k.expires_at, p_now)
         ORDER BY k.key
         LIMIT v_limit + 1
    ), kept AS (
        SELECT p.* FROM (SELECT page.*, sum(blen) OVER (ORDER BY rn) - blen AS before
                           FROM page) p
         WHERE p.rn <= v_limit AND p.before < p_budget
    )
    SELECT coalesce(jsonb_agg(queen._kv_row(key, value, version, expires_at, updated_at,
                                            v_keys_only) ORDER BY key), '[]'::jsonb),
           count(*), max(key), (SELECT count(*) FROM page)
      INTO v_rows, v_kept, v_last, v_seen
      FROM kept;
    RETURN jsonb_build_object('op', 'getPrefix', 'rows', v_rows, 'truncated', v_kept < v_seen,
                              'nextAfter', CASE WHEN v_kept < v_seen THEN v_last END);
END;
$$;
