-- name: ping
-- Liveness probe of the database.
SELECT 1;

-- name: advisory_lock
-- Serialise migrations across workers and instances.
SELECT pg_advisory_lock(%s);

-- name: advisory_unlock
SELECT pg_advisory_unlock(%s);

-- name: create_migrations_table
CREATE SCHEMA IF NOT EXISTS queen;
CREATE TABLE IF NOT EXISTS queen.schema_migrations (
    version    TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    kind       TEXT NOT NULL DEFAULT 'migration',
    checksum   TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- name: applied_migrations
-- version -> checksum of what has been applied (migrations and function files).
SELECT version, checksum FROM queen.schema_migrations;

-- name: record_migration
INSERT INTO queen.schema_migrations (version, name, kind, checksum)
VALUES (%s, %s, %s, %s)
ON CONFLICT (version) DO UPDATE SET checksum = EXCLUDED.checksum, applied_at = now();

-- name: push_messages
-- Push a batch of items (auto-creates queues/partitions, dedups, enforces maxSize).
SELECT queen.push_messages_v2(%s::jsonb)::text;

-- name: encrypted_queues
-- Which of these queues store encrypted payloads.
SELECT name FROM queen.queues WHERE encryption_enabled AND name = ANY(%s);

-- name: pop_batch
-- Several pops in one call, each with its own lease and batch size.
SELECT queen.pop_unified_batch(%s::jsonb)::text;

-- name: ack_messages
SELECT queen.ack_messages_v2(%s::jsonb)::text;

-- name: execute_transaction
SELECT queen.execute_transaction_v2(%s::jsonb)::text;

-- name: renew_lease
SELECT queen.renew_lease_v2(%s::jsonb)::text;

-- name: release_leases
-- Give leases back without acking (the client that asked for them is gone).
SELECT queen.release_leases_v1(%s::jsonb)::text;

-- name: configure_queue
SELECT queen.configure_queue_v1(%s::jsonb)::text;

-- name: delete_queue
-- Delete a queue (cascades to partitions, messages, cursors, DLQ, traces) and the
-- subscription metadata recorded for it; true when it existed.
WITH meta AS (
    DELETE FROM queen.consumer_groups_metadata WHERE queue_name = %(name)s
), gone AS (
    DELETE FROM queen.queues WHERE name = %(name)s RETURNING 1
)
SELECT count(*) > 0 FROM gone;
