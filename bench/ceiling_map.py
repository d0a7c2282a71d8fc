"""Which in-run ceilings a selection of scenarios needs, and which figure each one bounds.

A ceiling is what the same work costs without the server in the way: the bare HTTP app
(bench/bare_app.py) for the HTTP side, raw psycopg2 (bench/ceiling_db.py) for the database
side. Each of those has the machine to itself; the combined ceilings ("HTTP + database")
run both parts at once, as the server must: the bare app storing every request's items with
the database ceiling's INSERT, one commit per request, on the same cores as PostgreSQL and
the load generator. Measured by bench/ceilings.py; pure data here (no I/O), so that it is
easy to test.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.options import Sizes

QUEUE_CONNECTIONS = 4  # the SKIP LOCKED ceiling's connections, as (c)'s consumers
HTTP_SINGLE, HTTP_BATCH = "http_single", "http_batch"
INSERT_BATCH, INSERT_SINGLE, SKIP_LOCKED = "insert_batch", "insert_single", "skip_locked"
COMBINED_SINGLE, COMBINED_BATCH = "combined_single", "combined_batch"


@dataclass(frozen=True)
class Ceiling:
    key: str
    kind: str
    connections: int
    label: str
    unit: str
    bounds: str  # the figures it bounds, for the ceilings table


@dataclass
class CeilingResult:
    ceiling: Ceiling
    value: float | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    cpu: dict[str, float | None] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        c = self.ceiling
        return {"label": c.label, "unit": c.unit, "bounds": c.bounds, "value": self.value,
                "error": self.error, "cpu": self.cpu, **self.extra}  # fmt: skip


def _s(n: int) -> str:
    return "s" if n != 1 else ""


def http_single(n: int, workers: int) -> Ceiling:
    return Ceiling(
        f"http_{n}c", HTTP_SINGLE, n,
        f"bare falcon push route, gunicorn {workers} worker{_s(workers)}: 1 msg/request, "
        f"{n} connections",
        "req/s", f"(b) {n} connections",
    )  # fmt: skip


def http_batch(n: int, batch: int, workers: int) -> Ceiling:
    return Ceiling(
        f"http_batch_{n}c", HTTP_BATCH, n,
        f"bare falcon push route, gunicorn {workers} worker{_s(workers)}: {batch} msg/request, "
        f"{n} client{_s(n)}",
        "msg/s", f"- (HTTP side of (a) {n} client{_s(n)})",
    )  # fmt: skip


def combined_single(n: int, workers: int) -> Ceiling:
    return Ceiling(
        f"http_db_{n}c", COMBINED_SINGLE, n,
        f"bare falcon push route + single-row INSERT and commit per request, gunicorn "
        f"{workers} worker{_s(workers)}: 1 msg/request, {n} connections",
        "req/s", f"- (HTTP + database for (b) {n} connections)",
    )  # fmt: skip


def combined_batch(n: int, batch: int, workers: int) -> Ceiling:
    return Ceiling(
        f"http_db_batch_{n}c", COMBINED_BATCH, n,
        f"bare falcon push route + INSERT ... SELECT FROM jsonb_array_elements per request, "
        f"gunicorn {workers} worker{_s(workers)}: {batch} msg/request, {n} client{_s(n)}",
        "msg/s", f"- (HTTP + database for (a) {n} client{_s(n)})",
    )  # fmt: skip


def insert_batch(n: int, batch: int) -> Ceiling:
    return Ceiling(
        f"insert_batch_{n}c", INSERT_BATCH, n,
        f"psycopg2 INSERT ... SELECT FROM jsonb_array_elements, {batch} rows per commit, "
        f"{n} connection{_s(n)}",
        "msg/s", f"(a) {n} client{_s(n)}",
    )  # fmt: skip


def insert_single(n: int) -> Ceiling:
    return Ceiling(
        f"insert_single_{n}c", INSERT_SINGLE, n,
        f"psycopg2 single-row INSERT + commit, {n} connections",
        "msg/s", f"- (database side of (b) {n} connections)",
    )  # fmt: skip


def skip_locked(batch: int) -> Ceiling:
    return Ceiling(
        SKIP_LOCKED, SKIP_LOCKED, QUEUE_CONNECTIONS,
        f"psycopg2 {batch} rows FOR UPDATE SKIP LOCKED + UPDATE leased, commit, UPDATE done, "
        f"commit; {QUEUE_CONNECTIONS} connections",
        "msg/s", "(c), (f), (p) backlog",
    )  # fmt: skip


def planned(scenarios: Iterable[str], sizes: Sizes, workers: int) -> list[Ceiling]:
    """The ceilings the selected scenarios need, in the order they are measured (HTTP ones
    first: they share one bare server; the combined ones last: they store into the database
    ceilings' scratch tables)."""
    picked = set(scenarios)
    http: list[Ceiling] = []
    db: list[Ceiling] = []
    combined: list[Ceiling] = []
    if "a" in picked:
        http += [http_batch(n, sizes.push_batch, workers) for n in sizes.push_clients]
        db += [insert_batch(n, sizes.push_batch) for n in sizes.push_clients]
        combined += [combined_batch(n, sizes.push_batch, workers) for n in sizes.push_clients]
    if "b" in picked:
        http += [http_single(n, workers) for n in sizes.single_connections]
        db.append(insert_single(sizes.single_connections[0]))
        combined += [combined_single(n, workers) for n in sizes.single_connections]
    if picked & {"c", "f", "p"}:
        db.append(skip_locked(sizes.pop_batch))
    return http + db + combined


def ceiling_key(letter: str, figure: str) -> str | None:
    """The ceiling that bounds a figure of the results table, if any."""
    if letter == "a" and figure.startswith("clients_"):
        return f"insert_batch_{figure.removeprefix('clients_')}c"
    if letter == "b" and figure.startswith("connections_"):
        return f"http_{figure.removeprefix('connections_')}c"
    if (letter, figure) in (("c", "msg_per_s"), ("f", "deliveries_per_s")):
        return SKIP_LOCKED
    if letter == "p" and figure.startswith("backlog_") and figure.endswith("_msg_per_s"):
        return SKIP_LOCKED
    return None


def combined_key(letter: str, figure: str) -> str | None:
    """The combined (HTTP + database) ceiling of a figure of the results table, if any."""
    if letter == "a" and figure.startswith("clients_"):
        return f"http_db_batch_{figure.removeprefix('clients_')}c"
    if letter == "b" and figure.startswith("connections_"):
        return f"http_db_{figure.removeprefix('connections_')}c"
    return None


def percent_of(value: float, ceiling: float | None) -> float | None:
    return value / ceiling * 100 if ceiling else None
