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

-- The shard group (its queen.messages shard id) whose twin serves p_pid here, or NULL: the
-- partition's shard group is placed on this node. Takes the shard's metadata lock
-- (ShareLock, as a write through Citus does) first, so a move of the group either waits for
-- this transaction or has finished; the placement is read after it (a statement of its own:
-- a snapshot taken after the lock).
CREATE OR REPLACE FUNCTION queen._twin_here(p_pid uuid)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_shard bigint := get_shard_id_for_distribution_column('queen.messages', p_pid);
BEGIN
    PERFORM lock_shard_metadata(5, ARRAY[v_shard]);
    PERFORM 1 FROM pg_dist_placement pl JOIN pg_dist_local_group lg ON lg.groupid = pl.groupid
     WHERE pl.shardid = v_shard;
    RETURN CASE WHEN FOUND THEN v_shard END;
END;
$$;

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
-- here as not one shard group's, and any function whose text writes a reference table,
-- inserts into a table whose id a sequence default draws without naming it, or names a
-- constraint in ON CONFLICT (shard constraints carry the shard id). kind: 'twin' (copied),
-- 'stub' (raises QT001), 'trigger' (copied as a function of NEW, the transition table and
-- TG_OP); functions that read no table and call no twin or stub are called as they are.
CREATE OR REPLACE FUNCTION queen._twin_functions(OUT fn regprocedure, OUT kind text)
RETURNS SETOF record
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_entries text[] := ARRAY['push_partition_v3', 'pop_partition_v1', 'ack_partition_v2',
                              'renew_partition_v1', 'trg_partition_lookup_heads',
                              'trg_messages_partition_lookup_v2'];
    v_stubs   text[] := ARRAY['_ensure_subscription', '_register_group', '_conflation',
                              '_cursor_rows_of_queue', '_definitions_lock', '_queue_depth',
                              '_pop_candidates', '_pop_ready_count', '_pop_active_leases',
                              '_push_prepare'];
    v_tables  text := (SELECT string_agg(t.name, '|') FROM queen._twin_tables() t);
    v_refs    text := (SELECT string_agg(t.name, '|') FROM queen._twin_tables() t
                        WHERE t.reference);
    v_seen    text[] := '{}';
    v_todo    text[];
    v_name    text;
    v_src     text;
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
        IF v_src ~* ('\m(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+queen\.(' || v_refs || ')\M')
           OR v_src ~* 'ON\s+CONFLICT\s+ON\s+CONSTRAINT'
           OR v_src ~* ('INSERT\s+INTO\s+queen\.(messages|dead_letter_queue|message_traces)'
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

-- One function's twin, as a CREATE FUNCTION with placeholders: @TWIN@ (the schema) and
-- @<table>@ (the table's shard id). Distributed and reference tables become their shards
-- (with the table's name as alias where the text had none, so that column references
-- qualified by it still resolve); not where the name is a type (a variable's, a cast's);
-- calls of twins and stubs go to the twin schema.
CREATE OR REPLACE FUNCTION queen._twin_template(p_fn regprocedure, p_kind text, p_calls text)
RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    p        pg_proc;
    v_body   text;
    v_args   text;
    v_result text;
    v_set    text := '';
    v_table  text;
    v_trg    text;
    v_lang   text;
    v_kw     text := '(SET|WHERE|ON|JOIN|LEFT|RIGHT|INNER|CROSS|FULL|NATURAL|ORDER|GROUP|'
                     'HAVING|LIMIT|OFFSET|FOR|UNION|EXCEPT|INTERSECT|RETURNING|USING|WINDOW|'
                     'VALUES|OVERRIDING|DEFAULT|SELECT)';
BEGIN
    SELECT * INTO p FROM pg_proc WHERE oid = p_fn;
    v_args := pg_get_function_arguments(p_fn);
    v_result := pg_get_function_result(p_fn);
    IF p_kind = 'stub' THEN
        RETURN format('CREATE OR REPLACE FUNCTION @TWIN@.%I(%s) RETURNS %s LANGUAGE plpgsql '
                      'AS $twin$BEGIN RAISE EXCEPTION USING ERRCODE = ''QT001'', '
                      'MESSAGE = %L; END$twin$;',
                      p.proname, v_args, v_result,
                      'queen: ' || p.proname || ' is not one shard group''s step');
    END IF;
    v_lang := (SELECT lanname FROM pg_language WHERE oid = p.prolang);
    IF v_lang NOT IN ('plpgsql', 'sql') THEN
        RAISE EXCEPTION 'queen twins: % is not PL/pgSQL or SQL', p_fn;
    END IF;
    v_body := p.prosrc;
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
    IF p_kind = 'trigger' THEN
        v_trg := CASE p.proname WHEN 'trg_partition_lookup_heads' THEN 'partition_lookup'
                                WHEN 'trg_messages_partition_lookup_v2' THEN 'messages' END;
        IF v_trg IS NULL THEN
            RAISE EXCEPTION 'queen twins: no table known for the trigger function %', p_fn;
        END IF;
        v_body := regexp_replace(v_body, '\mNEW\.', 'p_new.', 'g');
        v_body := regexp_replace(v_body, '\mTG_OP\M', 'p_op', 'g');
        v_body := regexp_replace(v_body, '\mnew_rows\M', 'unnest(p_new_rows)', 'g');
        v_args := format('p_new queen.%I, p_new_rows queen.%I[], p_op text', v_trg, v_trg);
        v_result := 'text';
    END IF;
    -- (with the generic plans plain PostgreSQL runs them with: 20_generic_plans.sql)
    SELECT coalesce(string_agg(format(' SET %s = %L', split_part(c, '=', 1),
                                      substr(c, strpos(c, '=') + 1)), ''), '')
      INTO v_set
      FROM unnest(p.proconfig) AS u(c0),
           LATERAL (SELECT CASE WHEN u.c0 = 'plan_cache_mode=auto'
                                THEN 'plan_cache_mode=force_generic_plan' ELSE u.c0 END) AS v(c);
    RETURN format('CREATE OR REPLACE FUNCTION @TWIN@.%I(%s) RETURNS %s LANGUAGE %s %s%s%s '
                  'AS $twin$%s$twin$;',
                  p.proname, v_args, v_result, v_lang,
                  CASE p.provolatile WHEN 'i' THEN 'IMMUTABLE' WHEN 's' THEN 'STABLE'
                                     ELSE 'VOLATILE' END,
                  CASE WHEN p.proisstrict THEN ' STRICT' ELSE '' END, v_set, v_body);
END;
$$;

-- One branch per shard group (p_groups: their queen.messages shard ids) of a static CASE
-- on v_shard running p_call in the group's twin schema (@S@ in p_call): each call is a plan
-- of its own, cached, where EXECUTE would parse and plan it every time.
CREATE OR REPLACE FUNCTION queen._twin_case(p_groups bigint[], p_call text, p_var text)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT format(E'CASE %s\n', p_var)
           || string_agg(format(E'                WHEN %s THEN %s\n', g,
                                replace(p_call, '@S@', 'queen_s' || g)), '' ORDER BY g)
           || E'                ELSE NULL;\n            END CASE;'
      FROM unnest(p_groups) AS g
$$;

-- The entry point on Citus: the twin of p_entry where p_pid's shard group is (savepoint:
-- QT001 rolls it back), else the entry itself. p_guard: a condition on the arguments that
-- must hold for the twin (a pop's partition, named or a candidate, is p_pid).
CREATE OR REPLACE FUNCTION queen._twin_dispatcher(p_entry regprocedure, p_guard text,
                                                  p_groups bigint[])
RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_name   text := (SELECT proname FROM pg_proc WHERE oid = p_entry);
    v_names  text[] := (SELECT array_agg(a ORDER BY i) FROM pg_proc pp,
                               unnest(pp.proargnames) WITH ORDINALITY AS u(a, i)
                         WHERE pp.oid = p_entry);
    v_call   text := format('%I(%s)', v_name, array_to_string(v_names, ', '));
BEGIN
    RETURN format($f$CREATE OR REPLACE FUNCTION queen.%1$I(%2$s) RETURNS %3$s
LANGUAGE plpgsql AS $twin$
DECLARE
    v_shard bigint := queen._twin_here(%4$I);
    v_set   text;
BEGIN
    IF v_shard IS NOT NULL THEN
        IF %5$s THEN
            BEGIN
                v_set := set_config('queen.twin', v_shard::text, true);  -- (no statement)
                %6$s
            EXCEPTION WHEN SQLSTATE 'QT001' THEN
                NULL;  -- not one shard group's step: through Citus, below
            END;
        END IF;
    END IF;
    RETURN queen.%7$s;
END;
$twin$;$f$,
        v_name || '_on_shard', pg_get_function_arguments(p_entry),
        pg_get_function_result(p_entry), v_names[1], coalesce('(' || p_guard || ')', 'true'),
        queen._twin_case(p_groups, 'RETURN @S@.' || v_call || ';', 'v_shard'), v_call);
END;
$$;

-- A trigger function on Citus: in a twin's transaction, the twin's copy of p_twin (NEW and the
-- transition table as the shell table's rows); otherwise p_orig's own body.
CREATE OR REPLACE FUNCTION queen._twin_trigger_wrapper(
    p_orig regprocedure, p_twin regprocedure, p_table regclass, p_rows boolean,
    p_groups bigint[]
) RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN format($f$CREATE OR REPLACE FUNCTION queen.%1$I() RETURNS trigger
LANGUAGE plpgsql AS $twin$
DECLARE
    v_twin bigint := nullif(current_setting('queen.twin', true), '')::bigint;
BEGIN
    IF v_twin IS NOT NULL THEN
            %2$s
        RETURN NULL;
    END IF;
%3$s
END;
$twin$;$f$,
        (SELECT proname FROM pg_proc WHERE oid = p_orig) || '_citus',
        queen._twin_case(p_groups, format('PERFORM @S@.%I(%s, %s, TG_OP);',
            (SELECT proname FROM pg_proc WHERE oid = p_twin),
            CASE WHEN p_rows THEN format('NULL::%s', p_table)
                 ELSE format('ROW(NEW.*)::%s', p_table) END,
            CASE WHEN p_rows
                 THEN format('(SELECT array_agg(ROW(n.*)::%s) FROM new_rows n)', p_table)
                 ELSE format('NULL::%s[]', p_table) END), 'v_twin'),
        (SELECT prosrc FROM pg_proc WHERE oid = p_orig));
END;
$$;

CREATE TABLE IF NOT EXISTS queen.citus_twins (checksum text NOT NULL);

DO $citus$
DECLARE
    v_funcs    record;
    v_calls    text;
    v_templ    text[] := '{}';
    v_sum      text;
    v_group    record;
    v_ddl      text;
    v_table    record;
    v_entry    record;
    v_wrappers text[];
    v_groups   bigint[] := ARRAY(SELECT s.shardid FROM pg_dist_shard s
                                  WHERE s.logicalrelid = 'queen.messages'::regclass
                                  ORDER BY s.shardid);
BEGIN
    SELECT string_agg(DISTINCT p.proname, '|') INTO v_calls
      FROM queen._twin_functions() f JOIN pg_proc p ON p.oid = f.fn;
    FOR v_funcs IN SELECT * FROM queen._twin_functions() LOOP
        v_templ := v_templ || queen._twin_template(v_funcs.fn, v_funcs.kind, v_calls);
    END LOOP;
    v_wrappers := ARRAY[
        queen._twin_dispatcher('queen.push_partition_v3(uuid,text)', NULL, v_groups),
        queen._twin_dispatcher('queen.pop_partition_v1(uuid,jsonb)',
                               'p_req ->> ''candidate'' = p_pid::text OR p_pid = '
                               '(SELECT p.id FROM queen.partitions_@partitions@ p '
                               'JOIN queen.queues_@queues@ q ON q.id = p.queue_id '
                               'WHERE q.name = p_req ->> ''queue'' '
                               'AND p.name = p_req ->> ''partition'')', v_groups),
        queen._twin_dispatcher('queen.ack_partition_v2(uuid,text)', NULL, v_groups),
        queen._twin_dispatcher('queen.renew_partition_v1(uuid,jsonb)', NULL, v_groups),
        queen._twin_trigger_wrapper('queen.trg_partition_lookup_heads()',
                                    'queen.trg_partition_lookup_heads()',
                                    'queen.partition_lookup', false, v_groups),
        queen._twin_trigger_wrapper('queen.trg_messages_partition_lookup()',
                                    'queen.trg_messages_partition_lookup_v2()',
                                    'queen.messages', true, v_groups)];
    -- the reference tables' shards in the dispatchers (the same on every node)
    FOR v_table IN SELECT t.name, s.shardid FROM queen._twin_tables() t
                     JOIN pg_dist_shard s ON s.logicalrelid = ('queen.' || t.name)::regclass
                    WHERE t.reference LOOP
        v_wrappers := ARRAY(SELECT replace(w, '@' || v_table.name || '@', v_table.shardid::text)
                              FROM unnest(v_wrappers) w);
    END LOOP;
    v_sum := md5(array_to_string(v_templ || v_wrappers, E'\n')
                 || (SELECT string_agg(s.shardid::text, ',' ORDER BY s.shardid)
                       FROM pg_dist_shard s
                       JOIN queen._twin_tables() t ON s.logicalrelid = ('queen.' || t.name)::regclass));
    IF EXISTS (SELECT 1 FROM queen.citus_twins WHERE checksum = v_sum) THEN
        RETURN;
    END IF;

    -- twin schemas of shard groups that are gone (a split), then one per shard group
    FOR v_group IN SELECT n.nspname FROM pg_namespace n
                    WHERE n.nspname LIKE 'queen\_s%'
                      AND NOT EXISTS (SELECT 1 FROM pg_dist_shard s
                                       WHERE s.logicalrelid = 'queen.messages'::regclass
                                         AND n.nspname = 'queen_s' || s.shardid) LOOP
        EXECUTE format('DROP SCHEMA %I CASCADE', v_group.nspname);
    END LOOP;
    FOR v_group IN SELECT s.shardid, s.shardminvalue FROM pg_dist_shard s
                    WHERE s.logicalrelid = 'queen.messages'::regclass ORDER BY s.shardid LOOP
        v_ddl := array_to_string(v_templ, E'\n@@\n');
        v_ddl := replace(v_ddl, '@TWIN@', 'queen_s' || v_group.shardid);
        FOR v_table IN SELECT t.name, s.shardid FROM queen._twin_tables() t
                         JOIN pg_dist_shard s ON s.logicalrelid = ('queen.' || t.name)::regclass
                        WHERE t.reference
                           OR s.shardminvalue = v_group.shardminvalue LOOP
            v_ddl := replace(v_ddl, '@' || v_table.name || '@', v_table.shardid::text);
        END LOOP;
        EXECUTE format('CREATE SCHEMA IF NOT EXISTS %I', 'queen_s' || v_group.shardid);
        FOR v_ddl IN SELECT unnest(string_to_array(v_ddl, E'\n@@\n')) LOOP
            EXECUTE v_ddl;
        END LOOP;
    END LOOP;
    FOR v_ddl IN SELECT unnest(v_wrappers) LOOP
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
DO $citus$
DECLARE
    f regprocedure;
BEGIN
    FOREACH f IN ARRAY ARRAY['queen.push_partition_v3_on_shard(uuid,text)',
                             'queen.pop_partition_v1_on_shard(uuid,jsonb)',
                             'queen.ack_partition_v2_on_shard(uuid,text)',
                             'queen.renew_partition_v1_on_shard(uuid,jsonb)']::regprocedure[] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_dist_object d
                        WHERE d.classid = 'pg_proc'::regclass AND d.objid = f
                          AND d.distribution_argument_index IS NOT NULL) THEN
            PERFORM create_distributed_function(f, '$1', colocate_with := 'queen.messages');
        END IF;
    END LOOP;
END;
$citus$;
