-- Timers: a message scheduled for later (docs/timers.md). A row of queen.timers is a timer
-- that has not fired yet; when it is due, one firer (any server process of any instance)
-- claims it with FOR UPDATE SKIP LOCKED, stores its message in the queue and deletes it,
-- in one transaction: a timer fires once, and a firer that dies before its commit leaves
-- the row to the next one. There is no tombstone: a fired timer has no row here, and the
-- log of fires (queen.timer_fires) is kept for TIMERS_FIRED_RETENTION_HOURS for metrics,
-- the dashboard and the curious.
--
-- `message_id` is drawn from the messages' sequence when the timer is scheduled, so the
-- answer to the schedule names the message that the fire stores; the fire stores it after
-- the partition's newest message (see queen._timers_fire), so that a reserved (older) id
-- never sorts behind a cursor.
-- `fire_at` is when a firer may next try: `deliver_at`, or later after a failed attempt
-- (the queue was full), with `attempts` and `last_error` saying why.
-- A timer belongs to its queue: deleting the queue deletes its timers.

CREATE TABLE queen.timers (
    queue_id       UUID NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    timer_key      TEXT COLLATE "C" NOT NULL,
    partition_name TEXT NOT NULL DEFAULT 'Default',
    payload        JSONB NOT NULL DEFAULT 'null'::jsonb,
    is_encrypted   BOOLEAN NOT NULL DEFAULT false,
    txn            TEXT NOT NULL,
    message_id     BIGINT NOT NULL,
    producer_sub   TEXT,
    deliver_at     TIMESTAMPTZ NOT NULL,
    fire_at        TIMESTAMPTZ NOT NULL,
    attempts       INTEGER NOT NULL DEFAULT 0,
    last_error     TEXT,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (queue_id, timer_key)
);
CREATE INDEX timers_fire_at_idx ON queen.timers (fire_at);

-- One row per fire: what was delivered, when it was due and when it fired. Its lateness is
-- fired_at - greatest(deliver_at, scheduled_at): a timer scheduled in the past is due when
-- it was scheduled.
CREATE TABLE queen.timer_fires (
    id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue_name     TEXT NOT NULL,
    timer_key      TEXT NOT NULL,
    partition_name TEXT NOT NULL,
    txn            TEXT NOT NULL,
    message_id     BIGINT NOT NULL,
    status         TEXT NOT NULL,  -- queued | duplicate (a message with its txn was there)
    attempts       INTEGER NOT NULL,
    deliver_at     TIMESTAMPTZ NOT NULL,
    scheduled_at   TIMESTAMPTZ NOT NULL,  -- when the timer got this deliver_at
    fired_at       TIMESTAMPTZ NOT NULL
);
CREATE INDEX timer_fires_fired_at_idx ON queen.timer_fires (fired_at);
