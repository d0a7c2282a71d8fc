-- CITUS ONLY (citus-tier, issue 33 part 3): reads nested in statements on Citus tables: the
-- admin and status reads on the coordinator's
-- view of the cluster. Runs after the other files of this folder on every migrate.
--
-- The listings (GET /api/v1/status*, /resources/*, the dashboard) walk the definitions
-- (reference tables, so their statements run as a query on the coordinator's copy) and call
-- these functions per partition or queue; each of them reads one partition's or one queue's
-- rows from the distributed tables. Citus refuses a distributed query nested in a query on
-- a shard unless citus.allow_nested_distributed_execution is on: its concern is a nested
-- query that cannot see the outer transaction's own writes, and these functions only read,
-- in transactions that write nothing. So it is on for them alone.
-- queen._subscription_start (10_helpers.sql) reads a group's subscription (a reference
-- table) and is called inside statements on the message tables' shards (a pop's or an
-- ack's first cursor of a group, the consumer-group routes, retention's completed floor):
-- the same check refused it there ("cannot execute a distributed query from a query on a
-- shard"); it reads a definition, the node's own copy.
DO $citus$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace = 'queen'::regnamespace
           AND p.proname IN ('_partition_stats', '_queue_stats', '_messages_after',
                             '_partition_detail', '_queue_groups', '_queue_options_of',
                             '_queue_status', '_partition_writes', '_partition_cursors',
                             '_partition_dlq_errors', '_subscription_start',
                             '_message_states', '_sdk_query_stats', '_group_partitions',
                             '_reads_log_start', '_message_queue_status')
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET citus.allow_nested_distributed_execution = on', f);
    END LOOP;
END;
$citus$;
