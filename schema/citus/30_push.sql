-- CITUS ONLY: the push path's placement (issue 33; docs/scaling.md "Citus"). Runs after
-- 10_distribute.sql on every migrate; idempotent.

SET LOCAL citus.enable_unsafe_triggers = on;
--
-- queen.partition_counters (migration 0020: a partition's next offset, last write and the
-- lock that orders its pushes) is distributed with the partition's messages, so the write
-- every push makes goes to the one node that holds the partition. Created after the
-- placement of 10_distribute.sql, it points at a reference table (queen.partitions) and so
-- starts as a coordinator table: placed here.
DO $citus$
BEGIN
    IF to_regclass('queen.partition_counters') IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM pg_dist_partition
                        WHERE logicalrelid = 'queen.partition_counters'::regclass
                          AND partmethod = 'h') THEN
        -- (a coordinator table with a foreign key cannot be distributed: the key goes and
        -- comes back, to the reference table)
        ALTER TABLE queen.partition_counters
            DROP CONSTRAINT IF EXISTS partition_counters_partition_id_fkey;
        IF EXISTS (SELECT 1 FROM pg_dist_partition
                    WHERE logicalrelid = 'queen.partition_counters'::regclass) THEN
            PERFORM undistribute_table('queen.partition_counters');
        END IF;
        PERFORM create_distributed_table('queen.partition_counters', 'partition_id',
                                         colocate_with := 'queen.messages');
        ALTER TABLE queen.partition_counters ADD CONSTRAINT partition_counters_partition_id_fkey
            FOREIGN KEY (partition_id) REFERENCES queen.partitions (id) ON DELETE CASCADE;
    END IF;
END;
$citus$;

-- One partition's push runs on the node that holds the partition: calls of
-- queen.push_partition_v3(partition_id, items) made by the client (the server; v1 and v2
-- for the previous releases' servers during an upgrade) are
-- delegated by their first argument, in one round trip. (Only a call the client makes is
-- delegated, not one from inside another function.) Every function it reaches exists on
-- every node (Citus propagates the schema's functions).
SELECT create_distributed_function('queen.push_partition_v1(uuid,jsonb)', '$1',
                                   colocate_with := 'queen.messages');
SELECT create_distributed_function('queen.push_partition_v2(uuid,text)', '$1',
                                   colocate_with := 'queen.messages');
SELECT create_distributed_function('queen.push_partition_v3(uuid,text)', '$1',
                                   colocate_with := 'queen.messages');

-- The newest message per partition is kept by the statement trigger of PostgreSQL (its
-- function reads the transition table on its own first, migration 0020), not by the row
-- trigger 10_distribute.sql put in its place: one upsert per partition and statement on the
-- shard instead of one per message.
DO $citus$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'queen.messages'::regclass
                                          AND tgname = 'messages_partition_lookup_row') THEN
        DROP TRIGGER messages_partition_lookup_row ON queen.messages;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'queen.messages'::regclass
                                              AND tgname = 'messages_partition_lookup') THEN
        CREATE TRIGGER messages_partition_lookup
            AFTER INSERT ON queen.messages
            REFERENCING NEW TABLE AS new_rows
            FOR EACH STATEMENT EXECUTE FUNCTION queen.trg_messages_partition_lookup();
    END IF;
END;
$citus$;
