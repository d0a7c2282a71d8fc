"""The key/value, locks and transaction routes over plain HTTP (httpx), plus direct reads
of `queen.kv`, for the acceptance tests of docs/kv.md."""

from __future__ import annotations

from typing import Any

import httpx
import psycopg2


class KvHttp:
    """One connection to a server; `dsn` reads the database behind it."""

    def __init__(self, url: str, dsn: str) -> None:
        self.url = url
        self.http = httpx.Client(base_url=f"{url}/api/v1", timeout=15)
        self.dsn = dsn

    def metrics(self) -> dict[str, Any]:
        """GET /metrics of the worker process this client's connection reached."""
        return dict(self.http.get(f"{self.url}/metrics").json())

    def close(self) -> None:
        self.http.close()

    def call(self, path: str, body: Any, status: int = 200) -> Any:
        r = self.http.post(path, json=body)
        assert r.status_code == status, r.text
        return r.json()

    def kv(self, *ops: dict[str, Any]) -> list[dict[str, Any]]:
        return list(self.call("/kv", {"operations": list(ops)})["results"])

    def one(self, op: dict[str, Any]) -> dict[str, Any]:
        [result] = self.kv(op)
        return result

    def locks(self, *ops: dict[str, Any]) -> list[dict[str, Any]]:
        results = self.call("/locks", {"operations": list(ops)})["results"]
        assert len(results) == len(ops)
        return list(results)

    def lock(self, op: dict[str, Any]) -> dict[str, Any]:
        [result] = self.locks(op)
        return result

    def refused(self, path: str, body: Any) -> dict[str, Any]:
        """A 400: its body ({error, code, reason, detail})."""
        r = self.http.post(path, json=body)
        assert r.status_code == 400, r.text
        return dict(r.json())

    def sql(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        with psycopg2.connect(self.dsn) as conn, conn.cursor() as cur:
            cur.execute(query, args)
            rows = list(cur.fetchall()) if cur.description else []
        conn.close()
        return rows

    def rows(self) -> list[tuple[Any, ...]]:
        """Every row of queen.kv (proves that a refused call changed nothing)."""
        return self.sql(
            "SELECT namespace, key, value, version, expires_at FROM queen.kv ORDER BY 1, 2"
        )


def put(ns: str, key: str, value: Any, ttl: int = 60, **extra: Any) -> dict[str, Any]:
    return {"op": "put", "ns": ns, "key": key, "value": value, "ttlSeconds": ttl, **extra}


def acquire(name: str, owner: str | None = None, ttl: int = 30, **extra: Any) -> dict[str, Any]:
    op: dict[str, Any] = {"op": "acquire", "name": name, "ttlSeconds": ttl, **extra}
    if owner is not None:
        op["owner"] = owner
    return op
