-- CITUS ONLY (issue 33; docs/scaling.md "Citus"): the windowed streams' state, distributed
-- by its own key. Runs after 10_distribute.sql (which made queen.streams and
-- queen.stream_sources reference tables and dropped the stream state's foreign keys) on
-- every migrate; a table already placed is left alone.
--
-- queen.stream_consumer_offsets (a group's offset per key) and queen.stream_leases (the
-- window a key has out) are distributed by stream_id in one co-location group of their
-- own: everything of one stream's state sits in one shard group on one worker, and each
-- statement of a poll, ack, renewal, release or seek on it (schema/functions/97_streams.sql)
-- names the stream, so it is routed to that worker. Their keys lead with stream_id
-- (migration 0023: a lease is (stream_id, lease_id); a lease id starts with its stream
-- id's first 8 bytes, queen._stream_lease_id, so an ack that names only the lease finds
-- the stream in the reference table first). The foreign keys come back as Citus keeps
-- them: to the reference tables (a stream or a source partition deleted deletes its
-- offsets, on every worker) and between the two co-located tables on (stream_id,
-- consumer_group, stream_key). Sequential: after the placement has copied the rows over
-- the shards in parallel, the same transaction may not add the keys otherwise.

SET LOCAL citus.multi_shard_modify_mode = 'sequential';

DO $citus$
DECLARE
    v_table   text;
    v_streams uuid[];
    v_parts   uuid[];
BEGIN
    IF EXISTS (SELECT 1 FROM pg_dist_partition
                WHERE logicalrelid = 'queen.stream_leases'::regclass AND partmethod = 'h') THEN
        RETURN;
    END IF;
    ALTER TABLE queen.stream_leases
        DROP CONSTRAINT IF EXISTS stream_leases_stream_id_consumer_group_stream_key_fkey;
    ALTER TABLE queen.stream_consumer_offsets
        DROP CONSTRAINT IF EXISTS stream_consumer_offsets_stream_id_fkey,
        DROP CONSTRAINT IF EXISTS stream_consumer_offsets_partition_id_fkey;
    -- (a table Citus made a coordinator table, "Citus local table", goes back first; the
    -- two are placed together, in this file's one transaction)
    FOREACH v_table IN ARRAY ARRAY['queen.stream_leases', 'queen.stream_consumer_offsets'] LOOP
        IF EXISTS (SELECT 1 FROM pg_dist_partition
                    WHERE logicalrelid = v_table::regclass) THEN
            PERFORM undistribute_table(v_table);
        END IF;
    END LOOP;
    -- What the dropped keys let stay behind (a stream or partition deleted meanwhile)
    -- goes, as their cascades would have done. (Read apart: a statement on a coordinator
    -- table that reads a reference table is sent to a worker, where the table is not.)
    v_streams := ARRAY(SELECT s.id FROM queen.streams s);
    v_parts := ARRAY(SELECT DISTINCT o.partition_id FROM queen.stream_consumer_offsets o
                      WHERE o.partition_id IS NOT NULL);
    v_parts := ARRAY(SELECT p.id FROM queen.partitions p WHERE p.id = ANY (v_parts));
    DELETE FROM queen.stream_consumer_offsets o
     WHERE o.stream_id <> ALL (v_streams) OR o.partition_id <> ALL (v_parts);
    DELETE FROM queen.stream_leases l
     WHERE NOT EXISTS (SELECT 1 FROM queen.stream_consumer_offsets o
                        WHERE (o.stream_id, o.consumer_group, o.stream_key)
                            = (l.stream_id, l.consumer_group, l.stream_key));
    PERFORM create_distributed_table('queen.stream_consumer_offsets', 'stream_id',
                                     colocate_with := 'none');
    PERFORM create_distributed_table('queen.stream_leases', 'stream_id',
                                     colocate_with := 'queen.stream_consumer_offsets');
    ALTER TABLE queen.stream_consumer_offsets
        ADD CONSTRAINT stream_consumer_offsets_stream_id_fkey
            FOREIGN KEY (stream_id) REFERENCES queen.streams (id) ON DELETE CASCADE;
    ALTER TABLE queen.stream_consumer_offsets
        ADD CONSTRAINT stream_consumer_offsets_partition_id_fkey
            FOREIGN KEY (partition_id) REFERENCES queen.partitions (id) ON DELETE CASCADE;
    ALTER TABLE queen.stream_leases
        ADD CONSTRAINT stream_leases_stream_id_consumer_group_stream_key_fkey
            FOREIGN KEY (stream_id, consumer_group, stream_key)
            REFERENCES queen.stream_consumer_offsets (stream_id, consumer_group, stream_key)
            ON DELETE CASCADE;
END;
$citus$;
