-- Reads by offset (POST /api/v1/fetch, POST /api/v1/partitions/changed; docs/reads.md).
--
-- An offset is a message's place in its partition: 0 for the first message ever stored in
-- it, one more for each message after it. It is assigned when the message is stored and
-- never changes, and no value is given twice in a partition: retention or a deleted message
-- leaves a gap, never a reuse. `queen.partitions.next_offset` is the next value the
-- partition will assign (the high watermark). A push draws its offsets under the
-- partition's row lock (the same lock that orders its ids and timestamp, 0002), so within a
-- partition offset order is (created_at, id) order and commit order: a snapshot always sees
-- every offset below some value and none above, and a reader that got the high watermark
-- from a snapshot can never be overtaken by a later commit with a lower offset.
--
-- Pre-existing messages are numbered here in (created_at, id) order (one pass over the
-- table: on a large database, run this migration in a quiet hour).

ALTER TABLE queen.partitions ADD COLUMN next_offset BIGINT NOT NULL DEFAULT 0;
ALTER TABLE queen.messages ADD COLUMN partition_offset BIGINT;

UPDATE queen.messages m
   SET partition_offset = r.rn - 1
  FROM (SELECT id, row_number() OVER (PARTITION BY partition_id ORDER BY created_at, id) AS rn
          FROM queen.messages) r
 WHERE m.id = r.id;

UPDATE queen.partitions p
   SET next_offset = c.n
  FROM (SELECT partition_id, max(partition_offset) + 1 AS n
          FROM queen.messages GROUP BY partition_id) c
 WHERE p.id = c.partition_id;

-- A writer that stores a message without an offset (plain SQL) gets the next one of its
-- partition, under the partition's row lock, and stamps the partition's last write
-- (last_activity, what POST /api/v1/partitions/changed lists). The server's own writers assign offsets
-- themselves (the WHEN clause keeps this trigger off their path).
CREATE FUNCTION queen.trg_messages_assign_offset() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE queen.partitions p
       SET next_offset = p.next_offset + 1, last_activity = clock_timestamp()
     WHERE p.id = NEW.partition_id
    RETURNING p.next_offset - 1 INTO NEW.partition_offset;
    IF NEW.partition_offset IS NULL THEN
        RAISE EXCEPTION 'partition % does not exist', NEW.partition_id
              USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER messages_assign_offset
    BEFORE INSERT ON queen.messages
    FOR EACH ROW WHEN (NEW.partition_offset IS NULL)
    EXECUTE FUNCTION queen.trg_messages_assign_offset();

ALTER TABLE queen.messages ALTER COLUMN partition_offset SET NOT NULL;

-- Where a read by offset starts: every 256th offset of a partition is indexed (a partial
-- index costs a push one integer test per message, not an index entry). A read at offset N
-- finds the nearest indexed offset at or below N and walks the partition's order index
-- from there (at most 255 messages plus deleted ones).
CREATE INDEX messages_offset_anchor_idx ON queen.messages (partition_id, partition_offset)
    WHERE partition_offset % 256 = 0;
