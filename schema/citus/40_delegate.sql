-- CITUS ONLY. The entry points of one-partition operations, delegated by their partition:
-- a call `SELECT queen.f(<partition id>, ...)` made by a client on the coordinator runs on
-- the worker that holds that partition's shard group, in one round trip (Citus's function
-- call delegation; the worker runs every statement of the function against its local
-- shards). The server calls them when an operation concerns one partition
-- (queen_threads/queue/store.py): a pop of one partition, an ack whose items name one
-- partition, the renewal of a lease held on one partition. Registered once: registering
-- again would have Citus sync its metadata to the workers again, and until that is done
-- it delegates nothing.
-- (queen._citus_delegate: each function given, delegated by its first argument, the
-- partition id, co-located with queen.messages, unless it is already; 70_twins.sql too.)
CREATE OR REPLACE FUNCTION queen._citus_delegate(p_fns regprocedure[])
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    f regprocedure;
BEGIN
    FOREACH f IN ARRAY p_fns LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_dist_object d
                        WHERE d.classid = 'pg_proc'::regclass AND d.objid = f
                          AND d.distribution_argument_index IS NOT NULL) THEN
            PERFORM create_distributed_function(f, '$1', colocate_with := 'queen.messages');
        END IF;
    END LOOP;
END;
$$;

SELECT queen._citus_delegate(ARRAY['queen.pop_partition_v1(uuid,jsonb)',
                                   'queen.ack_partition_v1(uuid,jsonb)',
                                   'queen.ack_partition_v2(uuid,text)',
                                   'queen.renew_partition_v1(uuid,jsonb)']::regprocedure[]);
