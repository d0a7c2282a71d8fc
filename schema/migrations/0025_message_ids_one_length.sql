-- Message ids of one length: the next id drawn from queen.messages_id_seq is at least 10^14,
-- so every message id (sent to clients as a string, "100000000000042") has 15 digits and
-- the string order of ids is their numeric order. The official 0.15.0 client's streaming
-- runner orders a batch by (createdAt in whole ms, id as a string), and the messages of
-- one push share a created_at: with ids 998..1002 it processed (and acked) 1000, 1001,
-- 1002, 998, 999 (docs/streams.md). The original server's ids sort as strings too.
--
-- 15 digits last for 9 * 10^14 ids (to 999,999,999,999,999); every id stays below 2^53
-- (about 9.007 * 10^15; on Citus while there are fewer than 32 worker groups), so a
-- JavaScript client reading one as a number still gets it exactly.
--
-- Monotonic: the sequence only moves forward (to 10^14 when its next value is below that;
-- a database that is past it is left alone), so ids stored before keep sorting before the
-- new ones (the cursor orders a partition by (created_at, id)). A push drawing ids while
-- this runs gets ids below 10^14 or from 10^14 on, never one twice.
--
-- setval only: it is the one change of the sequence that Citus allows on the coordinator
-- of a database whose queen.messages is distributed already ("ALTER SEQUENCE" and "ALTER
-- TABLE ... ALTER COLUMN id RESTART" are refused there). On a new Citus database this runs
-- before schema/citus/10_distribute.sql distributes queen.messages, which keeps the
-- coordinator's sequence as it is. Citus gives each worker a range of its own for the
-- identity (group id * 2^48 + 1 on: 281474976710657 on the first, 562949953421313 on the
-- second, 844424930131969 on the third worker, 15 digits each), used by the pushes that
-- run on a worker; the coordinator's ids (10^14 on) reach the first worker's range after
-- 1.8 * 10^14 of them.
DO $ids$
DECLARE
    v_next bigint;
BEGIN
    SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END
      INTO v_next
      FROM queen.messages_id_seq;
    IF v_next < 100000000000000 THEN
        PERFORM setval('queen.messages_id_seq'::regclass, 100000000000000, false);
    END IF;
END;
$ids$;
