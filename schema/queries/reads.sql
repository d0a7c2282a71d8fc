-- ===== reads by offset =====
-- queen_threads/reads/store.py is their only caller; the stored functions live in
-- schema/functions/99_reads.sql.

-- name: reads_fetch
-- Records of up to 1024 partitions by offset, with each one's high watermark.
SELECT queen.fetch_offsets_v1(%s::jsonb)::text;

-- name: reads_changed
-- Pages of partitions written since a time, and the answer's safeTime.
SELECT queen.partitions_changed_v1(%s::jsonb)::text;
