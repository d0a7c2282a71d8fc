"""Message ids of 15 digits on a Citus cluster (migration 0025): the coordinator's sequence
goes on from 10^14, whether the migration runs before the placement (a new database) or on
a database whose queen.messages is distributed already and holds messages; each worker's
own range for the identity (group id << 48) is left as Citus set it, 15 digits too."""

from __future__ import annotations

import json
import re
from typing import Any

import psycopg2
import pytest

from queen_threads import migrate
from tests.support.citus import NODES, CitusCluster

FIRST = 10**14
SEQUENCE = "SELECT last_value, is_called FROM queen.messages_id_seq"


def _sql(dsn: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(query, params or None)
            return list(cur.fetchall()) if cur.description else []
    finally:
        conn.close()


def _next_ids(cluster: CitusCluster, dsn: str) -> dict[str, int]:
    """The next id each node's sequence gives."""
    out = {}
    for node in NODES:
        node_dsn = re.sub(r":\d+/", f":{cluster.ports[node]}/", dsn, count=1)
        [(last, called)] = _sql(node_dsn, SEQUENCE)
        out[node] = int(last) + 1 if called else int(last)
    return out


def _push_on_coordinator(dsn: str, queue: str, n: int) -> tuple[list[str], str]:
    """(ids, partition id) of a general push, which draws its ids on the coordinator."""
    items = [{"queue": queue, "payload": i} for i in range(n)]
    [(text,)] = _sql(dsn, "SELECT queen.push_messages_v2(%s::jsonb)::text", json.dumps(items))
    rows = json.loads(text)
    return [r["message_id"] for r in rows], rows[0]["partition_id"]


def _push_delegated(dsn: str, pid: str, queue: str, n: int) -> list[str]:
    """The ids of a push of one known partition: delegated to its worker, drawn there."""
    items = [{"queue": queue, "payload": i} for i in range(n)]
    [(text,)] = _sql(
        dsn, "SELECT queen.push_partition_v1(%s::uuid, %s::jsonb)", pid, json.dumps(items)
    )
    return [r[1] for r in json.loads(text)]


def _group_of(dsn: str, pid: str) -> int:
    [(group,)] = _sql(
        dsn,
        "SELECT n.groupid FROM citus_shards s JOIN pg_dist_node n ON n.nodeport = s.nodeport"
        " WHERE s.shardid = get_shard_id_for_distribution_column('queen.messages', %s)",
        pid,
    )
    return int(group)


def test_a_new_database_draws_15_digit_ids_on_the_coordinator_and_the_workers(
    citus_cluster: CitusCluster, citus_dsn: str
) -> None:
    nexts = _next_ids(citus_cluster, citus_dsn)
    assert FIRST <= nexts["coordinator"] < FIRST + 10**6  # (tests of the module push)
    assert [nexts[n] >> 48 for n in NODES[1:]] == [1, 2]  # Citus's ranges, untouched
    ids, pid = _push_on_coordinator(citus_dsn, "ids-new", 3)
    later = _push_delegated(citus_dsn, pid, "ids-new", 2)
    assert [int(i) >> 48 for i in later] == [_group_of(citus_dsn, pid)] * 2
    assert {len(i) for i in ids + later} == {15}


def test_an_already_distributed_database_with_messages_moves_its_coordinator_ids_forward(
    citus_cluster: CitusCluster, citus_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = migrate.schema_files
    with monkeypatch.context() as m:
        m.setattr(migrate, "schema_files", lambda: [f for f in real() if f.version != "0025"])
        migrate.migrate(citus_db)
    [(placed,)] = _sql(
        citus_db, "SELECT count(*) FROM citus_tables WHERE table_name = 'queen.messages'::regclass"
    )
    assert placed == 1
    old, pid = _push_on_coordinator(citus_db, "ids-old", 3)
    assert old == ["1", "2", "3"]
    old_on_worker = _push_delegated(citus_db, pid, "ids-old", 1)
    before = _next_ids(citus_cluster, citus_db)

    assert migrate.migrate(citus_db) == ["0025_message_ids_one_length"]
    after = _next_ids(citus_cluster, citus_db)
    assert after == {**before, "coordinator": FIRST}
    new, same_pid = _push_on_coordinator(citus_db, "ids-old", 2)
    assert (new, same_pid) == ([str(FIRST), str(FIRST + 1)], pid)
    [on_worker] = _push_delegated(citus_db, pid, "ids-old", 1)
    assert int(on_worker) == int(old_on_worker[0]) + 1
    # The partition's messages in push order: (created_at, id), what the cursor follows.
    stored = _sql(
        citus_db,
        "SELECT id::text FROM queen.messages WHERE partition_id = %s ORDER BY created_at, id",
        pid,
    )
    assert [r[0] for r in stored] == old + old_on_worker + new + [on_worker]
    assert migrate.migrate(citus_db) == []
    assert _next_ids(citus_cluster, citus_db)["coordinator"] == FIRST + 2
