-- Streams: windowed consumption over queues (docs/streams.md).
--
-- A stream reads the messages of one or more source queues as windows: tumbling or
-- sliding time windows over the messages' created_at, or count windows of N messages in
-- (created_at, id) order. A `partitioned` stream has one key per source partition (the
-- partition id); otherwise all sources form the one key '__GLOBAL__'. Each consumer group
-- has an offset per key and consumes that key's windows in order, one window at a time:
-- a window is leased to one consumer (queen.stream_leases, at most one per (stream, group,
-- key)) and the offset moves past it when that consumer acknowledges it.
--
-- Nothing here refers to a message row: retention deletes messages as for any queue, and
-- deleting a source partition removes its keys' offsets and leases (partition_id cascades),
-- deleting a source queue removes it from its streams (a stream left without sources is
-- deleted, trigger below), deleting a stream removes everything of it.

CREATE TABLE queen.streams (
    id                      UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    name                    TEXT NOT NULL UNIQUE,
    namespace               TEXT NOT NULL DEFAULT '',
    partitioned             BOOLEAN NOT NULL DEFAULT false,
    window_type             TEXT NOT NULL
        CHECK (window_type IN ('tumbling', 'sliding', 'count')),
    window_duration_ms      BIGINT,      -- tumbling and sliding
    window_slide_ms         BIGINT,      -- sliding (tumbling: = duration)
    window_size_count       INTEGER,     -- count
    window_grace_period_ms  BIGINT NOT NULL DEFAULT 30000,
    window_lease_timeout_ms BIGINT NOT NULL DEFAULT 60000,
    created_at              TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at              TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT streams_time_window CHECK (
        window_type = 'count' OR (window_duration_ms > 0 AND window_slide_ms > 0
                                  AND window_slide_ms <= window_duration_ms)),
    CONSTRAINT streams_count_window CHECK (
        window_type <> 'count' OR window_size_count > 0)
);

CREATE TABLE queen.stream_sources (
    stream_id UUID NOT NULL REFERENCES queen.streams (id) ON DELETE CASCADE,
    queue_id  UUID NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    PRIMARY KEY (stream_id, queue_id)
);
CREATE INDEX stream_sources_queue_idx ON queen.stream_sources (queue_id);

-- Where a group is in one key. Time windows: the next window starts at or after
-- cursor_at (NULL: from the first message). Count windows: the last consumed message is
-- (cursor_at, cursor_id) (NULL: none yet).
CREATE TABLE queen.stream_consumer_offsets (
    stream_id               UUID NOT NULL REFERENCES queen.streams (id) ON DELETE CASCADE,
    consumer_group          TEXT NOT NULL,
    stream_key              TEXT NOT NULL,   -- a source partition id, or '__GLOBAL__'
    partition_id            UUID REFERENCES queen.partitions (id) ON DELETE CASCADE,
    cursor_at               TIMESTAMPTZ,
    cursor_id               BIGINT NOT NULL DEFAULT 0,
    last_acked_window_start TIMESTAMPTZ,
    last_acked_window_end   TIMESTAMPTZ,
    last_acked_at           TIMESTAMPTZ,
    windows_acked           BIGINT NOT NULL DEFAULT 0,
    messages_acked          BIGINT NOT NULL DEFAULT 0,
    created_at              TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (stream_id, consumer_group, stream_key)
);
CREATE INDEX stream_consumer_offsets_partition_idx
    ON queen.stream_consumer_offsets (partition_id) WHERE partition_id IS NOT NULL;

-- The window a group's key has out, if any. An expired lease stays until the window is
-- leased again (the same window: the offset has not moved) or the offset is moved.
-- Count windows keep their exact message range (first/last position) here.
CREATE TABLE queen.stream_leases (
    lease_id         UUID PRIMARY KEY,
    window_id        UUID NOT NULL DEFAULT gen_random_uuid(),
    stream_id        UUID NOT NULL,
    consumer_group   TEXT NOT NULL,
    stream_key       TEXT NOT NULL,
    window_start     TIMESTAMPTZ NOT NULL,
    window_end       TIMESTAMPTZ NOT NULL,
    first_at         TIMESTAMPTZ,
    first_id         BIGINT,
    last_at          TIMESTAMPTZ,
    last_id          BIGINT,
    message_count    INTEGER NOT NULL,
    delivery_count   INTEGER NOT NULL DEFAULT 1,
    lease_expires_at TIMESTAMPTZ NOT NULL,
    leased_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT stream_leases_one_per_key UNIQUE (stream_id, consumer_group, stream_key),
    FOREIGN KEY (stream_id, consumer_group, stream_key)
        REFERENCES queen.stream_consumer_offsets (stream_id, consumer_group, stream_key)
        ON DELETE CASCADE
);

-- A stream whose last source queue was deleted goes with it.
CREATE FUNCTION queen.trg_stream_sources_gone() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM queen.streams s
     WHERE s.id IN (SELECT DISTINCT o.stream_id FROM old_rows o)
       AND NOT EXISTS (SELECT 1 FROM queen.stream_sources ss WHERE ss.stream_id = s.id);
    RETURN NULL;
END;
$$;

CREATE TRIGGER stream_sources_gone
    AFTER DELETE ON queen.stream_sources
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION queen.trg_stream_sources_gone();
