-- CITUS ONLY. queen.shard_anchors (migration 0022) distributed with the message path and
-- holding one row in every shard, so that a consumer group's registration takes the
-- queue's registration lock on every node that stores partitions (one statement per row,
-- each routed to its shard's worker; queen._register_group). On every migrate: a shard
-- without a row (a new shard, e.g. after a split) gets one. Rows stay with their shards
-- when shards move (rebalancing), so every node that holds a shard keeps a row.
DO $citus$
DECLARE
    v_ids   uuid[];
    v_have  bigint[];
    v_shard bigint;
    v_id    uuid;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition
                    WHERE logicalrelid = 'queen.shard_anchors'::regclass) THEN
        PERFORM create_distributed_table('queen.shard_anchors', 'partition_id',
                                         colocate_with := 'queen.messages');
    END IF;
    v_ids := ARRAY(SELECT a.partition_id FROM queen.shard_anchors a);
    v_have := ARRAY(SELECT get_shard_id_for_distribution_column('queen.shard_anchors', u.id)
                      FROM unnest(v_ids) AS u(id));
    FOR v_shard IN
        SELECT s.shardid FROM pg_dist_shard s
         WHERE s.logicalrelid = 'queen.shard_anchors'::regclass
           AND s.shardid <> ALL (v_have)
         ORDER BY s.shardid
    LOOP
        LOOP  -- a random id in the shard's hash range (1 in shard_count tries on average)
            v_id := gen_random_uuid();
            EXIT WHEN get_shard_id_for_distribution_column('queen.shard_anchors', v_id) = v_shard;
        END LOOP;
        INSERT INTO queen.shard_anchors (partition_id) VALUES (v_id);
    END LOOP;
END;
$citus$;
