-- CITUS ONLY. Some entry points ask for generic plans (SET plan_cache_mode =
-- force_generic_plan, 20_push.sql). Citus cannot plan a generic plan whose parameters
-- decide the shard ("could not create distributed plan ... parameters"), so on Citus those
-- functions plan each statement with its values (plan_cache_mode = auto, the default, set
-- explicitly: it marks what plain PostgreSQL runs with generic plans, which the shard-group
-- twins of 70_twins.sql, whose statements name shards, ask for again). Re-run after every
-- migrate: a function file that is applied again brings its SET clause back.
DO $citus$
DECLARE
    f regprocedure;
    v_marked boolean := EXISTS (SELECT 1 FROM pg_proc p
                                 WHERE p.pronamespace = 'queen'::regnamespace
                                   AND 'plan_cache_mode=auto' = ANY (p.proconfig));
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace = 'queen'::regnamespace
           AND 'plan_cache_mode=force_generic_plan' = ANY (p.proconfig)
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = auto', f);
    END LOOP;
    -- A database placed before the mark (its settings reset): the next migrate applies its
    -- function files again, which marks them. (Not a database placed just now.)
    IF NOT v_marked AND EXISTS (SELECT 1 FROM queen.schema_migrations
                                 WHERE applied_at < now() - interval '10 minutes') THEN
        UPDATE queen.schema_migrations SET checksum = '' WHERE kind = 'function';
    END IF;
END;
$citus$;
