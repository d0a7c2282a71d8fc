-- POP AUTOPILOT (docs/api.md, "Pop autopilot"): the sizes of one pop for the dimensions the
-- client left to the server (`autopilot=true` without `partitions` and/or `batch`). A value
-- the client set is returned unchanged: autopilot never adjusts a pinned dimension.
--
--   p_ready    ready partitions of the pop's scope for its group, at the pop's first look
--   p_active   consumers holding a live lease in that scope now (distinct leases)
--   p_lag      how far the most-behind ready candidate's cursor trails its newest message
--              (the age of the backlog; a cursor never set counts as far behind)
--
-- partitions: while a backlog builds (lag over 1 s), the pop's fair share of the ready
--             partitions, ceil(ready / (active + 1)), between 1 and 16: consumers draining
--             together split the ready set instead of the first one taking all of it.
--             While consumers keep up, every ready partition up to 16: the consumer a push
--             woke takes what is there in one round trip (the busy consumers that hold
--             leases do not compete for it; dividing by them cost a 500 msg/s trickle a
--             quarter more latency, docs/benchmarks.md "Pop autopilot"). `p_active` is
--             only read for a backlog (the pop does not count leases otherwise).
-- batch:      1000 while a backlog builds (lag over 1 s): fewer, fuller round trips;
--             otherwise 100 per partition of the sweep, between 100 and 1000 (a consumer
--             that keeps up gets what is there either way; the budget only binds a backlog).
CREATE OR REPLACE FUNCTION queen._autopilot(
    p_ready bigint, p_active integer, p_lag interval, p_partitions integer, p_batch integer,
    OUT partitions integer, OUT batch integer
) LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT s.n,
           coalesce(p_batch, CASE WHEN p_lag > interval '1 second' THEN 1000
                                  ELSE least(greatest(s.n * 100, 100), 1000) END)
      FROM (SELECT coalesce(p_partitions, least(greatest(
                       CASE WHEN p_lag > interval '1 second'
                            THEN ceil(greatest(coalesce(p_ready, 0), 1)::numeric
                                      / (greatest(coalesce(p_active, 0), 0) + 1))::integer
                            ELSE coalesce(p_ready, 0)::integer END, 1), 16)) AS n) s
$$;
