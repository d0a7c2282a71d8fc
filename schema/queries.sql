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
