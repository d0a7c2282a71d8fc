-- The newest message of each partition a statement stored (0020), with each partition's
-- queue found by a key lookup per partition whatever the planner estimates. The join of
-- 0020 was planned for jsonb_array_elements' default estimate (100 rows) as a hash join
-- over every row of queen.partitions (a full index scan under the push's
-- enable_seqscan = off): a push of one message read the whole table, 874 buffers at 952
-- partitions in the database, so every push got slower with every partition of every
-- queue. A lateral lookup with LIMIT 1 is a probe of partitions_pkey per partition pushed.
CREATE OR REPLACE FUNCTION queen.trg_messages_partition_lookup() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_newest jsonb;
BEGIN
    SELECT jsonb_agg(jsonb_build_array(x.partition_id, x.id, x.created_at)) INTO v_newest
      FROM (SELECT DISTINCT ON (n.partition_id) n.partition_id, n.id, n.created_at
              FROM new_rows n
             ORDER BY n.partition_id, n.created_at DESC, n.id DESC) x;
    INSERT INTO queen.partition_lookup AS pl
           (partition_id, queue_id, last_message_id, last_message_created_at, updated_at)
    SELECT p.id, p.queue_id, (e ->> 1)::bigint, (e ->> 2)::timestamptz, now()
      FROM jsonb_array_elements(v_newest) e
     CROSS JOIN LATERAL (SELECT p0.id, p0.queue_id FROM queen.partitions p0
                          WHERE p0.id = (e ->> 0)::uuid LIMIT 1) p
    ON CONFLICT (partition_id) DO UPDATE
       SET last_message_id = EXCLUDED.last_message_id,
           last_message_created_at = EXCLUDED.last_message_created_at,
           updated_at = EXCLUDED.updated_at
     WHERE (pl.last_message_created_at, pl.last_message_id)
         < (EXCLUDED.last_message_created_at, EXCLUDED.last_message_id);
    RETURN NULL;
END;
$$;
