-- CITUS ONLY. Some entry points ask for generic plans (SET plan_cache_mode =
-- force_generic_plan, 20_push.sql). Citus cannot plan a generic plan whose parameters
-- decide the shard ("could not create distributed plan ... parameters"), so on Citus those
-- functions plan each statement with its values. Re-run after every migrate: a function
-- file that is applied again brings its SET clause back.
DO $citus$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace = 'queen'::regnamespace
           AND 'plan_cache_mode=force_generic_plan' = ANY (p.proconfig)
    LOOP
        EXECUTE format('ALTER FUNCTION %s RESET plan_cache_mode', f);
    END LOOP;
END;
$citus$;
