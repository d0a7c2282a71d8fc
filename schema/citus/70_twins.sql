-- CITUS ONLY (issue 44; docs/scaling.md, "A worker at one PostgreSQL's cost"): shard-group
-- twins of the one-partition operations, derived at migrate time from the same functions
-- plain PostgreSQL runs. Runs after the other files of this folder on every migrate.
--
-- Why. A delegated call (push_partition_v3, pop_partition_v1, ack_partition_v2,
-- renew_partition_v1) runs on the worker that holds its partition, but every statement in it
-- still names the distributed tables, so Citus plans each one again on every call and
-- executes it "locally" from a text it deparses and parses back (Citus 13.2.2's cache of
-- those local plans misses every time for a statement whose shard a PL/pgSQL variable picks:
-- citusdata/citus#8783, fixed by #8824 after 13.2.2); an INSERT ... SELECT goes through
-- intermediate results even on the shard's own node. That cost a worker 2-8 times what plain
-- PostgreSQL spends on the same operation.
--
-- What. For every shard group of queen.messages' co-location group a schema
-- queen_s<messages shard id> holds copies of the functions those calls reach, with each
-- distributed table replaced by its shard of the group (queen.messages ->
-- queen.messages_102015) and each reference table read from its shard on the node
-- (queen.queues -> queen.queues_102008): plain PostgreSQL statements with plans cached per
-- session, on the node's own tables. Nothing is written by hand: the copies are the
-- functions of schema/functions/ with names substituted (queen._twin_template), so both
-- placements run one SQL.
--
-- What stays with Citus. A step that is not one shard group's (a group's registration for a
-- queue, a subscription or conflation written into the reference tables, the queue's depth,
-- the ready index of a whole queue, a row whose id a sequence default draws on the
-- coordinator, a constraint named in ON CONFLICT) is a stub in the twin that raises
-- SQLSTATE QT001; the entry point then rolls the twin's work back (a savepoint) and runs the
-- call as before, through Citus. So the twins serve the steady path (the pushes and pops of
-- known partitions and their acks) and every other case is what it was.
--
-- Entry points (what the server calls on Citus, queen_threads/queue/store.py):
-- queen.<entry>_on_shard(p_pid, ...) with the signature of the entry, delegated by p_pid
-- like the entry. On the node that holds p_pid's shard group, under the shard's metadata
-- lock (the lock Citus's own writes take, which a shard move's last step waits for), it runs
-- the twin; anywhere else (the coordinator, a node the group has moved from, a node added
-- after the last migrate) the entry itself.
--
-- Triggers. A twin's writes land on the shards, whose triggers are the distributed tables'
-- (queen.messages' statement trigger, queen.partition_lookup's commit-time trigger). On
-- Citus those triggers call wrappers (queen.<trigger function>_citus) that, in a twin's
-- transaction (queen.twin set), run the twin's copy of the trigger function, which takes
-- NEW, the transition table and TG_OP as arguments; otherwise the original function's body.

SET LOCAL citus.enable_unsafe_triggers = on;
SET LOCAL citus.multi_shard_modify_mode = 'sequential';
-- (a twin names shards that only the node holding them has)
SET LOCAL check_function_bodies = off;

-- The tables a twin substitutes: those co-located with queen.messages (shard per group) and
-- the reference tables (one shard, on every node).
CREATE OR REPLACE FUNCTION queen._twin_tables(OUT name text, OUT reference boolean)
RETURNS SETOF record
LANGUAGE sql STABLE AS $$
    SELECT c.relname::text, p.partmethod = 'n'
      FROM pg_dist_partition p
      JOIN pg_class c ON c.oid = p.logicalrelid
     WHERE c.relnamespace = 'queen'::regnamespace
       AND (p.colocationid = (SELECT m.colocationid FROM pg_dist_partition m
                               WHERE m.logicalrelid = 'queen.messages'::regclass)
            OR (p.partmethod = 'n' AND p.repmodel = 't'))
$$;

-- Which functions get a twin. From the entry points and the trigger functions, every queen
-- function called (queen.f(...)) is followed, except through the stubs: the steps listed
-- here as not one shard group's, and any function whose text inserts into a table whose id a
-- sequence default draws without naming it, or names a constraint in ON CONFLICT (shard
-- constraints carry the shard id). kind: 'twin' (copied), 'stub' (raises QT001), 'trigger'
-- (its body runs in the trigger on Citus, queen._twin_trigger); functions that read no table
-- and call no twin or stub are called as they are. (A twin's write of a reference table,
-- which must reach every node's copy, raises QT001 in its place: queen._twin_text.)
CREATE OR REPLACE FUNCTION queen._twin_functions(OUT fn regprocedure, OUT kind text)
RETURNS SETOF record
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_entries text[] := ARRAY['push_partition_v3', 'pop_partition_v1', 'ack_partition_v2',
                              'renew_partition_v1', 'trg_partition_lookup_heads',
                              'trg_messages_partition_lookup_v2'];
    -- (cross-shard: a group's registration, the conflation policy's check, a queue's
    -- depth and ready count, its active leases; a push's general preparation, which creates
    -- queues and partitions and locks capped queues' rows)
    v_stubs   text[] := ARRAY['_register_group', '_conflation', '_cursor_rows_of_queue',
                              '_definitions_lock', '_queue_depth', '_pop_ready_count',
                              '_pop_active_leases', '_push_prepare'];
    v_tables  text := (SELECT string_agg(t.name, '|') FROM queen._twin_tables() t);
    v_refs    text := (SELECT string_agg(t.name, '|') FROM queen._twin_tables() t
                        WHERE t.reference);
    v_seen    text[] := '{}';
    v_todo    text[];
    v_name    text;
    v_src     text;
    v_own     text;
    v_twin    text[] := '{}';
    v_grew    boolean := true;
    r         record;
BEGIN
    v_todo := v_entries;
    WHILE cardinality(v_todo) > 0 LOOP
        v_name := v_todo[1];
        v_todo := v_todo[2:];
        CONTINUE WHEN v_name = ANY (v_seen);
        v_src := (SELECT string_agg(p.prosrc, E'\n') FROM pg_proc p
                   WHERE p.pronamespace = 'queen'::regnamespace AND p.proname = v_name);
        CONTINUE WHEN v_src IS NULL;
        v_seen := v_seen || v_name;
        CONTINUE WHEN v_name = ANY (v_stubs);
        -- (its writes of reference tables left out: they raise in the twin)
        v_own := regexp_replace(v_src, '\m(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+queen\.('
                                       || v_refs || ')\M[^;]*;', '', 'gi');
        IF v_own ~* 'ON\s+CONFLICT\s+ON\s+CONSTRAINT'
           OR v_own ~* ('INSERT\s+INTO\s+queen\.(messages|dead_letter_queue|message_traces)'
                        || '\M[^(;]*\((?![^)]*\mid\M)') THEN
            v_stubs := v_stubs || v_name;
            CONTINUE;
        END IF;
        v_todo := v_todo || ARRAY(
            SELECT DISTINCT m[1] FROM regexp_matches(v_src, '\mqueen\.(\w+)\s*\(', 'g') AS m
             WHERE EXISTS (SELECT 1 FROM pg_proc p WHERE p.pronamespace = 'queen'::regnamespace
                                                     AND p.proname = m[1]));
    END LOOP;
    -- copied: what reads a table, and (to a fixed point) what calls a copy or a stub
    v_twin := ARRAY(SELECT DISTINCT p.proname::text FROM pg_proc p
                     WHERE p.pronamespace = 'queen'::regnamespace
                       AND p.proname = ANY (v_seen) AND NOT p.proname = ANY (v_stubs)
                       AND p.prosrc ~ ('\mqueen\.(' || v_tables || ')\M'));
    WHILE v_grew LOOP
        v_grew := false;
        FOR r IN SELECT DISTINCT p.proname::text AS name FROM pg_proc p
                  WHERE p.pronamespace = 'queen'::regnamespace
                    AND p.proname = ANY (v_seen) AND NOT p.proname = ANY (v_stubs || v_twin)
                    AND p.prosrc ~ ('\mqueen\.(' || array_to_string(v_stubs || v_twin, '|')
                                    || ')\s*\(') LOOP
            v_twin := v_twin || r.name;
            v_grew := true;
        END LOOP;
    END LOOP;
    RETURN QUERY
    SELECT p.oid::regprocedure,
           CASE WHEN p.proname = ANY (v_stubs) THEN 'stub'
                WHEN p.proname LIKE 'trg\_%' THEN 'trigger' ELSE 'twin' END
      FROM pg_proc p
     WHERE p.pronamespace = 'queen'::regnamespace
       AND p.proname = ANY (v_stubs || v_twin) AND p.proname = ANY (v_seen)
     ORDER BY p.proname, p.oid;
END;
$$;

-- A function's text made its twin's, with placeholders: @TWIN@ (the twin schema) and
-- @<table>@ (the table's shard id in the group). Each distributed and reference table becomes
-- its shard (with the table's name as alias where the text had none, so that column
-- references qualified by it still resolve), not where the name is a type (a variable's, a
-- cast's); calls of the functions of p_calls go to the twin schema.
CREATE OR REPLACE FUNCTION queen._twin_text(p_text text, p_calls text)
RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_body  text := p_text;
    v_table text;
    v_kw    text := '(SET|WHERE|ON|JOIN|LEFT|RIGHT|INNER|CROSS|FULL|NATURAL|ORDER|GROUP|'
                    'HAVING|LIMIT|OFFSET|FOR|UNION|EXCEPT|INTERSECT|RETURNING|USING|WINDOW|'
                    'VALUES|OVERRIDING|DEFAULT|SELECT)';
BEGIN
    -- a write of a reference table (to its end: ';' outside brackets and quotes) raises
    v_body := regexp_replace(
        v_body, '\m(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+queen\.('
                || (SELECT string_agg(t.name, '|') FROM queen._twin_tables() t WHERE t.reference)
                || ')\M[^;]*;',
        'RAISE EXCEPTION USING ERRCODE = ''QT001'', MESSAGE = ''queen: a write of a reference table'';',
        'gi');
    FOR v_table IN SELECT t.name FROM queen._twin_tables() t LOOP
        -- (a table name followed by a keyword or a bracket: no alias of its own)
        v_body := regexp_replace(
            v_body, '(?<!::)\mqueen\.' || v_table || '\M(?=\s*(\(|\)|,|$|' || v_kw || '\M))',
            'queen.' || v_table || '_@' || v_table || '@ AS ' || v_table, 'gi');
        v_body := regexp_replace(
            v_body, '(?<!::)\mqueen\.' || v_table || '\M(?!\s*(;|%|:=|\[|_@))',
            'queen.' || v_table || '_@' || v_table || '@', 'g');
    END LOOP;
    IF p_calls <> '' THEN
        v_body := regexp_replace(v_body, '\mqueen\.(' || p_calls || ')(\s*\()', '@TWIN@.\1\2',
                                 'g');
    END IF;
    RETURN v_body;
END;
$$;

-- p_text with the placeholders of queen._twin_text filled in for the shard group p_group
-- (its queen.messages shard id).
CREATE OR REPLACE FUNCTION queen._twin_for_group(p_text text, p_group bigint)
RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_out text := replace(p_text, '@TWIN@', 'queen_s' || p_group);
    r     record;
BEGIN
    FOR r IN SELECT t.name, s.shardid FROM queen._twin_tables() t
               JOIN pg_dist_shard s ON s.logicalrelid = ('queen.' || t.name)::regclass
              WHERE t.reference
                 OR s.shardminvalue = (SELECT g.shardminvalue FROM pg_dist_shard g
                                        WHERE g.shardid = p_group) LOOP
        v_out := replace(v_out, '@' || r.name || '@', r.shardid::text);
    END LOOP;
    RETURN v_out;
END;
$$;

-- One function's twin (a stub raising QT001 for p_kind 'stub'), as a CREATE FUNCTION with
-- the placeholders of queen._twin_text; with the generic plans plain PostgreSQL runs it with
-- (20_generic_plans.sql).
CREATE OR REPLACE FUNCTION queen._twin_template(p_fn regprocedure, p_kind text, p_calls text)
RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    p      pg_proc;
    v_set  text;
    v_lang text;
BEGIN
    SELECT * INTO p FROM pg_proc WHERE oid = p_fn;
    IF p_kind = 'stub' THEN
        RETURN format('CREATE OR REPLACE FUNCTION @TWIN@.%I(%s) RETURNS %s LANGUAGE plpgsql '
                      'AS $twin$BEGIN RAISE EXCEPTION USING ERRCODE = ''QT001'', '
                      'MESSAGE = %L; END$twin$;',
                      p.proname, pg_get_function_arguments(p_fn), pg_get_function_result(p_fn),
                      'queen: ' || p.proname || ' is not one shard group''s step');
    END IF;
    v_lang := (SELECT lanname FROM pg_language WHERE oid = p.prolang);
    IF v_lang NOT IN ('plpgsql', 'sql') THEN
        RAISE EXCEPTION 'queen twins: % is not PL/pgSQL or SQL', p_fn;
    END IF;
    SELECT coalesce(string_agg(format(' SET %s = %L', split_part(v.c, '=', 1),
                                      substr(v.c, strpos(v.c, '=') + 1)), ''), '')
      INTO v_set
      FROM unnest(p.proconfig) AS u(c0),
           LATERAL (SELECT CASE WHEN u.c0 = 'plan_cache_mode=auto'
                                THEN 'plan_cache_mode=force_generic_plan' ELSE u.c0 END) AS v(c);
    RETURN format('CREATE OR REPLACE FUNCTION @TWIN@.%I(%s) RETURNS %s LANGUAGE %s %s%s%s '
                  'AS $twin$%s$twin$;',
                  p.proname, pg_get_function_arguments(p_fn), pg_get_function_result(p_fn),
                  v_lang,
                  CASE p.provolatile WHEN 'i' THEN 'IMMUTABLE' WHEN 's' THEN 'STABLE'
                                     ELSE 'VOLATILE' END,
                  CASE WHEN p.proisstrict THEN ' STRICT' ELSE '' END, v_set,
                  queen._twin_text(p.prosrc, p_calls));
END;
$$;

-- The entry point on Citus: the twin of p_entry where p_pid's shard group is (savepoint:
-- QT001 rolls it back), else the entry itself. Where: the shard's metadata lock first
-- (ShareLock, as a write through Citus takes: a move of the group either waits for this
-- transaction or has finished), then the placement, read after it (a statement of its own:
-- a snapshot taken after the lock); the group's twin by a static CASE (each call a cached
-- plan, where EXECUTE would plan it every time). p_guard: a condition on the arguments that
-- must hold for the twin (a pop's partition, named or a candidate, is p_pid).
CREATE OR REPLACE FUNCTION queen._twin_dispatcher(p_entry regprocedure, p_guard text,
                                                  p_groups bigint[])
RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_name  text := (SELECT proname FROM pg_proc WHERE oid = p_entry);
    v_names text[] := (SELECT array_agg(a ORDER BY i) FROM pg_proc pp,
                              unnest(pp.proargnames) WITH ORDINALITY AS u(a, i)
                        WHERE pp.oid = p_entry);
    v_call  text := format('%I(%s)', v_name, array_to_string(v_names, ', '));
BEGIN
    RETURN format($f$CREATE OR REPLACE FUNCTION queen.%1$I(%2$s) RETURNS %3$s
LANGUAGE plpgsql AS $twin$
DECLARE
    v_shard bigint := get_shard_id_for_distribution_column('queen.messages', %4$I);
    v_set   text;
BEGIN
    v_set := (lock_shard_metadata(5, ARRAY[v_shard]) IS NULL)::text;  -- (no statement)
    PERFORM 1 FROM pg_dist_placement pl JOIN pg_dist_local_group lg ON lg.groupid = pl.groupid
     WHERE pl.shardid = v_shard;
    IF FOUND AND %5$s THEN
        BEGIN
            v_set := set_config('queen.twin', v_shard::text, true);  -- (no statement)
            CASE v_shard
%6$s
                ELSE NULL;
            END CASE;
        EXCEPTION WHEN SQLSTATE 'QT001' THEN
            NULL;  -- not one shard group's step: through Citus, below
        END;
    END IF;
    RETURN queen.%7$s;
END;
$twin$;$f$,
        v_name || '_on_shard', pg_get_function_arguments(p_entry),
        pg_get_function_result(p_entry), v_names[1], coalesce('(' || p_guard || ')', 'true'),
        (SELECT string_agg(format('                WHEN %s THEN RETURN queen_s%s.%s;', g, g,
                                  v_call), E'\n' ORDER BY g)
           FROM unnest(p_groups) AS g),
        v_call);
END;
$$;

-- A trigger function on Citus: in a twin's transaction, p_twin's body made the twin of the
-- shard group whose shard of p_table fired it (a branch per group, on TG_TABLE_NAME: the body
-- runs in the trigger itself, with its NEW and transition table); otherwise p_orig's own
-- body.
CREATE OR REPLACE FUNCTION queen._twin_trigger(
    p_orig regprocedure, p_twin regprocedure, p_table text, p_calls text, p_groups bigint[]
) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_body text := queen._twin_text((SELECT prosrc FROM pg_proc WHERE oid = p_twin), p_calls);
BEGIN
    RETURN format($f$CREATE OR REPLACE FUNCTION queen.%1$I() RETURNS trigger
LANGUAGE plpgsql AS $twin$
BEGIN
    IF current_setting('queen.twin', true) <> '' THEN
        CASE TG_TABLE_NAME
%2$s
            ELSE NULL;
        END CASE;
    END IF;
%3$s
END;
$twin$;$f$,
        (SELECT proname FROM pg_proc WHERE oid = p_orig) || '_citus',
        (SELECT string_agg(format(E'            WHEN %L THEN\n%s',
                                  p_table || '_' || s.shardid,
                                  queen._twin_for_group(v_body, g)), E'\n' ORDER BY g)
           FROM unnest(p_groups) AS g
           JOIN pg_dist_shard s ON s.logicalrelid = ('queen.' || p_table)::regclass
                               AND s.shardminvalue = (SELECT m.shardminvalue FROM pg_dist_shard m
                                                       WHERE m.shardid = g)),
        (SELECT prosrc FROM pg_proc WHERE oid = p_orig));
END;
$$;

-- The shard groups placed on this node (their queen.messages shard ids), as the dispatchers
-- and the node's pop read them.
CREATE OR REPLACE FUNCTION queen._twin_groups_here()
RETURNS bigint[]
LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(pl.shardid ORDER BY pl.shardid), '{}')
      FROM pg_dist_placement pl
      JOIN pg_dist_local_group lg ON lg.groupid = pl.groupid
      JOIN pg_dist_shard s ON s.shardid = pl.shardid
     WHERE s.logicalrelid = 'queen.messages'::regclass
$$;

-- A pop of a whole queue served by the node that holds p_anchor's shard group (issue 44,
-- part 3), from the shard groups placed here (locked as a dispatcher locks one): first the
-- queue's ready partitions in each group's own ready index (queen._pop_candidates' twin, one
-- probe each, groups from a random one on, interleaved), each then popped as a candidate
-- (queen._pop_one's twin: claimed with FOR UPDATE SKIP LOCKED as any pop, every condition
-- checked again on the locked row) until one delivers; none ready, or all taken meanwhile:
-- the queue's pop on each group (one may have become ready), whose empty answers merge (the
-- earliest due time of a long poll). NULL when the node cannot answer for the queue (no group
-- here, a step that is not one shard group's, e.g. the group's first registration for the
-- queue): the caller pops through Citus then (queen_threads/queue/store.py).
CREATE OR REPLACE FUNCTION queen._twin_node_pop(p_groups bigint[])
RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN queen._twin_for_group(queen._twin_text(format($f$CREATE OR REPLACE FUNCTION queen.pop_queue_on_node_v1(p_anchor uuid, p_req jsonb)
RETURNS text
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $twin$
DECLARE
    v_local bigint[] := queen._twin_groups_here();
    v_req   jsonb := p_req - 'wantCandidates' - 'candidate';
    v_group text := coalesce(nullif(p_req ->> 'consumerGroup', ''), '__QUEUE_MODE__');
    v_now   timestamptz := now();
    v_qid   uuid;
    v_n     integer;
    v_start integer;
    v_g     bigint;
    v_c     uuid[];
    v_pids  uuid[] := '{}';
    v_gs    bigint[] := '{}';
    v_pos   integer[] := '{}';
    r       record;
    v_out   jsonb;
    v_empty jsonb;
    v_set   text;
BEGIN
    SELECT q.id INTO v_qid FROM queen.queues q WHERE q.name = p_req ->> 'queue';
    IF cardinality(v_local) = 0 OR v_qid IS NULL THEN
        RETURN NULL;
    END IF;
    v_set := (lock_shard_metadata(5, v_local) IS NULL)::text;  -- (no statement)
    v_local := queen._twin_groups_here();  -- (after the lock)
    v_n := cardinality(v_local);
    v_start := floor(random() * v_n)::integer;
    BEGIN
        FOR i IN 0 .. v_n - 1 LOOP
            v_g := v_local[1 + (v_start + i) %% v_n];
            CASE v_g
%1$s
                ELSE CONTINUE;
            END CASE;
            v_pids := v_pids || v_c;
            v_gs := v_gs || array_fill(v_g, ARRAY[cardinality(v_c)]);
            v_pos := v_pos || ARRAY(SELECT generate_series(1, cardinality(v_c)) * v_n + i);
        END LOOP;
        FOR r IN SELECT u.pid, u.g FROM unnest(v_pids, v_gs, v_pos) AS u(pid, g, pos)
                  ORDER BY u.pos LOOP
            v_set := set_config('queen.twin', r.g::text, true);  -- (no statement)
            CASE r.g
%2$s
                ELSE CONTINUE;
            END CASE;
            IF jsonb_array_length(v_out -> 'messages') > 0 THEN
                RETURN v_out::text;
            END IF;
        END LOOP;
        FOR i IN 0 .. v_n - 1 LOOP
            v_g := v_local[1 + (v_start + i) %% v_n];
            v_set := set_config('queen.twin', v_g::text, true);  -- (no statement)
            CASE v_g
%3$s
                ELSE CONTINUE;
            END CASE;
            IF jsonb_array_length(v_out -> 'messages') > 0 THEN
                RETURN v_out::text;
            END IF;
            v_empty := CASE
                WHEN v_empty IS NULL THEN v_out
                ELSE v_empty || jsonb_build_object(
                    'contended', coalesce((v_empty ->> 'contended')::boolean, false)
                                 OR coalesce((v_out ->> 'contended')::boolean, false),
                    'dueInMs', (SELECT min(d) FROM unnest(ARRAY[(v_empty ->> 'dueInMs')::bigint,
                                                                (v_out ->> 'dueInMs')::bigint]) d))
                END;
        END LOOP;
    EXCEPTION WHEN SQLSTATE 'QT001' THEN
        RETURN NULL;  -- not one shard group's step: the caller pops through Citus
    END;
    RETURN v_empty::text;
END;
$twin$;$f$,
        (SELECT string_agg(format('                WHEN %s THEN v_c := queen_s%s._pop_candidates('
                                  'ARRAY[v_qid], v_group, v_now, ''{}'', 2);', g, g),
                           E'\n' ORDER BY g) FROM unnest(p_groups) AS g),
        (SELECT string_agg(format('                WHEN %s THEN v_out := queen_s%s._pop_one('
                                  'v_req || jsonb_build_object(''candidate'', r.pid));', g, g),
                           E'\n' ORDER BY g) FROM unnest(p_groups) AS g),
        (SELECT string_agg(format('                WHEN %s THEN v_out := queen_s%s._pop_one(v_req);',
                                  g, g), E'\n' ORDER BY g) FROM unnest(p_groups) AS g)), ''),
        p_groups[1]);
END;
$$;

-- One queen.shard_anchors id per node that holds shard groups: where the server sends the
-- pops of a queue, one node after the other (queen.pop_queue_on_node_v1). (The anchors are
-- read first: a distributed table is not joined with the catalog.)
CREATE OR REPLACE FUNCTION queen.citus_node_anchors_v1()
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_ids uuid[] := ARRAY(SELECT a.partition_id FROM queen.shard_anchors a);
BEGIN
    RETURN (SELECT coalesce(json_agg(x.id ORDER BY x.groupid), '[]')::text
              FROM (SELECT DISTINCT ON (pl.groupid) pl.groupid, u.id
                      FROM unnest(v_ids) AS u(id)
                      JOIN pg_dist_placement pl
                        ON pl.shardid = get_shard_id_for_distribution_column('queen.shard_anchors',
                                                                             u.id)
                     ORDER BY pl.groupid, u.id) x);
END;
$$;

CREATE TABLE IF NOT EXISTS queen.citus_twins (checksum text NOT NULL);

DO $citus$
DECLARE
    v_calls    text;
    v_templ    text;
    v_ddl      text;
    v_wrappers text[];
    v_sum      text;
    v_group    bigint;
    v_schema   text;
    v_groups   bigint[] := ARRAY(SELECT s.shardid FROM pg_dist_shard s
                                  WHERE s.logicalrelid = 'queen.messages'::regclass
                                  ORDER BY s.shardid);
BEGIN
    SELECT string_agg(DISTINCT p.proname, '|') INTO v_calls
      FROM queen._twin_functions() f JOIN pg_proc p ON p.oid = f.fn WHERE f.kind <> 'trigger';
    SELECT string_agg(queen._twin_template(f.fn, f.kind, v_calls), E'\n@@\n' ORDER BY f.fn)
      INTO v_templ
      FROM queen._twin_functions() f WHERE f.kind <> 'trigger';
    v_wrappers := ARRAY[
        -- (a pop's guard reads the reference tables' shards: the same on every node)
        queen._twin_dispatcher('queen.push_partition_v3(uuid,text)', NULL, v_groups),
        queen._twin_dispatcher('queen.pop_partition_v1(uuid,jsonb)', queen._twin_for_group(
                                   queen._twin_text(
                                       'p_req ->> ''candidate'' = p_pid::text OR p_pid = '
                                       '(SELECT p.id FROM queen.partitions p '
                                       'JOIN queen.queues q ON q.id = p.queue_id '
                                       'WHERE q.name = p_req ->> ''queue'' '
                                       'AND p.name = p_req ->> ''partition'')', ''),
                                   v_groups[1]), v_groups),
        queen._twin_dispatcher('queen.ack_partition_v2(uuid,text)', NULL, v_groups),
        queen._twin_dispatcher('queen.renew_partition_v1(uuid,jsonb)', NULL, v_groups),
        queen._twin_trigger('queen.trg_partition_lookup_heads()',
                            'queen.trg_partition_lookup_heads()', 'partition_lookup', v_calls,
                            v_groups),
        queen._twin_trigger('queen.trg_messages_partition_lookup()',
                            'queen.trg_messages_partition_lookup_v2()', 'messages', v_calls,
                            v_groups),
        queen._twin_node_pop(v_groups)];
    v_sum := md5(v_templ || array_to_string(v_wrappers, E'\n') || v_groups::text);
    IF EXISTS (SELECT 1 FROM queen.citus_twins WHERE checksum = v_sum) THEN
        RETURN;
    END IF;

    -- twin schemas of shard groups that are gone (a split), then one per shard group
    FOR v_schema IN SELECT n.nspname FROM pg_namespace n
                     WHERE n.nspname LIKE 'queen\_s%'
                       AND NOT n.nspname = ANY (ARRAY(SELECT 'queen_s' || g
                                                        FROM unnest(v_groups) g)) LOOP
        EXECUTE format('DROP SCHEMA %I CASCADE', v_schema);
    END LOOP;
    FOREACH v_group IN ARRAY v_groups LOOP
        EXECUTE format('CREATE SCHEMA IF NOT EXISTS %I', 'queen_s' || v_group);
        FOR v_ddl IN SELECT unnest(string_to_array(queen._twin_for_group(v_templ, v_group),
                                                   E'\n@@\n')) LOOP
            EXECUTE v_ddl;
        END LOOP;
    END LOOP;
    FOREACH v_ddl IN ARRAY v_wrappers LOOP
        EXECUTE v_ddl;
    END LOOP;

    -- the triggers on Citus call the wrappers
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'queen.partition_lookup'::regclass
                     AND tgname = 'partition_lookup_heads'
                     AND tgfoid = 'queen.trg_partition_lookup_heads_citus()'::regprocedure) THEN
        DROP TRIGGER IF EXISTS partition_lookup_heads ON queen.partition_lookup;
        CREATE CONSTRAINT TRIGGER partition_lookup_heads
            AFTER INSERT OR UPDATE OF last_message_id, last_message_created_at
            ON queen.partition_lookup
            DEFERRABLE INITIALLY DEFERRED
            FOR EACH ROW EXECUTE FUNCTION queen.trg_partition_lookup_heads_citus();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'queen.messages'::regclass
                     AND tgname = 'messages_partition_lookup'
                     AND tgfoid = 'queen.trg_messages_partition_lookup_citus()'::regprocedure) THEN
        DROP TRIGGER IF EXISTS messages_partition_lookup ON queen.messages;
        CREATE TRIGGER messages_partition_lookup
            AFTER INSERT ON queen.messages
            REFERENCING NEW TABLE AS new_rows
            FOR EACH STATEMENT EXECUTE FUNCTION queen.trg_messages_partition_lookup_citus();
    END IF;

    TRUNCATE queen.citus_twins;
    INSERT INTO queen.citus_twins VALUES (v_sum);
END;
$citus$;

-- The entry points on Citus, delegated like the entries (registered once: see 40_delegate).
SELECT queen._citus_delegate(ARRAY['queen.push_partition_v3_on_shard(uuid,text)',
                                   'queen.pop_partition_v1_on_shard(uuid,jsonb)',
                                   'queen.ack_partition_v2_on_shard(uuid,text)',
                                   'queen.renew_partition_v1_on_shard(uuid,jsonb)',
                                   'queen.pop_queue_on_node_v1(uuid,jsonb)']::regprocedure[]);
