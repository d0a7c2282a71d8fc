-- QUEEN'S SQL API: uuid v7 helpers (RFC 9562): 48 bits of Unix time in milliseconds, the
-- version (7), 12 bits of a counter, the variant (10), 62 random bits. Plain functions: they
-- read and write nothing of the queue (the counter is a setting of the session).

-- A uuid v7 of the millisecond p_ms with the counter p_seq (0..4095) and the random bits of
-- a gen_random_uuid() (whose variant bits are already 10).
CREATE OR REPLACE FUNCTION queen._uuid_v7(p_ms bigint, p_seq integer) RETURNS uuid
LANGUAGE sql VOLATILE AS $$
    SELECT encode(overlay(uuid_send(gen_random_uuid())
                          PLACING decode(lpad(to_hex(p_ms), 12, '0')
                                         || lpad(to_hex(28672 + p_seq), 4, '0'), 'hex')
                          FROM 1 FOR 8), 'hex')::uuid
$$;

-- A new uuid v7. Within a session each one is greater than the one before: a second one in
-- the same millisecond counts up the 12 bits after the version (past 4095, or when the
-- clock went back, the millisecond of the last one moves on by one).
CREATE OR REPLACE FUNCTION queen.uuid_generate_v7() RETURNS uuid
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_ms    bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);
    v_last  text := current_setting('queen.uuid_v7_last', true);
    v_seq   integer := 0;
    v_lms   bigint;
BEGIN
    IF coalesce(v_last, '') <> '' THEN
        v_lms := split_part(v_last, ':', 1)::bigint;
        IF v_ms <= v_lms THEN
            v_ms := v_lms;
            v_seq := split_part(v_last, ':', 2)::integer + 1;
            IF v_seq > 4095 THEN
                v_ms := v_lms + 1;
                v_seq := 0;
            END IF;
        END IF;
    END IF;
    PERFORM set_config('queen.uuid_v7_last', v_ms || ':' || v_seq, false);
    RETURN queen._uuid_v7(v_ms, v_seq);
END;
$$;

-- The time of a uuid v7 (to the millisecond).
CREATE OR REPLACE FUNCTION queen.uuid_v7_to_timestamptz(id uuid) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT to_timestamp(('x' || lpad(substr(replace($1::text, '-', ''), 1, 12), 16, '0'))::bit(64)::bigint
                        / 1000.0)
$$;

-- The lowest uuid v7 of a millisecond (for a range: id >= boundary(t1) AND id < boundary(t2)).
CREATE OR REPLACE FUNCTION queen.uuid_v7_boundary(at timestamptz) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (lpad(to_hex(floor(extract(epoch FROM $1) * 1000)::bigint), 12, '0')
            || '70008000000000000000')::uuid
$$;

-- A uuid v7 of a given time, its other bits random.
CREATE OR REPLACE FUNCTION queen.uuid_generate_v7_at(at timestamptz) RETURNS uuid
LANGUAGE sql VOLATILE AS $$
    SELECT queen._uuid_v7(floor(extract(epoch FROM $1) * 1000)::bigint,
                          floor(random() * 4096)::integer)
$$;
