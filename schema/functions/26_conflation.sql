-- CONFLATION (docs/api.md, "Conflation"): whether a pop of `p_group` in its scope (a queue,
-- or a namespace/task pair) conflates, from the group's stored policy
-- (queen.conflation_groups, migration 0011). A request for conflation (`p_requested`)
-- declares it when the group has no cursor in the scope yet; a group that already has
-- cursors there without the policy was declared without it, and the request is a conflict
-- (the stored policy wins). Without a request the stored policy applies all the same.
-- The scope: the queues p_qids, or the one partition p_pid of a pop of one partition.
DROP FUNCTION IF EXISTS queen._conflation(text, text, text, text, uuid[], boolean);
CREATE OR REPLACE FUNCTION queen._conflation(
    p_group text, p_queue text, p_ns text, p_task text, p_qids uuid[], p_pid uuid,
    p_requested boolean, OUT conflates boolean, OUT conflict boolean
) LANGUAGE plpgsql AS $$
DECLARE
    v_queue text := coalesce(p_queue, '');
    v_ns    text := CASE WHEN p_queue IS NULL THEN coalesce(p_ns, '') ELSE '' END;
    v_task  text := CASE WHEN p_queue IS NULL THEN coalesce(p_task, '') ELSE '' END;
BEGIN
    conflict := false;
    conflates := EXISTS (SELECT 1 FROM queen.conflation_groups g
                          WHERE g.consumer_group = p_group AND g.queue_name = v_queue
                            AND g.namespace = v_ns AND g.task = v_task);
    IF p_requested AND NOT conflates THEN
        IF p_pid IS NOT NULL THEN  -- (one statement each: on Citus the first is on one worker)
            PERFORM 1 FROM queen.partition_consumers pc
             WHERE pc.partition_id = p_pid AND pc.consumer_group = p_group;
        ELSE
            PERFORM 1 FROM queen.partition_consumers pc
              JOIN queen.partitions p ON p.id = pc.partition_id
             WHERE p.queue_id = ANY (p_qids) AND pc.consumer_group = p_group
             LIMIT 1;
        END IF;
        IF FOUND THEN
            conflict := true;
        ELSE
            INSERT INTO queen.conflation_groups (consumer_group, queue_name, namespace, task)
            VALUES (p_group, v_queue, v_ns, v_task)
            ON CONFLICT DO NOTHING;
            conflates := true;
        END IF;
    END IF;
END;
$$;
