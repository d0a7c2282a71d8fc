-- Give leases back without acking: used when the client a pop was made for has gone
-- (disconnected while waiting, or the response could not be written). The cursor does not
-- move, so the messages are delivered to the next consumer at once instead of after the
-- lease time. Emits the same 'free' wake-up as an ack that releases a lease.
CREATE OR REPLACE FUNCTION queen.release_leases_v1(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_ids uuid[];
    v_row record;
    v_count integer := 0;
BEGIN
    SELECT coalesce(array_agg(queen._try_uuid(x)) FILTER (WHERE queen._try_uuid(x) IS NOT NULL),
                    '{}')
      INTO v_ids
      FROM jsonb_array_elements_text(coalesce(p -> 'leaseIds', '[]'::jsonb)) AS x;
    FOR v_row IN
        UPDATE queen.partition_consumers pc
           SET last_lease_id = pc.lease_id,
               lease_id = NULL, lease_expires_at = NULL, lease_acquired_at = NULL,
               batch_ids = NULL, acked_ids = NULL
          FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
         WHERE pc.lease_id = ANY (v_ids) AND p.id = pc.partition_id
        RETURNING q.name AS queue, p.name AS partition, pc.consumer_group,
                  q.namespace, q.task
    LOOP
        v_count := v_count + 1;
        PERFORM queen._wake(jsonb_build_object(
            'kind', 'free', 'queue', v_row.queue, 'partition', v_row.partition,
            'consumerGroup', v_row.consumer_group,
            'namespace', v_row.namespace, 'task', v_row.task));
    END LOOP;
    RETURN to_jsonb(v_count);
END;
$$;
