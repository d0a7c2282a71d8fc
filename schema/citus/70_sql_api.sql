-- CITUS ONLY: Queen's SQL API (docs/sql.md, docs/scaling.md "Citus"). Runs after the other
-- files of this folder on every migrate; idempotent.
--
-- The SQL API's functions run on the coordinator, where the application's session is and
-- where the servers listen; each of their statements on one partition's rows goes to the
-- worker that holds it (router statements), as the HTTP face's delegated calls do in one
-- round trip. Their wake-ups at commit are the coordinator's: queen.commit_wakes is a table
-- of the coordinator (migration 0027), and a produce records its wake-ups there
-- (queen._sql_citus_wakes). The trigger that carries a produce's wake-ups on plain PostgreSQL
-- fires on the shards of queen.partition_lookup, on the workers, where nobody listens: it
-- goes.
SET LOCAL citus.enable_unsafe_triggers = on;
DROP TRIGGER IF EXISTS partition_lookup_sql_wakes ON queen.partition_lookup;
