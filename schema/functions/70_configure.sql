-- CONFIGURE: upsert of a queue with every option (omitted options go back to their
-- defaults), and make sure its "Default" partition exists.
-- Input:  {queue, namespace|null, task|null, options:{leaseTime, maxSize, ttl, retryLimit,
--          retryDelay, retryStrategy, retryDelayMax, retryJitter, deadLetterQueue,
--          dlqAfterMaxRetries, priority, delayedProcessing, windowBuffer, retentionSeconds,
--          completedRetentionSeconds, retentionEnabled, encryptionEnabled, maxWaitTimeSeconds}}
-- (the HTTP layer rejects bad values with a 400; here they fall back to the defaults).
-- namespace/task: a string is stored as given; null/missing derives them from a dotted name
-- like push does ("ns.task" -> "ns", "task").
-- Output: {configured:true, queueId, partitionId, queue, namespace, task, options:{all 18}}
--         or {configured:false, error} when the queue name is missing.
CREATE OR REPLACE FUNCTION queen.configure_queue_v1(p jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_name text := CASE WHEN jsonb_typeof(p -> 'queue') = 'string' THEN p ->> 'queue' END;
    v_opt  jsonb := CASE WHEN jsonb_typeof(p -> 'options') = 'object' THEN p -> 'options'
                         ELSE '{}'::jsonb END;
    v_ns   text;
    v_task text;
    q      queen.queues;
    v      record;
    v_pid  uuid;
    -- a value, not now() in DO UPDATE SET: Citus wants only immutable functions there
    -- (queen.queues is a reference table on Citus)
    v_now  timestamptz := now();
BEGIN
    IF v_name IS NULL OR v_name = '' THEN
        RETURN jsonb_build_object('configured', false, 'error', 'queue is required');
    END IF;
    v_ns := CASE WHEN jsonb_typeof(p -> 'namespace') = 'string' THEN p ->> 'namespace'
                 ELSE queen._queue_namespace(v_name) END;
    v_task := CASE WHEN jsonb_typeof(p -> 'task') = 'string' THEN p ->> 'task'
                   ELSE queen._queue_task(v_name) END;

    -- The options are computed here, apart from the INSERT: Citus evaluates every
    -- expression of an INSERT into a reference table up front, CASE branches not taken
    -- included (queen._jbool's numeric cast of a boolean), so it gets plain values.
    SELECT coalesce(queen._jint(v_opt -> 'priority', 0), 0) AS priority,
           coalesce(queen._jint(v_opt -> 'leaseTime', 300), 300) AS lease_time,
           coalesce(queen._jint(v_opt -> 'retryLimit', 3), 3) AS retry_limit,
           coalesce(queen._jint(v_opt -> 'retryDelay', 0), 0) AS retry_delay,
           coalesce(queen._jint(v_opt -> 'ttl', 3600), 3600) AS ttl,
           coalesce(queen._jint(v_opt -> 'maxSize', 0), 0) AS max_queue_size,
           coalesce(queen._jbool(v_opt -> 'deadLetterQueue', false), false) AS dead_letter_queue,
           coalesce(queen._jbool(v_opt -> 'dlqAfterMaxRetries', false), false) AS dlq_after_max_retries,
           coalesce(queen._jint(v_opt -> 'delayedProcessing', 0), 0) AS delayed_processing,
           coalesce(queen._jint(v_opt -> 'windowBuffer', 0), 0) AS window_buffer,
           coalesce(queen._jint(v_opt -> 'retentionSeconds', 0), 0) AS retention_seconds,
           coalesce(queen._jint(v_opt -> 'completedRetentionSeconds', 0), 0) AS completed_retention_seconds,
           coalesce(queen._jbool(v_opt -> 'retentionEnabled', false), false) AS retention_enabled,
           coalesce(queen._jbool(v_opt -> 'encryptionEnabled', false), false) AS encryption_enabled,
           coalesce(queen._jint(v_opt -> 'maxWaitTimeSeconds', 0), 0) AS max_wait_time_seconds,
           CASE WHEN v_opt ->> 'retryStrategy' IN ('fixed', 'exponential', 'linear')
                     THEN v_opt ->> 'retryStrategy' ELSE 'fixed' END AS retry_strategy,
           greatest(coalesce(queen._jint(v_opt -> 'retryDelayMax', 3600000), 3600000), 0) AS retry_delay_max,
           CASE WHEN jsonb_typeof(v_opt -> 'retryJitter') = 'number'
                     THEN least(greatest((v_opt ->> 'retryJitter')::numeric, 0), 1)::real
                     ELSE 0.1 END AS retry_jitter
      INTO v;

    PERFORM queen._definitions_lock();
    INSERT INTO queen.queues AS t
           (name, namespace, task, priority, lease_time, retry_limit, retry_delay, ttl,
            max_queue_size, dead_letter_queue, dlq_after_max_retries, delayed_processing,
            window_buffer, retention_seconds, completed_retention_seconds, retention_enabled,
            encryption_enabled, max_wait_time_seconds, retry_strategy, retry_delay_max,
            retry_jitter)
    VALUES (v_name, v_ns, v_task, v.priority, v.lease_time, v.retry_limit, v.retry_delay,
            v.ttl, v.max_queue_size, v.dead_letter_queue, v.dlq_after_max_retries,
            v.delayed_processing, v.window_buffer, v.retention_seconds, v.completed_retention_seconds,
            v.retention_enabled, v.encryption_enabled, v.max_wait_time_seconds, v.retry_strategy,
            v.retry_delay_max, v.retry_jitter)
    ON CONFLICT (name) DO UPDATE
       SET namespace = EXCLUDED.namespace,
           task = EXCLUDED.task,
           priority = EXCLUDED.priority,
           lease_time = EXCLUDED.lease_time,
           retry_limit = EXCLUDED.retry_limit,
           retry_delay = EXCLUDED.retry_delay,
           ttl = EXCLUDED.ttl,
           max_queue_size = EXCLUDED.max_queue_size,
           dead_letter_queue = EXCLUDED.dead_letter_queue,
           dlq_after_max_retries = EXCLUDED.dlq_after_max_retries,
           delayed_processing = EXCLUDED.delayed_processing,
           window_buffer = EXCLUDED.window_buffer,
           retention_seconds = EXCLUDED.retention_seconds,
           completed_retention_seconds = EXCLUDED.completed_retention_seconds,
           retention_enabled = EXCLUDED.retention_enabled,
           encryption_enabled = EXCLUDED.encryption_enabled,
           max_wait_time_seconds = EXCLUDED.max_wait_time_seconds,
           retry_strategy = EXCLUDED.retry_strategy,
           retry_delay_max = EXCLUDED.retry_delay_max,
           retry_jitter = EXCLUDED.retry_jitter,
           updated_at = v_now
    RETURNING t.* INTO q;

    INSERT INTO queen.partitions (queue_id, name) VALUES (q.id, 'Default')
    ON CONFLICT (queue_id, name) DO NOTHING;
    SELECT pt.id INTO v_pid FROM queen.partitions pt WHERE pt.queue_id = q.id AND pt.name = 'Default';

    RETURN jsonb_build_object(
        'configured', true,
        'queueId', q.id,
        'partitionId', v_pid,
        'queue', q.name,
        'namespace', q.namespace,
        'task', q.task,
        'options', queen._queue_options(q));
END;
$$;
