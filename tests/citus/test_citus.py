"""queen-threads on a local Citus cluster: the cluster, the placement `migrate` gives the
schema, and where one partition's statements run (citus.log_remote_commands)."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import psycopg2
import psycopg2.extensions
import pytest

from queen_threads import migrate
from tests.support.citus import NODES, CitusCluster


def test_coordinator_sees_two_workers_with_the_extension(
    citus_cluster: CitusCluster, citus_db: str
) -> None:
    with psycopg2.connect(citus_db) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT nodeport FROM pg_dist_node WHERE shouldhaveshards AND isactive "
            "ORDER BY nodeport"
        )
        workers = [r[0] for r in cur.fetchall()]
        cur.execute(
            "SELECT result FROM run_command_on_workers("
            "$$SELECT extversion FROM pg_extension WHERE extname = 'citus'$$)"
        )
        versions = {r[0] for r in cur.fetchall()}
    conn.close()
    assert workers == sorted(citus_cluster.ports[n] for n in NODES[1:])
    assert len(versions) == 1 and versions.pop().startswith("13.")


MESSAGE_PATH = {
    "queen.messages",
    "queen.partition_consumers",
    "queen.partition_lookup",
    "queen.dead_letter_queue",
    "queen.message_traces",
    "queen.sdk_shards",
    "queen.sdk_state",
}
LATER = {"queen.queue_consumer_groups"}  # placed when a later migration adds it
DEFINITIONS = {
    "queen.queues",
    "queen.partitions",
    "queen.streams",
    "queen.stream_sources",
    "queen.sdk_queries",
    "queen.consumer_groups_metadata",
    "queen.conflation_groups",
}


def _placement(dsn: str) -> dict[str, tuple[str, str, int]]:
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT table_name::text, citus_table_type, distribution_column, colocation_id "
            "FROM citus_tables"
        )
        rows = {r[0]: (r[1], r[2], r[3]) for r in cur.fetchall()}
    conn.close()
    return rows


def test_migrate_places_the_schema_on_the_cluster_once(citus_dsn: str) -> None:
    placed = _placement(citus_dsn)
    assert {t for t, p in placed.items() if p[0] == "reference"} - LATER == DEFINITIONS
    path = {t: p for t, p in placed.items() if t in MESSAGE_PATH}
    assert set(path) == MESSAGE_PATH
    assert {p[:2] for p in path.values()} == {("distributed", "partition_id")}
    assert len({p[2] for p in path.values()}) == 1  # one co-location group
    assert placed["queen.timers"][:2] == ("distributed", "queue_id")
    # Again: nothing left to apply, the placement unchanged.
    assert migrate.migrate(citus_dsn) == []
    assert _placement(citus_dsn) == placed


def _worker_of(cur: psycopg2.extensions.cursor, pid: str) -> int:
    cur.execute(
        "SELECT nodeport FROM citus_shards "
        "WHERE shardid = get_shard_id_for_distribution_column('queen.messages', %s)",
        (pid,),
    )
    row = cur.fetchone()
    assert row is not None
    return int(row[0])


def _remote_ports(notices: list[str]) -> set[int]:
    """The workers that `citus.log_remote_commands` says a statement reached."""
    return {int(p) for p in re.findall(r"on server \S+@[\d.]+:(\d+)", "".join(notices))}


def test_one_partition_is_stored_and_read_on_the_one_worker_that_holds_it(
    citus_cluster: CitusCluster, citus_dsn: str
) -> None:
    workers = {citus_cluster.ports[n] for n in NODES[1:]}
    conn = psycopg2.connect(citus_dsn)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("INSERT INTO queen.queues (name) VALUES ('orders') RETURNING id")
    (qid,) = cur.fetchone()  # type: ignore[misc]
    cur.execute(
        "INSERT INTO queen.partitions (queue_id, name) "
        "SELECT %s, 'p' || g FROM generate_series(1, 24) g RETURNING id::text",
        (qid,),
    )
    # one partition on each worker (24 random ids all on one of 2 workers: odds 2**-23)
    by_worker = {_worker_of(cur, r[0]): r[0] for r in cur.fetchall()}
    assert set(by_worker) == workers
    holders = {pid: port for port, pid in by_worker.items()}

    cur.execute("SET citus.log_remote_commands = on")
    cur.execute("SET client_min_messages = log")
    for pid, holder in holders.items():
        del conn.notices[:]
        # a writer storing with plain SQL (offsets given): one worker, and the newest
        # message per partition is kept there by the shard's row trigger
        cur.execute(
            "INSERT INTO queen.messages (transaction_id, partition_id, payload, partition_offset)"
            " SELECT 't' || g, %s, jsonb_build_object('n', g), g - 1"
            " FROM generate_series(1, 3) g",
            (pid,),
        )
        assert _remote_ports(conn.notices) == {holder}
        del conn.notices[:]
        cur.execute(
            "SELECT count(*), max(pl.last_message_id) = max(m.id) FROM queen.messages m "
            "JOIN queen.partition_lookup pl ON pl.partition_id = m.partition_id "
            "WHERE m.partition_id = %s",
            (pid,),
        )
        assert cur.fetchone() == (3, True)
        assert _remote_ports(conn.notices) == {holder}
    conn.close()


def test_a_claim_locks_a_cursor_row_on_its_worker_only_by_equality(
    citus_cluster: CitusCluster, citus_dsn: str
) -> None:
    """What the pop's claim must look like on Citus (docs/scaling.md): `FOR UPDATE SKIP LOCKED`
    keyed by one partition_id runs on the worker holding it; over several shards, or by
    `= ANY` joined to a co-located table, Citus refuses it."""
    conn = psycopg2.connect(citus_dsn)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("INSERT INTO queen.queues (name) VALUES ('claims') RETURNING id")
    (qid,) = cur.fetchone()  # type: ignore[misc]
    cur.execute(
        "INSERT INTO queen.partitions (queue_id, name) SELECT %s, 'p' || g "
        "FROM generate_series(1, 4) g RETURNING id::text",
        (qid,),
    )
    pids = [r[0] for r in cur.fetchall()]
    cur.execute(
        "INSERT INTO queen.partition_consumers (partition_id) SELECT unnest(%s::uuid[])", (pids,)
    )
    claim = (
        "SELECT pc.partition_id FROM queen.partition_consumers pc {join} "
        "WHERE {where} AND pc.consumer_group = '__QUEUE_MODE__' LIMIT 1 "
        "FOR UPDATE OF pc SKIP LOCKED"
    )
    cur.execute("SET citus.log_remote_commands = on")
    cur.execute("SET client_min_messages = log")
    conn.autocommit = False
    del conn.notices[:]
    cur.execute(claim.format(join="", where="pc.partition_id = %s"), (pids[0],))
    assert cur.fetchone() == (pids[0],)
    assert _remote_ports(conn.notices) == {_worker_of(cur, pids[0])}
    conn.rollback()
    joined = "JOIN queen.partition_lookup pl ON pl.partition_id = pc.partition_id"
    for join, where, arg in [
        ("", "pc.partition_id = ANY (%s::uuid[])", pids),  # several shards
        (joined, "pc.partition_id = ANY (%s::uuid[])", pids[:1]),  # one, but by ANY + join
    ]:
        with pytest.raises(psycopg2.Error, match="FOR UPDATE/SHARE"):
            cur.execute(claim.format(join=join, where=where), (arg,))
        conn.rollback()
    conn.close()


def test_a_table_a_later_migration_adds_is_placed_on_the_next_migrate(citus_dsn: str) -> None:
    """Created after the placement and pointing at a reference table, Citus makes it a
    coordinator table; the next migrate makes it a reference table (the shape of migration
    0019's registrations: dropped and created again here, as a later migration would)."""
    conn = psycopg2.connect(citus_dsn)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS queen.queue_consumer_groups")
        cur.execute(
            "CREATE TABLE queen.queue_consumer_groups ("
            " queue_id UUID NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,"
            " consumer_group TEXT NOT NULL, PRIMARY KEY (queue_id, consumer_group))"
        )
    conn.close()
    assert _placement(citus_dsn)["queen.queue_consumer_groups"][0] != "reference"
    migrate.migrate(citus_dsn)
    assert _placement(citus_dsn)["queen.queue_consumer_groups"][0] == "reference"


def test_a_migration_with_ddl_on_distributed_tables_applies_statement_by_statement(
    citus_dsn: str,
) -> None:
    """A generated column and an index on a distributed table in one file (the shape of
    migration 0019): Citus sends such DDL to the workers as the query's text, so migrate
    runs a file's statements one by one there, still in one transaction."""
    f = migrate.SchemaFile(
        "9999",
        "9999_test_ddl",
        "migration",
        "ALTER TABLE queen.partition_consumers ADD COLUMN t_head BIGINT,\n"
        "    ADD COLUMN t_ready BIGINT GENERATED ALWAYS AS\n"
        "        (CASE WHEN t_head > last_consumed_id THEN t_head END) STORED;\n"
        "CREATE INDEX partition_consumers_t_ready_idx\n"
        "    ON queen.partition_consumers (consumer_group, t_ready) WHERE t_ready IS NOT NULL;\n",
    )
    conn = psycopg2.connect(citus_dsn)
    try:
        with pytest.raises(psycopg2.Error, match="multiple commands"), conn.cursor() as cur:
            cur.execute(f.sql)
        conn.rollback()
        migrate._apply(conn, f, record=False, one_by_one=True)
        with conn.cursor() as cur:
            cur.execute(  # the index on every shard, over the generated column
                "SELECT DISTINCT result FROM run_command_on_shards("
                "'queen.partition_consumers', $$SELECT count(*) FROM pg_index i "
                "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey) "
                "WHERE i.indrelid = '%s'::regclass AND a.attname = 't_ready'$$)"
            )
            assert [r[0] for r in cur.fetchall()] == ["1"]
            cur.execute(
                "SELECT DISTINCT result FROM run_command_on_shards("
                "'queen.partition_consumers', $$SELECT attgenerated FROM pg_attribute "
                "WHERE attrelid = '%s'::regclass AND attname = 't_ready'$$)"
            )
            assert [r[0] for r in cur.fetchall()] == ["s"]
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(
                "ALTER TABLE queen.partition_consumers DROP COLUMN t_ready, DROP COLUMN t_head"
            )
    finally:
        conn.close()


def test_stream_state_is_distributed_by_stream_and_a_window_is_leased_and_acked(
    citus_cluster: CitusCluster, citus_dsn: str
) -> None:
    """A stream's offsets and leases: hash-distributed by stream_id in one co-location
    group of their own (schema/citus/60_streams.sql); a window leased, renewed and acked
    through the functions of 97_streams.sql, whose statements on that state reach only the
    worker that holds the stream's shard (the ack knows only the lease id: its stream is
    found by the id's prefix)."""
    conn = psycopg2.connect(citus_dsn)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute(
        "SELECT p.logicalrelid::text, p.partmethod, a.attname, p.colocationid,"
        " format_type(c.distributioncolumntype, NULL)"
        " FROM pg_dist_partition p JOIN pg_dist_colocation c USING (colocationid)"
        " JOIN pg_attribute a ON a.attrelid = p.logicalrelid"
        "  AND a.attname = column_to_column_name(p.logicalrelid, p.partkey)"
        " WHERE p.logicalrelid IN ('queen.stream_consumer_offsets'::regclass,"
        "                          'queen.stream_leases'::regclass) ORDER BY 1"
    )
    rows = cur.fetchall()
    assert [r[0] for r in rows] == ["queen.stream_consumer_offsets", "queen.stream_leases"]
    assert {(r[1], r[2], r[4]) for r in rows} == {("h", "stream_id", "uuid")}
    assert len({r[3] for r in rows}) == 1  # co-located with each other
    cur.execute(
        "SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'queen.messages'::regclass"
    )
    assert cur.fetchone() != (rows[0][3],)  # a group of their own, not the message path's

    cur.execute("INSERT INTO queen.queues (name) VALUES ('st-q') RETURNING id")
    (qid,) = cur.fetchone()  # type: ignore[misc]
    cur.execute(
        "INSERT INTO queen.partitions (queue_id, name) VALUES (%s, 'p') RETURNING id", (qid,)
    )
    (pid,) = cur.fetchone()  # type: ignore[misc]
    cur.execute(
        "INSERT INTO queen.messages (transaction_id, partition_id, payload, partition_offset)"
        " SELECT 't' || g, %s, jsonb_build_object('n', g), g - 1 FROM generate_series(1, 2) g",
        (pid,),
    )
    definition = {
        "name": "st-s", "namespace": "", "partitioned": False, "window_type": "count",
        "window_duration_ms": None, "window_slide_ms": None, "window_size_count": 2,
        "window_grace_period_ms": 0, "window_lease_timeout_ms": 60000,
        "source_queue_names": ["st-q"],
    }  # fmt: skip
    cur.execute("SELECT queen.stream_define_v1(%s::jsonb)", (json.dumps(definition),))
    stream_id = cur.fetchone()[0]["stream"]["id"]  # type: ignore[index]
    cur.execute(
        "SELECT nodeport FROM citus_shards WHERE shardid ="
        " get_shard_id_for_distribution_column('queen.stream_leases', %s)",
        (stream_id,),
    )
    (holder,) = cur.fetchone()  # type: ignore[misc]
    cur.execute("SET citus.log_remote_commands = on")
    cur.execute("SET client_min_messages = log")

    def on(statement: str, arg: dict[str, Any]) -> tuple[Any, set[int]]:
        del conn.notices[:]
        cur.execute(statement, (json.dumps(arg),))
        (result,) = cur.fetchone()  # type: ignore[misc]
        stream_state = [n for n in conn.notices if "stream_leases" in n or "stream_consumer" in n]
        assert stream_state, conn.notices
        return result, _remote_ports(stream_state)

    proposed = str(uuid.uuid4())
    ask = {"idx": 0, "stream": "st-s", "consumerGroup": "g", "leaseId": proposed}
    polled, ports = on("SELECT queen.stream_poll_v1(%s::jsonb)", {"requests": [ask]})
    assert ports == {holder}
    [answer] = polled
    window = answer["window"]
    assert [m["data"]["n"] for m in window["messages"]] == [1, 2]
    lease = window["leaseId"]
    assert lease[:19] == stream_id[:19] and lease[19:] == proposed[19:]
    renewed, ports = on(
        "SELECT queen.stream_renew_v1(%s::jsonb)", {"leaseId": lease, "extendMs": 5000}
    )
    assert renewed["leaseId"] == lease and ports == {holder}
    acked, ports = on("SELECT queen.stream_ack_v1(%s::jsonb)", {"leaseId": lease})
    assert acked["acknowledged"] and acked["messages"] == 2 and ports == {holder}
    again, _ = on("SELECT queen.stream_ack_v1(%s::jsonb)", {"leaseId": lease})
    assert again == {"error": "invalid_lease"}
    cur.execute("RESET citus.log_remote_commands")
    cur.execute(
        "SELECT cursor_id, windows_acked, messages_acked FROM queen.stream_consumer_offsets"
        " WHERE stream_id = %s",
        (stream_id,),
    )
    assert cur.fetchall() == [(_last_id(cur, pid), 1, 2)]
    cur.execute("DELETE FROM queen.streams WHERE id = %s", (stream_id,))  # cascades
    cur.execute("SELECT count(*) FROM queen.stream_consumer_offsets WHERE stream_id = %s",
                (stream_id,))  # fmt: skip
    assert cur.fetchone() == (0,)
    conn.close()


def _last_id(cur: psycopg2.extensions.cursor, pid: str) -> int:
    cur.execute("SELECT max(id) FROM queen.messages WHERE partition_id = %s", (pid,))
    (last,) = cur.fetchone()  # type: ignore[misc]
    return int(last)
