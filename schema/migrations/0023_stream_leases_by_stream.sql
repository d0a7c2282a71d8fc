-- A stream's windowed state is keyed by its stream first (issue 33: on Citus,
-- queen.stream_consumer_offsets and queen.stream_leases are distributed by stream_id and
-- co-located, schema/citus/60_streams.sql, and a primary key must hold the distribution
-- column). The same keys on plain PostgreSQL: one schema, two placements.
--
-- A lease is found by (stream_id, lease_id): its id carries its stream, the first 8 bytes
-- being the stream id's (queen._stream_lease_id, schema/functions/97_streams.sql), so an
-- ack, renew or release that names only the lease id finds the stream in queen.streams
-- first. A lease that is out while this migration runs has an id without its stream:
-- queen._stream_of_lease then looks for it among the leases (a read of every shard on
-- Citus), so it can still be acked or renewed.
ALTER TABLE queen.stream_leases
    DROP CONSTRAINT stream_leases_pkey,
    ADD CONSTRAINT stream_leases_pkey PRIMARY KEY (stream_id, lease_id);
