"""Tracing with the README's first command: `scripts/serve` on a fresh copy of the checkout
(no .venv) with an OTEL_* variable asking for export installs the `otel` extra into the
copy's .venv by itself, and the server it starts exports its spans. Without the extra the
server would refuse to start (tests/unit/test_trace_context.py: the refusal names the
exact command for a checkout).

The copy is what a clone holds (the tracked and untracked files git knows, none it
ignores); its .venv is installed from pip's cache as scripts/smoke's is."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.otlp import Receiver, otlp_receiver
from tests.support.server import ROOT, ServerProcess

pytestmark = pytest.mark.slow  # a venv and its packages: ~30-60 s with pip's cache warm

INSTALL_TIMEOUT_S = 300


def fresh_copy(target: Path) -> Path:
    """The checkout's files as a clone has them (no .venv, no data folders)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, check=True, capture_output=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


class CopyServe(ServerProcess):
    """`scripts/serve` of a copy of the checkout, run as a newcomer would."""

    def __init__(self, copy: Path, dsn: str, **env: str) -> None:
        super().__init__(dsn, workers=1, **env)
        self.copy = copy
        for name in ("VIRTUAL_ENV", "PYTHONPATH", "QUEEN_EXTRAS"):
            self.env.pop(name, None)

    def spawn(self) -> None:
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            ["bash", str(self.copy / "scripts" / "serve")],
            env=self.env, cwd=self.copy, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with otlp_receiver() as found:
        yield found


def test_serve_installs_the_otel_extra_the_environment_asks_for_and_exports_spans(
    module_dsn: str, receiver: Receiver, tmp_path: Path
) -> None:
    copy = fresh_copy(tmp_path / "clone")
    assert not (copy / ".venv").exists()
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "100"}
    srv = CopyServe(copy, module_dsn, **env)
    srv.spawn()
    try:
        srv.wait_healthy(INSTALL_TIMEOUT_S)
        assert (copy / ".venv" / ".installed-otel").is_file()
        queue = f"serve-otel-{uuid.uuid4().hex[:8]}"
        items = [{"queue": queue, "payload": 1}]
        assert httpx.post(f"{srv.url}/api/v1/push", json={"items": items}).status_code == 201
        span = receiver.wait_for(lambda s: s.attributes.get("messaging.destination.name") == queue)
        assert span.resource.get("service.name") == "queen-threads"
    finally:
        srv.stop()
    assert "with the otel extra" in srv.logs()
