"""`queen-threads serve` with JWT_ENABLED and no usable key stops before starting
anything (no embedded PostgreSQL, no gunicorn), with one line naming what is missing."""

from __future__ import annotations

import pytest

from queen_threads import cli


def test_serve_refuses_to_start_without_a_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("JWT_ENABLED", "true")
    monkeypatch.setenv("JWT_ALGORITHM", "EdDSA")
    started: list[str] = []
    monkeypatch.setattr(cli, "cmd_serve", lambda settings: started.append("serve") or 0)
    assert cli.main(["serve"]) == 2
    assert started == []
    err = capsys.readouterr().err
    assert err.startswith("queen-threads: JWT_ENABLED is true but there is no key")
    assert "JWT_ALGORITHM=EdDSA needs JWT_PUBLIC_KEY" in err
