-- Which server processes wait for wake-ups of which queues, so that a push or an ack whose
-- events nobody else waits for sends no NOTIFY, and costs no extra round trip.
--
-- A server process that listens (QUEEN_LISTEN_NOTIFY) records here, before its poll
-- workers pop for a long poll, what the poll waits for: a queue by name ({"queue": q}),
-- or a namespace/task scope ({"namespace": ns, "task": t}, JSON null = any). A row lives
-- until `expires_at` and is renewed while the poll waits (queen_threads/wake/interest.py);
-- `origin` is the process (the same tag its wake-ups carry), so a process's own rows
-- never make it notify itself.
--
-- `wake_interest_epoch` counts the changes that matter to a notifier: a row that appears
-- (or comes back after it expired) or is withdrawn. The server's pushes and acks hold an
-- advisory lock in shared mode and return the epoch (queen._wake_epoch); a change takes
-- the lock exclusively, so it waits for the pushes in flight, and pushes after it see its
-- epoch. A process's notifier keeps a copy of the other processes' rows and re-reads it
-- when a push or ack returned a newer epoch. Why nothing is missed: either a push saw the
-- new epoch (its notifier re-reads and finds the row), or it committed before the row
-- did, and the pop that follows the row finds its messages (docs/architecture.md,
-- "Wake-ups").

CREATE TABLE queen.wake_interest (
    origin     TEXT NOT NULL,
    selector   JSONB NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (origin, selector)
);

CREATE TABLE queen.wake_interest_epoch (
    id    BOOLEAN PRIMARY KEY DEFAULT true CHECK (id),
    epoch BIGINT NOT NULL
);
INSERT INTO queen.wake_interest_epoch (epoch) VALUES (0);
