-- Queen's SQL API (docs/sql.md; its functions: schema/functions/92_sql_api*.sql): what it
-- needs beyond functions.
--
-- 1. Wake-ups at commit. A produce (or a commit that frees a partition) made from SQL runs
--    in the application's own transaction, which may stay open long after the call. Its
--    wake-ups are collected for the transaction (queen._wake_at_commit, in the setting
--    queen.commit_wake_events) and sent by a deferred trigger when it commits: only the
--    events some server process waits for (queen.wake_interest), each as the NOTIFY the
--    listeners of every instance hear (queen_threads/wake/listener.py); nothing when the
--    transaction (or the savepoint that produced) rolls back. The trigger holds the
--    wake-interest lock shared from its check to the commit, as the server's pushes do
--    (queen._wake_epoch): an interest that appears meanwhile waits for this commit, and the
--    pop that follows it finds the messages (docs/architecture.md, "Wake-ups").
--    The first wake-up of a transaction writes its row here (the trigger's event); the
--    trigger deletes it. Unlogged: a row lives only as long as its transaction, and a
--    crash loses nothing that matters. On Citus a table of the coordinator, where the
--    API's functions run and the servers listen.
CREATE UNLOGGED TABLE queen.commit_wakes (
    xid xid8 PRIMARY KEY DEFAULT pg_current_xact_id()
);

-- The trigger's function is in schema/functions/92_sql_api.sql (a function file, to change
-- with the API): a placeholder here.
CREATE FUNCTION queen.trg_commit_wakes() RETURNS trigger
LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END; $$;

CREATE CONSTRAINT TRIGGER commit_wakes_send
    AFTER INSERT ON queen.commit_wakes
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION queen.trg_commit_wakes();

-- 1b. A produce's own wake-ups, on plain PostgreSQL: the push writes its partitions' newest
--    message (queen.partition_lookup) anyway, and this trigger, deferred to the commit,
--    wakes the long polls waiting for that partition's queue (its function is in 92_sql_api.sql):
--    no row of its own to write. Only for the writes of a push run with
--    queen.commit_wakes = 'push' (the produce functions): the server's pushes never queue an
--    event. On Citus the table is distributed and its triggers fire on the workers, where
--    the servers do not listen: there a produce's wake-ups go through queen.commit_wakes
--    (schema/citus/70_sql_api.sql drops this trigger).
-- (A placeholder: its function is in schema/functions/92_sql_api.sql.)
CREATE FUNCTION queen.trg_partition_lookup_sql_wakes() RETURNS trigger
LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END; $$;

DO $plain$
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                    WHERE logicalrelid = 'queen.partition_lookup'::regclass) THEN
            RETURN;  -- (a Citus database already placed: see above)
        END IF;
    END IF;
    CREATE CONSTRAINT TRIGGER partition_lookup_sql_wakes
        AFTER INSERT OR UPDATE OF last_message_id ON queen.partition_lookup
        DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW
        WHEN (current_setting('queen.commit_wakes', true) = 'push')
        EXECUTE FUNCTION queen.trg_partition_lookup_sql_wakes();
END;
$plain$;

-- 1c. The push's own commit-time bookkeeping (queen.trg_partition_lookup_heads, 0019) runs
--    at commit as the current role, which for a produce from SQL is the application's
--    session role, not the SQL API's owner: a role that may only produce has no right on
--    the cursor rows it writes. It runs as its owner, with its search_path pinned (a
--    SECURITY DEFINER function must not resolve names in schemas its caller controls).
--    Measured on the server's own single push (this 2-core machine, busy): +13-18 us of
--    PostgreSQL CPU on 610-690 us. A later migration that replaces this function must
--    keep both (tests/integration/test_sql_api_rights.py fails otherwise).
ALTER FUNCTION queen.trg_partition_lookup_heads()
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION queen.trg_partition_lookup_heads() FROM PUBLIC;

-- 2. The wall clock. The queue's functions tell time by now(), the start of their
--    transaction, which for the server's one-call transactions is the time of the call.
--    An application's transaction may have begun long before it consumes or commits,
--    and consume_one's wait stays in one statement: with now() frozen, a lease would be
--    shorter than its length, and a partition that became ready during the wait would
--    stay out of reach. The SQL API's functions run with
--    search_path = queen_clock, pg_catalog, pg_temp: an unqualified now() in anything
--    they call is queen_clock.now(), the time of the call (PostgreSQL searches pg_catalog
--    first only when it is not named in the path). The server's own calls do not name
--    this schema and keep now().
CREATE SCHEMA queen_clock;
CREATE FUNCTION queen_clock.now() RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE AS $$ SELECT pg_catalog.clock_timestamp() $$;
