-- CITUS ONLY (citus-tier, issue 33 part 3): triggers that cannot work on a reference table.
-- Runs after the other files of this folder on every migrate; idempotent.
--
-- stream_sources_gone (migration 0008) deletes a stream whose last source queue was
-- deleted, from a statement trigger's transition table: on Citus the trigger fires on the
-- table's placements, where the transition table is a shard ("relation
-- stream_sources_102011 is not distributed") and a delete of another reference table is a
-- distributed statement of its own. The only statement that removes sources, the queue
-- delete (schema/queries.sql, delete_queue), deletes those streams itself.
SET LOCAL citus.enable_unsafe_triggers = on;
DROP TRIGGER IF EXISTS stream_sources_gone ON queen.stream_sources;
