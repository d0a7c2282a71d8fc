-- CITUS ONLY (docs/scaling.md, "Citus"): places the queen schema on a Citus cluster. Run by
-- `queen-threads migrate` after the migrations and function files, on every run, when the
-- database has the citus extension (or QUEEN_CITUS=1); on plain PostgreSQL it never runs.
-- Idempotent: a table already placed is left alone. The migrations and functions stay the
-- same SQL on both placements.
--
-- Placement:
--   reference (a copy on every node): the definitions a message-path statement joins to
--     (queues, partitions, streams, stream_sources, sdk_queries; below the block:
--     consumer_groups_metadata, conflation_groups, queue_consumer_groups);
--   distributed by partition_id in one co-location group (with queen.messages): messages,
--     partition_consumers, partition_lookup, dead_letter_queue, message_traces, sdk_shards,
--     sdk_state; so everything one partition owns sits in one shard group on one worker;
--   distributed by their own key: timers (queue_id), kv (namespace; with the locks);
--   everything else stays on the coordinator.
-- Citus requires the distribution column in every primary key and unique constraint, and a
-- foreign key between distributed tables to include it: keys that lack partition_id get it.
-- Triggers on distributed and reference tables fire on the shards (worker side), where a
-- statement on another table is a distributed statement of its own: the triggers that
-- touch other tables are dropped here (a queue's messages are deleted with it by the server:
-- queen_threads/queue/store.py, delete_queue; what is left is listed in docs/scaling.md).

SET LOCAL citus.enable_unsafe_triggers = on;
SET LOCAL citus.multi_shard_modify_mode = 'sequential';

-- The newest message of a partition, per stored row (what the statement trigger
-- queen.trg_messages_partition_lookup does per statement on plain PostgreSQL, 0002).
CREATE OR REPLACE FUNCTION queen.trg_messages_partition_lookup_row() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO queen.partition_lookup AS pl
           (partition_id, queue_id, last_message_id, last_message_created_at, updated_at)
    SELECT NEW.partition_id, p.queue_id, NEW.id, NEW.created_at, now()
      FROM queen.partitions p
     WHERE p.id = NEW.partition_id
    ON CONFLICT (partition_id) DO UPDATE
       SET last_message_id = EXCLUDED.last_message_id,
           last_message_created_at = EXCLUDED.last_message_created_at,
           updated_at = EXCLUDED.updated_at
     WHERE (pl.last_message_created_at, pl.last_message_id)
         < (EXCLUDED.last_message_created_at, EXCLUDED.last_message_id);
    RETURN NULL;
END;
$$;

DO $citus$
DECLARE
    v_done boolean := EXISTS (SELECT 1 FROM pg_dist_partition
                               WHERE logicalrelid = 'queen.messages'::regclass);
BEGIN
    IF v_done THEN
        RETURN;
    END IF;

    -- 1. Foreign keys that Citus cannot keep as they are, or that would tie tables together
    --    before they are placed: dropped now, the kept ones re-created in 4.
    ALTER TABLE queen.partitions DROP CONSTRAINT IF EXISTS partitions_queue_id_fkey;
    ALTER TABLE queen.partition_consumers DROP CONSTRAINT IF EXISTS partition_consumers_partition_id_fkey;
    ALTER TABLE queen.dead_letter_queue DROP CONSTRAINT IF EXISTS dead_letter_queue_message_id_fkey;
    ALTER TABLE queen.dead_letter_queue DROP CONSTRAINT IF EXISTS dead_letter_queue_partition_id_fkey;
    ALTER TABLE queen.partition_lookup DROP CONSTRAINT IF EXISTS partition_lookup_queue_id_fkey;
    ALTER TABLE queen.partition_lookup DROP CONSTRAINT IF EXISTS partition_lookup_partition_id_fkey;
    ALTER TABLE queen.message_traces DROP CONSTRAINT IF EXISTS message_traces_message_id_fkey;
    ALTER TABLE queen.message_traces DROP CONSTRAINT IF EXISTS message_traces_partition_id_fkey;
    -- (a coordinator table may not point at a distributed one)
    ALTER TABLE queen.message_trace_names DROP CONSTRAINT IF EXISTS message_trace_names_trace_id_fkey;
    ALTER TABLE queen.stream_consumer_offsets DROP CONSTRAINT IF EXISTS stream_consumer_offsets_partition_id_fkey;
    ALTER TABLE queen.stream_sources DROP CONSTRAINT IF EXISTS stream_sources_stream_id_fkey;
    ALTER TABLE queen.stream_sources DROP CONSTRAINT IF EXISTS stream_sources_queue_id_fkey;
    ALTER TABLE queen.stream_consumer_offsets DROP CONSTRAINT IF EXISTS stream_consumer_offsets_stream_id_fkey;
    ALTER TABLE queen.stream_leases DROP CONSTRAINT IF EXISTS stream_leases_stream_id_consumer_group_stream_key_fkey;
    ALTER TABLE queen.timers DROP CONSTRAINT IF EXISTS timers_queue_id_fkey;
    ALTER TABLE queen.sdk_shards DROP CONSTRAINT IF EXISTS sdk_shards_query_id_fkey;
    ALTER TABLE queen.sdk_shards DROP CONSTRAINT IF EXISTS sdk_shards_partition_id_fkey;
    ALTER TABLE queen.sdk_state DROP CONSTRAINT IF EXISTS sdk_state_query_id_partition_id_fkey;

    -- 2. Keys with the distribution column.
    ALTER TABLE queen.messages DROP CONSTRAINT messages_pkey,
        ADD PRIMARY KEY (partition_id, id);
    ALTER TABLE queen.dead_letter_queue DROP CONSTRAINT dead_letter_queue_pkey,
        ADD PRIMARY KEY (partition_id, id);
    ALTER TABLE queen.dead_letter_queue DROP CONSTRAINT dead_letter_queue_message_group_unique,
        ADD CONSTRAINT dead_letter_queue_message_group_unique
            UNIQUE (partition_id, message_id, consumer_group);
    ALTER TABLE queen.message_traces DROP CONSTRAINT message_traces_pkey,
        ADD PRIMARY KEY (partition_id, id);

    -- Triggers that reach other tables from a shard (see above). The messages of deleted
    -- partitions are deleted by the queue's deletion itself (30_push.sql).
    DROP TRIGGER IF EXISTS partitions_drop_messages ON queen.partitions;
    DROP TRIGGER IF EXISTS queues_drop_metadata ON queen.queues;
    -- A statement trigger's transition table cannot be read on a shard ("unrecognized RTE
    -- kind: 7"): the newest message per partition is kept by a row trigger below (5).
    DROP TRIGGER IF EXISTS messages_partition_lookup ON queen.messages;

    -- 3. Placement.
    PERFORM create_reference_table('queen.queues');
    PERFORM create_reference_table('queen.streams');
    PERFORM create_reference_table('queen.stream_sources');
    PERFORM create_reference_table('queen.sdk_queries');
    PERFORM create_reference_table('queen.partitions');
    PERFORM create_distributed_table('queen.messages', 'partition_id', colocate_with := 'none');
    PERFORM create_distributed_table('queen.partition_consumers', 'partition_id', colocate_with := 'queen.messages');
    PERFORM create_distributed_table('queen.partition_lookup', 'partition_id', colocate_with := 'queen.messages');
    PERFORM create_distributed_table('queen.dead_letter_queue', 'partition_id', colocate_with := 'queen.messages');
    PERFORM create_distributed_table('queen.message_traces', 'partition_id', colocate_with := 'queen.messages');
    PERFORM create_distributed_table('queen.sdk_shards', 'partition_id', colocate_with := 'queen.messages');
    PERFORM create_distributed_table('queen.sdk_state', 'partition_id', colocate_with := 'queen.messages');
    PERFORM create_distributed_table('queen.timers', 'queue_id', colocate_with := 'none');

    -- 4. The foreign keys Citus keeps: to a reference table, or between co-located tables
    --    on the distribution column.
    ALTER TABLE queen.partitions ADD CONSTRAINT partitions_queue_id_fkey
        FOREIGN KEY (queue_id) REFERENCES queen.queues (id) ON DELETE CASCADE;
    ALTER TABLE queen.partition_consumers ADD CONSTRAINT partition_consumers_partition_id_fkey
        FOREIGN KEY (partition_id) REFERENCES queen.partitions (id) ON DELETE CASCADE;
    ALTER TABLE queen.partition_lookup ADD CONSTRAINT partition_lookup_partition_id_fkey
        FOREIGN KEY (partition_id) REFERENCES queen.partitions (id) ON DELETE CASCADE;
    ALTER TABLE queen.partition_lookup ADD CONSTRAINT partition_lookup_queue_id_fkey
        FOREIGN KEY (queue_id) REFERENCES queen.queues (id) ON DELETE CASCADE;
    ALTER TABLE queen.dead_letter_queue ADD CONSTRAINT dead_letter_queue_message_id_fkey
        FOREIGN KEY (partition_id, message_id) REFERENCES queen.messages (partition_id, id)
        ON DELETE CASCADE;
    ALTER TABLE queen.message_traces ADD CONSTRAINT message_traces_partition_id_fkey
        FOREIGN KEY (partition_id) REFERENCES queen.partitions (id) ON DELETE CASCADE;
    ALTER TABLE queen.sdk_shards ADD CONSTRAINT sdk_shards_partition_id_fkey
        FOREIGN KEY (partition_id) REFERENCES queen.partitions (id) ON DELETE CASCADE;
    ALTER TABLE queen.sdk_shards ADD CONSTRAINT sdk_shards_query_id_fkey
        FOREIGN KEY (query_id) REFERENCES queen.sdk_queries (id) ON DELETE CASCADE;
    ALTER TABLE queen.sdk_state ADD CONSTRAINT sdk_state_query_id_partition_id_fkey
        FOREIGN KEY (query_id, partition_id) REFERENCES queen.sdk_shards (query_id, partition_id)
        ON DELETE CASCADE;
    ALTER TABLE queen.stream_sources ADD CONSTRAINT stream_sources_stream_id_fkey
        FOREIGN KEY (stream_id) REFERENCES queen.streams (id) ON DELETE CASCADE;
    ALTER TABLE queen.stream_sources ADD CONSTRAINT stream_sources_queue_id_fkey
        FOREIGN KEY (queue_id) REFERENCES queen.queues (id) ON DELETE CASCADE;
    ALTER TABLE queen.timers ADD CONSTRAINT timers_queue_id_fkey
        FOREIGN KEY (queue_id) REFERENCES queen.queues (id) ON DELETE CASCADE;

    -- 5. queen.partition_lookup per stored row: on the shard, a statement keyed by
    --    NEW.partition_id is routed to the co-located shard on the same node (local).
    CREATE TRIGGER messages_partition_lookup_row
        AFTER INSERT ON queen.messages
        FOR EACH ROW EXECUTE FUNCTION queen.trg_messages_partition_lookup_row();
END;
$citus$;

-- Definitions that are reference tables too, and tables that later migrations add, placed
-- on the first migrate that finds them. A new
-- table that points at a reference table is made a coordinator table by Citus ("Citus
-- local table") when it is created; it is placed here. Definitions only: a table on the
-- message path must be distributed by partition_id like those above.
DO $citus$
DECLARE
    v_table text;
BEGIN
    FOREACH v_table IN ARRAY ARRAY[
        -- read by the statements a shard's trigger runs (the cursor rows of a partition's
        -- first message, migration 0019) and by the pop: so on every node
        'queen.consumer_groups_metadata',
        'queen.conflation_groups',
        'queen.queue_consumer_groups'  -- a queue's registered groups (migration 0019)
    ] LOOP
        IF to_regclass(v_table) IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM pg_dist_partition
                            WHERE logicalrelid = to_regclass(v_table)
                              AND partmethod = 'n' AND repmodel = 't') THEN
            PERFORM create_reference_table(v_table);
        END IF;
    END LOOP;
END;
$citus$;

-- Key/value (and the lock permits it holds, namespace 'queen-locks'), distributed by its
-- namespace: a namespace's keys sit on one node, so a key's read or write, a prefix page
-- and a lock's slots are each one node's work (schema/functions/65_kv_*.sql, 67_locks.sql
-- lock rows only by their key). The swept-rows total (kv_totals) stays on the coordinator.
DO $citus$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition
                    WHERE logicalrelid = 'queen.kv'::regclass) THEN
        PERFORM create_distributed_table('queen.kv', 'namespace', colocate_with := 'none');
    END IF;
END;
$citus$;
