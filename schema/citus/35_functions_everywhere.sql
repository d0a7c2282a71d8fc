-- CITUS ONLY. The functions the delegated one-partition calls of 40_delegate.sql reach, on
-- every node. Citus creates a function on the workers when it is created after the tables
-- its argument and result types depend on were placed; on a fresh database the function
-- files run before 10_distribute.sql, so some stayed on the coordinator, and a delegated
-- call that reached one failed on the worker. Marking them distributed (without a
-- distribution argument) creates them on every node, and Citus keeps them in step when a
-- later migrate replaces them. Only these (the fewest objects Citus has to keep in step).
-- On every migrate; those already placed are left alone.
DO $citus$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace = 'queen'::regnamespace
           AND p.proname = ANY (ARRAY[
               -- pop_partition_v1
               '_pop_one', '_pop_scope', '_pop_scope_steps', '_pop_answer_extras',
               '_conflation', '_cursor_row', '_cursor_rows',
               '_cursor_rows_registered',
               '_registration_lock', '_ensure_subscription', '_subscription_start',
               '_pop_autopilot', '_autopilot', '_pop_ready_count', '_pop_active_leases',
               '_pop_take', '_pop_take_with', '_pop_due', '_jint', '_jbool', '_try_uuid',
               '_try_timestamptz',
               '_iso_us', '_iso_ms',
               -- ack_partition_v1
               'ack_messages_v2', '_ack_items', '_ack_resolve', '_ack_messages_of',
               '_ack_implicit', '_ack_nack', '_ack_dead_letter', '_ack_schedule_retry',
               '_ack_batch_done', '_ack_flush', '_ack_committed', '_pc_after_nack',
               '_pc_apply_prefix', '_wake', '_failed_attempt', '_trace_failure',
               'retry_delay_ms',
               -- renew_partition_v1
               '_renew_lease'])
           AND NOT EXISTS (SELECT 1 FROM pg_dist_object d
                            WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid)
         ORDER BY p.oid
    LOOP
        PERFORM create_distributed_function(f);
    END LOOP;
END;
$citus$;
