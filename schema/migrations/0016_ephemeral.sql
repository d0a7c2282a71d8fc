-- Ephemeral queues (/api/v1/ephemeral/*; docs/ephemeral.md): bounded, lossy by contract.
--
-- The declared configuration is an ordinary (logged) table: it survives restarts, crashes
-- and failovers. The contents are UNLOGGED tables: no WAL is written for them, so a push or
-- a pop does not wait for a WAL flush at commit, and PostgreSQL empties them after a crash
-- (a clean restart keeps them; the contract allows either). Every process of every
-- instance sees the same rings, which memory shared between the processes of one host
-- could not give (docs/ephemeral.md, "Why UNLOGGED tables").
--
-- A ring's `incarnation` changes when it is created (after a crash emptied the tables, on
-- the first push or pop) and on every reset: a message id carries it, so an ack for a
-- message of an earlier incarnation answers `stale` instead of touching a new message
-- that happens to have the same number (numbers start again with the ring's row).

CREATE TABLE queen.ephemeral_queues (
    name          TEXT PRIMARY KEY,
    max_bytes     BIGINT NOT NULL DEFAULT 67108864,   -- 64 MiB of payload (JSON text)
    max_length    INTEGER NOT NULL DEFAULT 100000,    -- messages
    policy        TEXT NOT NULL DEFAULT 'reject' CHECK (policy IN ('reject', 'drop_oldest')),
    ttl_seconds   INTEGER NOT NULL DEFAULT 0,         -- 0: no age limit
    lease_seconds INTEGER NOT NULL DEFAULT 30,
    retry_limit   INTEGER NOT NULL DEFAULT 3,
    window_ms     INTEGER NOT NULL DEFAULT 0,         -- windowBuffer: a waiting pop waits up
    window_count  INTEGER NOT NULL DEFAULT 0,         -- to ms for count messages
    declared      BOOLEAN NOT NULL DEFAULT false,     -- configured, not only named by a push/pop
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- One row per queue with contents: the incarnation and the counters every push and pop
-- keeps exact under this row's lock (pushes and pops of one queue take turns on it).
CREATE UNLOGGED TABLE queen.ephemeral_rings (
    queue       TEXT PRIMARY KEY,
    incarnation UUID NOT NULL DEFAULT gen_random_uuid(),
    length      INTEGER NOT NULL DEFAULT 0,
    bytes       BIGINT NOT NULL DEFAULT 0,
    pushed      BIGINT NOT NULL DEFAULT 0,   -- messages pushed: the last message id
    released    BIGINT NOT NULL DEFAULT 0,   -- messages handed back for redelivery
    dropped     BIGINT NOT NULL DEFAULT 0,   -- bounds, age, retry limit (counted, gone)
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE UNLOGGED TABLE queen.ephemeral_messages (
    queue      TEXT NOT NULL,
    id         BIGINT NOT NULL,
    partition  TEXT NOT NULL,
    payload    JSONB NOT NULL,
    bytes      INTEGER NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, id)
);
CREATE INDEX ephemeral_messages_partition_idx ON queen.ephemeral_messages (queue, partition, id);

-- Each group's cursor per partition: every id at or below last_id was handed to the group.
-- `__QUEUE_MODE__` is the groupless queue mode, as on durable queues.
CREATE UNLOGGED TABLE queen.ephemeral_cursors (
    queue      TEXT NOT NULL,
    grp        TEXT NOT NULL,
    partition  TEXT NOT NULL,
    last_id    BIGINT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, grp, partition)
);

-- Messages handed out with explicit ack and not acked yet: redelivered when the lease
-- runs out (or at once after a failed/retry ack) until retry_limit, then dropped.
CREATE UNLOGGED TABLE queen.ephemeral_inflight (
    queue            TEXT NOT NULL,
    grp              TEXT NOT NULL,
    id               BIGINT NOT NULL,
    partition        TEXT NOT NULL,
    attempts         INTEGER NOT NULL,
    lease_expires_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (queue, grp, id)
);
CREATE INDEX ephemeral_inflight_due_idx ON queen.ephemeral_inflight (queue, grp, lease_expires_at);
