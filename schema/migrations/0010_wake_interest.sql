-- Which server processes wait for wake-ups of which queues, so that a push or an ack whose
-- events nobody else waits for sends no NOTIFY (queen.wake_batch_v2).
--
-- A server process that listens (QUEEN_LISTEN_NOTIFY) records here, before its poll
-- workers pop for a long poll, what the poll waits for: a queue by name ({"queue": q}),
-- or a namespace/task scope ({"namespace": ns, "task": t}, JSON null = any). A row lives
-- until `expires_at` and is renewed while the poll waits (queen_threads/wake/interest.py);
-- `origin` is the process (the same tag its wake-ups carry), so a process's own rows
-- never make it notify itself. Why nothing is missed: the row commits before the pop,
-- and the check runs after the push's commit, so either the check sees the row or the
-- pop sees the push (docs/architecture.md, "Wake-ups").

CREATE TABLE queen.wake_interest (
    origin     TEXT NOT NULL,
    selector   JSONB NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (origin, selector)
);
