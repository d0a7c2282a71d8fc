-- Pushes no longer pay a foreign-key check per stored message (about 18% of a 1000-message
-- push, measured in docs/benchmarks.md): queen.messages.partition_id keeps its meaning, and
-- deleting partitions still deletes their messages, now through a statement trigger.
--
-- Why nothing can be left behind: a push locks every partition it stores into (FOR NO KEY
-- UPDATE, queen.push_messages_v2) before it resolves partitions again and inserts, so a
-- partition deleted meanwhile either is not found (its items are refused) or waits for the
-- push to commit; the trigger below runs after the partition rows are gone and reads with a
-- new snapshot, which sees the messages of every push that committed before the delete.
-- Retention's empty-partition cleanup locks the partition (SKIP LOCKED) before it checks
-- for messages, for the same reason.

ALTER TABLE queen.messages DROP CONSTRAINT messages_partition_id_fkey;

CREATE FUNCTION queen.trg_partitions_drop_messages() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM queen.messages m USING old_rows o WHERE m.partition_id = o.id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER partitions_drop_messages
    AFTER DELETE ON queen.partitions
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION queen.trg_partitions_drop_messages();
