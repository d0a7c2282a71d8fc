-- ===== failover =====
-- Maintenance flags (queen.system_state, shared by every process and instance) read and
-- written by queen_threads/background/maintenance.py.

-- name: maintenance_get
-- Both maintenance flags; a missing row means off.
SELECT coalesce((SELECT (value ->> 'enabled')::boolean
                   FROM queen.system_state WHERE key = 'maintenance_mode'), false),
       coalesce((SELECT (value ->> 'enabled')::boolean
                   FROM queen.system_state WHERE key = 'pop_maintenance_mode'), false);

-- name: maintenance_set
-- Switch one flag (key is maintenance_mode or pop_maintenance_mode); returns the new value.
INSERT INTO queen.system_state (key, value, updated_at)
VALUES (%(key)s, jsonb_build_object('enabled', %(enabled)s::boolean), now())
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at
RETURNING (value ->> 'enabled')::boolean;
