-- CITUS ONLY. Every function of the queen schema on every node. Citus creates a function on
-- the workers when it is created after the tables it depends on (its argument and result
-- types: a table's row type) were placed; on a fresh database the function files run
-- before 10_distribute.sql, so those functions stayed on the coordinator. A delegated call
-- (40_delegate.sql, 30_push.sql) and a trigger on a shard run on a worker and reach them
-- there. Marking them distributed (without a distribution argument) creates them on every
-- node, and Citus keeps them in step when a later migrate replaces them. A function that
-- cannot be (it depends on a coordinator table) stays where it is. On every migrate.
-- plpgsql functions only: SQL ones that the workers need are created there anyway (a
-- worker validates a SQL function's body, so those are made after their tables).
DO $citus$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace = 'queen'::regnamespace
           AND p.prokind IN ('f', 'p')
           -- (plpgsql: a worker checks nothing of the body; a SQL function's body is
           -- checked where it is created, and those that read a coordinator table fail)
           AND p.prolang = (SELECT l.oid FROM pg_language l WHERE l.lanname = 'plpgsql')
           AND NOT EXISTS (SELECT 1 FROM pg_dist_object d
                            WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid)
         ORDER BY p.oid
    LOOP
        BEGIN
            PERFORM create_distributed_function(f);
        EXCEPTION WHEN others THEN
            RAISE NOTICE 'queen: % stays on the coordinator: %', f, SQLERRM;
        END;
    END LOOP;
END;
$citus$;
