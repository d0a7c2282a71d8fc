-- KEY/VALUE helpers (docs/kv.md). One expiry rule for every reader, writer and the
-- sweeper: a row is live while expires_at is NULL (forever) or later than `now`; the
-- sweeper deletes rows with expires_at <= now, so a row exactly at `now` is dead for all.

CREATE OR REPLACE FUNCTION queen._kv_live(p_expires timestamptz, p_now timestamptz)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_expires IS NULL OR p_expires > p_now
$$;

-- The version a precondition compares with: 0 for an absent or expired row, so
-- `expect: 0` means "must not exist" and a CAS against a dead lineage never succeeds.
CREATE OR REPLACE FUNCTION queen._kv_ver(p_version bigint, p_expires timestamptz,
                                         p_now timestamptz)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN p_version IS NOT NULL AND queen._kv_live(p_expires, p_now)
                THEN p_version ELSE 0 END
$$;

-- The number an incr adds to: the live value when it is a JSON number, else 0.
CREATE OR REPLACE FUNCTION queen._kv_num(p_value jsonb, p_expires timestamptz,
                                         p_now timestamptz)
RETURNS numeric LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN queen._kv_live(p_expires, p_now) AND jsonb_typeof(p_value) = 'number'
                THEN (p_value #>> '{}')::numeric ELSE 0 END
$$;

-- The expiry of a write: NULL for forever, now + ttlSeconds otherwise (validated before).
CREATE OR REPLACE FUNCTION queen._kv_expiry(p_op jsonb, p_now timestamptz)
RETURNS timestamptz LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_op -> 'forever' = 'true'::jsonb THEN NULL
                ELSE p_now + make_interval(secs => (p_op ->> 'ttlSeconds')::double precision)
           END
$$;

-- One row as a read answers it.
CREATE OR REPLACE FUNCTION queen._kv_row(p_key text, p_value jsonb, p_version bigint,
                                         p_expires timestamptz, p_updated timestamptz,
                                         p_keys_only boolean DEFAULT false)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('key', p_key, 'version', p_version,
                              'expiresAt', queen._iso_us(p_expires),
                              'updatedAt', queen._iso_us(p_updated))
           || CASE WHEN p_keys_only THEN '{}'::jsonb
                   ELSE jsonb_build_object('value', p_value) END
$$;

-- The verdict of a write or check: what happened, and what a reader sees now (the value
-- and version of the live row, or null and 0), so a loser needs no second round trip.
CREATE OR REPLACE FUNCTION queen._kv_verdict(p_op text, p_key text, p_applied boolean,
                                             p_reason text, p_value jsonb, p_version bigint)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('op', p_op, 'applied', p_applied, 'key', p_key,
                              'value', coalesce(p_value, 'null'::jsonb),
                              'version', coalesce(p_version, 0))
           || CASE WHEN p_applied THEN '{}'::jsonb
                   ELSE jsonb_build_object('reason', p_reason) END
$$;
