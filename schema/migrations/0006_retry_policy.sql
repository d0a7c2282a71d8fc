-- Retry policy per queue and failure classes (docs/retries.md).
--
-- queues: how long a failed message waits before its next delivery.
--   retry_strategy  fixed (retry_delay every time) | exponential (retry_delay x 2^(n-1)) |
--                   linear (retry_delay x n), n = the number of the failed attempt
--   retry_delay_max cap of the growing schedules, ms (never below retry_delay itself)
--   retry_jitter    a random extra of up to this share of the computed delay (0..1)
-- The schedule itself is the pure function queen.retry_delay_ms (schema/functions/40_ack.sql).
ALTER TABLE queen.queues
    ADD COLUMN retry_strategy  TEXT    NOT NULL DEFAULT 'fixed',
    ADD COLUMN retry_delay_max INTEGER NOT NULL DEFAULT 3600000,
    ADD COLUMN retry_jitter    REAL    NOT NULL DEFAULT 0.1,
    ADD CONSTRAINT queues_retry_strategy_check
        CHECK (retry_strategy IN ('fixed', 'exponential', 'linear')),
    ADD CONSTRAINT queues_retry_delay_max_check CHECK (retry_delay_max >= 0),
    ADD CONSTRAINT queues_retry_jitter_check CHECK (retry_jitter >= 0 AND retry_jitter <= 1);

-- partition_consumers: the failed attempts of the message being retried (retry_message_id),
-- oldest first: [{attempt, failedAt, error, errorType, delayMs, availableAt}]. Read only
-- together with retry_message_id (a stale history of another message is never shown) and
-- copied into the dead-letter row when the message gives up.
ALTER TABLE queen.partition_consumers
    ADD COLUMN retry_history JSONB;

-- dead_letter_queue: the failure class the consumer gave (free text; 'validation' is
-- non-retryable) and every failed attempt, the last one included.
ALTER TABLE queen.dead_letter_queue
    ADD COLUMN error_type TEXT,
    ADD COLUMN attempts   JSONB NOT NULL DEFAULT '[]'::jsonb;
