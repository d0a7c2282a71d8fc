"""Which database URL each part of a worker process uses (a runtime that is never started:
no database is touched). Behind a transaction pooler only the request pool may use the
pooler; whatever needs a session uses DATABASE_DIRECT_URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from queen_threads import migrate
from queen_threads.buffer import database_tag
from queen_threads.runtime import Runtime
from queen_threads.settings import load_settings

POOLER = "postgresql://queen@bouncer:6432/queen"
DIRECT = "postgresql://queen@postgres:5432/queen"


def runtime(tmp_path: Path, **env: str) -> Runtime:
    settings = load_settings(
        {"DATABASE_URL": POOLER, "FILE_BUFFER_DIR": str(tmp_path / "buffers"), **env},
        dotenv_path=None,
    )
    return Runtime(settings, settings.dsn())


def migrated_with(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The DSN the runtime's start-up migration connects to."""
    used: list[str] = []

    def fake_migrate(dsn: str, connect_timeout_s: int = 5) -> list[str]:
        used.append(dsn)
        return []

    monkeypatch.setattr(migrate, "migrate", fake_migrate)
    rt.availability.ensure_schema()
    return used


def test_with_a_direct_url_only_the_pool_uses_the_pooler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = runtime(tmp_path, DATABASE_DIRECT_URL=DIRECT)
    config = rt.db.pool.config
    assert config.dsn == POOLER and config.transaction_pooled
    assert rt.listener.dsn == DIRECT
    assert rt.operations.retention.dsn == DIRECT
    assert rt.operations.eviction.dsn == DIRECT
    assert rt.buffer.tag == database_tag(DIRECT)
    assert migrated_with(rt, monkeypatch) == [DIRECT]


def test_without_a_direct_url_everything_uses_database_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = runtime(tmp_path)
    assert rt.db.pool.config.dsn == POOLER and not rt.db.pool.config.transaction_pooled
    assert rt.listener.dsn == rt.operations.retention.dsn == POOLER
    assert rt.buffer.tag == database_tag(POOLER)
    assert migrated_with(rt, monkeypatch) == [POOLER]
