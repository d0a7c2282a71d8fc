"""The shared plumbing's measuring points are observers handed to what they observe
(metrics/metered.py): `Database` tells its `StatementObserver` every call on real
PostgreSQL, `Authenticator` its refusals, and the metrics count what they hear."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY

from queen_threads.auth import Authenticator, Identity, Role
from queen_threads.db import Database, PoolConfig
from queen_threads.errors import QueenError
from queen_threads.metrics.counters import ProcessCounters
from queen_threads.metrics.metered import AuthMetrics, StatementMetrics


class Heard:
    """A StatementObserver that keeps what it heard."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bool]] = []

    def ran(self, name: str, elapsed_s: float, failed: bool) -> None:
        assert elapsed_s >= 0
        self.calls.append((name, failed))


@pytest.fixture
def observed(migrated_dsn: str) -> Iterator[tuple[Database, Heard]]:
    heard = Heard()
    db = Database(PoolConfig(dsn=migrated_dsn, max_size=2, acquire_timeout_s=5), heard)
    yield db, heard
    db.close()


def test_the_database_tells_its_observer_every_call_once_it_is_over(
    observed: tuple[Database, Heard],
) -> None:
    db, heard = observed
    assert db.value("ping") == 1
    with pytest.raises(QueenError):
        db.value("timers_prune_fires", ("not hours", 1))  # refused by PostgreSQL
    with db.transaction() as tx:
        assert tx.value("ping") == 1  # inside: the transaction is the call heard
    with pytest.raises(RuntimeError), db.transaction() as tx:
        tx.value("ping")
        raise RuntimeError("the block failed")
    assert heard.calls == [
        ("ping", False),
        ("timers_prune_fires", True),
        ("transaction", False),
        ("transaction", True),
    ]


def sample(name: str, labels: dict[str, str]) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def test_statement_metrics_count_durations_and_only_the_failures(migrated_dsn: str) -> None:
    counters = ProcessCounters()
    config = PoolConfig(dsn=migrated_dsn, max_size=1, acquire_timeout_s=5)
    db = Database(config, StatementMetrics(counters))
    name = "timers_prune_fires"
    count = ("queen_db_query_duration_seconds_count", {"query": name})
    errors = ("queen_db_query_errors_total", {"query": name})
    before, errors_before = sample(*count) or 0.0, sample(*errors)
    try:
        for _ in range(3):
            db.value(name, (1, 1))
        assert sample(*count) == before + 3
        assert sample(*errors) == errors_before  # no failure: no new series, no count
        with pytest.raises(QueenError):
            db.value(name, ("not hours", 1))
        assert sample(*count) == before + 4
        assert sample(*errors) == (errors_before or 0.0) + 1
        snapshot = counters.db_snapshot()
        assert snapshot["errors"] == 1 and snapshot["total"] == 4
    finally:
        db.close()


def test_the_authenticator_tells_its_observer_each_refusal() -> None:
    refused: list[str] = []

    class Refusals:
        def refused(self, kind: str) -> None:
            refused.append(kind)

    auth = Authenticator(None, observer=Refusals())
    reader = Identity("reader", Role.READ_ONLY)
    assert auth.allows(reader, Role.READ_ONLY)
    assert not auth.allows(reader, Role.ADMIN)
    assert refused == ["forbidden"] and auth.failures["forbidden"] == 1

    forbidden = ("queen_auth_failures_total", {"kind": "forbidden"})
    before = sample(*forbidden) or 0.0
    assert not Authenticator(None, observer=AuthMetrics()).allows(reader, Role.ADMIN)
    assert sample(*forbidden) == before + 1
