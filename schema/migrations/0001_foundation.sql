-- Foundation: the queen schema, migration bookkeeping lives in queen.schema_migrations
-- (created by the runner itself), and the shared system state used by maintenance mode.
CREATE SCHEMA IF NOT EXISTS queen;

CREATE TABLE IF NOT EXISTS queen.system_state (
    key        TEXT PRIMARY KEY,
    value      JSONB NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

INSERT INTO queen.system_state (key, value) VALUES
    ('maintenance_mode', '{"enabled": false}'),
    ('pop_maintenance_mode', '{"enabled": false}')
ON CONFLICT (key) DO NOTHING;
