-- CITUS ONLY. The entry points of one-partition operations, delegated by their partition:
-- a call `SELECT queen.f(<partition id>, ...)` made by a client on the coordinator runs on
-- the worker that holds that partition's shard group, in one round trip (Citus's function
-- call delegation; the worker runs every statement of the function against its local
-- shards). The server calls them when an operation concerns one partition
-- (queen_threads/queue/store.py): a pop of one partition, an ack whose items name one
-- partition, the renewal of a lease held on one partition. Idempotent (create_distributed_
-- function replaces the registration).
SELECT create_distributed_function('queen.pop_partition_v1(uuid,jsonb)', 'p_pid',
                                   colocate_with := 'queen.messages');
SELECT create_distributed_function('queen.ack_partition_v1(uuid,jsonb)', 'p_pid',
                                   colocate_with := 'queen.messages');
SELECT create_distributed_function('queen.renew_partition_v1(uuid,jsonb)', 'p_pid',
                                   colocate_with := 'queen.messages');
