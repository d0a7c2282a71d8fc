-- The analytics counts of each worker process that it has not flushed yet (the current
-- minute, mostly), so that the dashboard's per-minute charts are live: a process rewrites
-- its row about once a second while it counts something (one statement a second, never a
-- write per request), its periodic flush (queen.metrics_flush_v1) adds the counts to the
-- durable per-minute tables and deletes the row in the same transaction, so the charts,
-- which add these rows to the flushed ones (schema/queries/analytics.sql), count every
-- event once. UNLOGGED: the rows are a view of memory; a crash of the database loses them
-- as a crash of the process would. A row not rewritten for 10 minutes belongs to a process
-- that ended without flushing: readers skip it and the next write anywhere deletes it.
CREATE UNLOGGED TABLE queen.metrics_live (
    hostname   TEXT NOT NULL,
    port       INTEGER NOT NULL,
    worker_id  TEXT NOT NULL,
    queues     JSONB NOT NULL,  -- [{queue, minute, pushed, popped, acked, failed, dlq, pollWaits}]
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (hostname, port, worker_id)
);
