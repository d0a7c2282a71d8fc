"""The local cluster itself: three nodes, the extension on each, the workers registered."""

from __future__ import annotations

import psycopg2

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
