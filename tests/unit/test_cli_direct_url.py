"""`queen-threads migrate` and `serve`'s first migration use DATABASE_DIRECT_URL (the
migration lock is a session lock), and `serve` hands the workers the pool's URL untouched."""

from __future__ import annotations

from typing import Any

import pytest

from queen_threads import cli, migrate
from queen_threads.settings import load_settings

POOLER = "postgresql://queen@bouncer:6432/queen"
DIRECT = "postgresql://queen@postgres:5432/queen"


@pytest.fixture
def migrated(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    used: list[str] = []

    def fake_migrate(dsn: str, connect_timeout_s: int = 5) -> list[str]:
        used.append(dsn)
        return []

    monkeypatch.setattr(migrate, "migrate", fake_migrate)
    return used


def test_migrate_uses_the_direct_url(migrated: list[str]) -> None:
    settings = load_settings({"DATABASE_URL": POOLER, "DATABASE_DIRECT_URL": DIRECT}, None)
    assert cli.cmd_migrate(settings) == 0
    assert migrated == [DIRECT]


class Exec(Exception):
    """os.execve's stand-in: it never returns."""


def test_serve_migrates_directly_and_gives_gunicorn_the_pool_url(
    migrated: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spawned: list[dict[str, Any]] = []

    def fake_execve(path: str, args: list[str], env: dict[str, str]) -> None:
        spawned.append(env)
        raise Exec

    monkeypatch.setattr(cli.os, "execve", fake_execve)
    monkeypatch.setenv("DATABASE_DIRECT_URL", DIRECT)
    settings = load_settings({"DATABASE_URL": POOLER, "DATABASE_DIRECT_URL": DIRECT}, None)
    with pytest.raises(Exec):  # a configured database: `serve` becomes the gunicorn master
        cli.cmd_serve(settings)
    assert migrated == [DIRECT]
    (env,) = spawned
    assert env["DATABASE_URL"] == POOLER and env["DATABASE_DIRECT_URL"] == DIRECT
