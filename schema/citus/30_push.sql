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

-- queen.messages has no foreign key to queen.partitions, as on plain PostgreSQL (migration
-- 0009): a key costs every stored message a check (a push of 1000 messages 30% more CPU on
-- its worker, issue 44). Plain PostgreSQL deletes a deleted partition's messages in a
-- statement trigger on queen.partitions, which Citus cannot run (a trigger on a reference
-- table fires on every node's copy); on Citus the queue's deletion deletes them
-- (queen.citus_queue_partitions, then delete_queue_messages: queen_threads/queue/store.py).
-- Retention deletes only partitions without messages (queen.retention_cleanup_partitions).
ALTER TABLE queen.messages DROP CONSTRAINT IF EXISTS messages_partition_id_fkey;

-- The partitions of a queue about to be deleted, in the deleting transaction: their pushes
-- in flight are waited for and later ones held (their counters rows, the lock every push
-- takes, are locked), so the messages deleted after the queue are all there will be. The
-- transaction changes the shards one node at a time (a reference table is written after).
CREATE OR REPLACE FUNCTION queen.citus_queue_partitions(p_name text)
RETURNS uuid[]
LANGUAGE plpgsql AS $$
DECLARE
    v_ids uuid[];
    v_set text;
BEGIN
    v_set := set_config('citus.multi_shard_modify_mode', 'sequential', true);
    v_ids := ARRAY(SELECT p.id FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
                    WHERE q.name = p_name);
    UPDATE queen.partition_counters c SET last_activity = c.last_activity
     WHERE c.partition_id = ANY (v_ids);
    RETURN v_ids;
END;
$$;
