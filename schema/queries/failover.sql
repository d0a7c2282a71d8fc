-- ===== failover =====
-- Maintenance flags (queen.system_state, shared by every process and instance) read and
-- written by queen_threads/background/maintenance.py.

-- name: maintenance_get
-- Both maintenance flags, then their versions (updated_at in microseconds): a missing row
-- means off, version 0.
SELECT coalesce(bool_or((value ->> 'enabled')::boolean) FILTER (WHERE key = 'maintenance_mode'), false),
       coalesce(bool_or((value ->> 'enabled')::boolean) FILTER (WHERE key = 'pop_maintenance_mode'), false),
       coalesce(max((extract(epoch FROM updated_at) * 1000000)::bigint)
                FILTER (WHERE key = 'maintenance_mode'), 0),
       coalesce(max((extract(epoch FROM updated_at) * 1000000)::bigint)
                FILTER (WHERE key = 'pop_maintenance_mode'), 0)
  FROM queen.system_state
 WHERE key IN ('maintenance_mode', 'pop_maintenance_mode');

-- name: maintenance_set
-- Switch one flag (key is maintenance_mode or pop_maintenance_mode); returns the new value
-- and its version. The version grows with every switch, in the order they commit (taken
-- under the row's lock), so a process never lets an older read undo a newer switch.
INSERT INTO queen.system_state AS s (key, value, updated_at)
VALUES (%(key)s, jsonb_build_object('enabled', %(enabled)s::boolean), clock_timestamp())
ON CONFLICT (key) DO UPDATE
   SET value = EXCLUDED.value,
       updated_at = greatest(clock_timestamp(), s.updated_at + interval '1 microsecond')
RETURNING (value ->> 'enabled')::boolean, (extract(epoch FROM updated_at) * 1000000)::bigint;
