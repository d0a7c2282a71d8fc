-- The ready index: a pop finds the next partition it may take in O(log P), whatever the
-- number of partitions of its queue (issue 31; docs/architecture.md, "Finding a ready
-- partition").
--
-- Every cursor row (partition, consumer group) carries what it needs to say, by itself,
-- from when its group may take the partition:
--   queue_id    the partition's queue (the index's leading column)
--   head_*      the partition's newest message, (created_at, id), written by every push
--               to that partition (queen.trg_messages_partition_lookup) on every cursor row
--               of the partition, in the push's transaction
--   not_before  the instant the partition (re-)entered the group's ready set: the last
--               claim's now() (so the ready set is served least recently consumed first),
--               or, after a claim found nothing visible yet, when the first message will be
--               (window buffer, delayed processing; 'infinity' until the next push when
--               nothing in it can become visible)
--   available_at (generated) NULL while the group has consumed up to the head; otherwise
--               the latest of not_before, the lease's expiry and the retry's wait.
-- "ready for its group now" implies available_at <= now(): every write that can make a
-- partition ready either writes the columns the generated value is computed from (push:
-- head; ack, nack, release, lease expiry, seek: cursor, lease, retry) or needs no write
-- (time passing). A claim re-checks everything on the locked row, so a row that is listed
-- but not really ready (its messages removed by retention, a window not yet closed) costs
-- one look and is then moved to its right time.
--
-- A group's cursor rows exist for every partition of a queue once the group is registered
-- for it (queen.queue_consumer_groups): its first pop of the queue (or of a namespace/task
-- that holds it) creates the rows of the partitions that have messages, under locks that
-- order it with pushes, and a push that gives a partition its first message creates the
-- rows of every registered group. Rows of unregistered groups (a seek, an ack without a
-- lease) are brought up to date when their group registers.

CREATE TABLE queen.queue_consumer_groups (
    queue_id       UUID NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    consumer_group TEXT NOT NULL,
    registered_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (queue_id, consumer_group)
);

ALTER TABLE queen.partition_consumers
    ADD COLUMN queue_id UUID,
    ADD COLUMN head_created_at TIMESTAMPTZ,
    ADD COLUMN head_id BIGINT,
    ADD COLUMN not_before TIMESTAMPTZ,
    ADD COLUMN available_at TIMESTAMPTZ GENERATED ALWAYS AS (
        CASE WHEN (head_created_at, head_id)
                  > (coalesce(last_consumed_created_at, '-infinity'::timestamptz), last_consumed_id)
             THEN greatest(coalesce(not_before, '-infinity'::timestamptz),
                           lease_expires_at, retry_available_at)
        END) STORED;

UPDATE queen.partition_consumers pc
   SET queue_id = p.queue_id,
       head_created_at = pl.last_message_created_at,
       head_id = pl.last_message_id,
       not_before = pc.last_consumed_at
  FROM queen.partitions p
  LEFT JOIN queen.partition_lookup pl ON pl.partition_id = p.id
 WHERE p.id = pc.partition_id;

CREATE INDEX partition_consumers_ready_idx
    ON queen.partition_consumers (queue_id, consumer_group, available_at)
    WHERE available_at IS NOT NULL;

-- The push's bookkeeping: every write of a partition's newest message
-- (queen.partition_lookup, kept by the statement trigger on queen.messages) writes the head
-- of the partition's cursor rows at COMMIT (a deferred constraint trigger). So a
-- transaction that pushes holds no cursor row while it stays open: consumers keep taking
-- what is committed, and only the commit waits for a claim or an ack in progress on the
-- same rows (they are short). A cursor a claim parked ('infinity') becomes ready again; with
-- a window buffer it waits for the window after this message; a cursor that had nothing
-- left enters the ready set at this message (after its delay, with delayed processing). A partition's first message
-- also creates the cursor rows of the groups registered for its queue. The queue's
-- registration lock (an advisory lock, shared here) orders this with a group registering
-- for the queue: it waits for pushes that are committing, never for open ones. A head never moves
-- back (retention rewrites partition_lookup to an older message: the rows then look ready
-- until a claim finds nothing and parks them).
CREATE FUNCTION queen.trg_partition_lookup_heads() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := now();
    q record;
    v_wait_at timestamptz;
    v_delay_at timestamptz;
BEGIN
    -- Shared with every committing push of the queue; a group registering for the queue
    -- takes it exclusively (queen._register_group), so each sees the other's rows.
    PERFORM pg_advisory_xact_lock_shared(1364218452, hashtext(NEW.queue_id::text));
    SELECT qq.window_buffer AS wait, qq.delayed_processing AS delay,
           qq.max_wait_time_seconds AS max_wait INTO q
      FROM queen.queues qq WHERE qq.id = NEW.queue_id;
    -- (instants computed here: Citus runs the UPDATE on a shard, where a CASE may hold
    -- only immutable expressions)
    v_wait_at := NEW.last_message_created_at + make_interval(secs => q.wait);
    v_delay_at := NEW.last_message_created_at + make_interval(secs => q.delay);
    UPDATE queen.partition_consumers pc
       SET head_created_at = NEW.last_message_created_at, head_id = NEW.last_message_id,
           not_before = CASE
               WHEN q.wait > 0 THEN v_wait_at
               WHEN q.delay > 0 AND q.max_wait > 0 AND q.delay >= q.max_wait
                   THEN 'infinity'  -- stale before its delay ends: never visible
               WHEN pc.available_at IS NULL THEN v_delay_at  -- it enters the ready set now
               WHEN pc.not_before = 'infinity' THEN v_now
               ELSE pc.not_before END
     WHERE pc.partition_id = NEW.partition_id
       AND (pc.head_id IS NULL
            OR (pc.head_created_at, pc.head_id)
               < (NEW.last_message_created_at, NEW.last_message_id));
    IF TG_OP = 'INSERT' THEN
        PERFORM queen._cursor_rows(ARRAY[NEW.partition_id], NULL);
    END IF;
    RETURN NULL;
END;
$$;

CREATE CONSTRAINT TRIGGER partition_lookup_heads
    AFTER INSERT OR UPDATE OF last_message_id, last_message_created_at
    ON queen.partition_lookup
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION queen.trg_partition_lookup_heads();
