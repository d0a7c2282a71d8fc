-- Key/value state (POST /api/v1/kv, the `kv` rider of POST /api/v1/transaction) and the
-- permits of locks and semaphores (POST /api/v1/locks), which are ordinary rows of the
-- namespace `queen-locks` (docs/kv.md).
--
-- A row is one (namespace, key). `version` comes from one sequence without a cache, so
-- versions only rise across the whole table: a key that expired and was written again
-- never gets back a version an old holder still carries, and a lock's fencing token (the
-- version of its permit's row) is higher for every later holder. A row past `expires_at`
-- does not exist for any reader or writer (the stored functions apply the predicate);
-- the sweeper deletes such rows in bounded batches (queen.kv_sweep_v1). NULL
-- `expires_at` is an explicit `forever`.
--
-- Both name columns use COLLATE "C": prefix pages and their `after` cursor follow byte
-- order, the same on every machine, and the lock order of a batch (ascending keys) is
-- the same in every process.

CREATE SEQUENCE queen.kv_version_seq AS BIGINT START 1 CACHE 1;

CREATE TABLE queen.kv (
    namespace  TEXT COLLATE "C" NOT NULL,
    key        TEXT COLLATE "C" NOT NULL,
    value      JSONB NOT NULL,
    version    BIGINT NOT NULL,
    expires_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, key)
);

-- The sweeper's only index; keys written `forever` cost nothing here.
CREATE INDEX kv_expires_idx ON queen.kv (expires_at) WHERE expires_at IS NOT NULL;

-- Counters and rows churn: vacuum often, and never truncate the heap (an ACCESS EXCLUSIVE
-- lock that would stall every reader of a table that empties and refills).
ALTER TABLE queen.kv SET (
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 500,
    vacuum_truncate = off
);

-- What the sweeper removed, over every process and instance (the JSON /metrics and the
-- dashboard read it; one row).
CREATE TABLE queen.kv_totals (
    id      BOOLEAN PRIMARY KEY DEFAULT true CHECK (id),
    expired BIGINT NOT NULL DEFAULT 0
);
INSERT INTO queen.kv_totals DEFAULT VALUES;
