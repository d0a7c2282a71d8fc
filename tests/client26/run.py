"""One run of the queen-mq 2.6.0 sdist's tests, in a subprocess, and its results by case."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLIENT26 = ROOT / ".venv" / "client26"
LIB, SDIST_TESTS = CLIENT26 / "lib", CLIENT26 / "tests"
CONFTEST = Path(__file__).with_name("sdist_conftest.py")
INSTALL = ROOT / "scripts" / "_client26.sh"
RUN_TIMEOUT_S = 900  # a run still going by then is killed and fails its verdicts


def ensure_installed() -> None:
    """The client and its tests are in place (`scripts/test` puts them there; a bare
    `pytest` run installs them here the same way)."""
    if not (LIB / "queen").is_dir() or not SDIST_TESTS.is_dir():
        subprocess.run(
            ["bash", "-c", f'ROOT="{ROOT}" && cd "$ROOT" && source "{INSTALL}"'], check=True
        )


@dataclass(frozen=True)
class Case:
    """One test case of the sdist: `outcome` is passed, failed, error or skipped."""

    file: str
    name: str
    outcome: str
    detail: str = ""


class SdistRun:
    """`pytest FILES` of the sdist's tests against `url`, in the background.

    When the run ends, its exit code lands in `exitcode` beside its results: `wait()` reads
    them from the folder, so another pytest-xdist worker can wait for a run it did not start
    (`SdistRun(label, "", [], workdir)` names it; docs/testing.md)."""

    def __init__(self, label: str, url: str, files: list[str], workdir: Path, **env: str) -> None:
        self.label, self.url, self.files = label, url, files
        self.workdir = workdir / label
        self.junit = self.workdir / "junit.xml"
        self.log = self.workdir / "pytest.log"
        self.exitcode = self.workdir / "exitcode"
        self.env = {**os.environ, **env}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> SdistRun:
        shutil.copytree(SDIST_TESTS, self.workdir)
        shutil.copy(CONFTEST, self.workdir / "conftest.py")
        (self.workdir / "pytest.ini").write_text(
            "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
        )
        self.env.update(
            PYTHONPATH=os.pathsep.join(filter(None, [str(LIB), self.env.get("PYTHONPATH")])),
            QUEEN_SERVER_URL=self.url,
            QUEEN_URL=self.url,
        )
        # the sdist's tests are not this suite's: no xdist worker of their own
        self.env.pop("PYTEST_ADDOPTS", None)
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfEs",
                 f"--junitxml={self.junit}", *self.files],
                cwd=self.workdir, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        threading.Thread(target=self._mark_end, name=f"client26-{self.label}", daemon=True).start()
        return self

    def _mark_end(self) -> None:
        assert self.proc is not None
        code = self.proc.wait()
        partial = self.exitcode.with_suffix(".part")
        partial.write_text(str(code))
        partial.rename(self.exitcode)  # atomic: a reader sees all of it or nothing

    def ended(self) -> bool:
        return self.exitcode.exists()

    def wait(self, timeout: float) -> list[Case]:
        """The cases, once the run has ended (killed after `timeout` seconds)."""
        deadline = time.monotonic() + timeout
        while not self.ended():
            if time.monotonic() > deadline:
                self.stop()
                message = f"the {self.label} run took over {timeout} s:\n{self.tail()}"
                raise AssertionError(message)
            time.sleep(0.2)
        if not self.junit.exists():
            raise AssertionError(f"the {self.label} run wrote no results:\n{self.tail()}")
        return cases(self.junit)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def tail(self, lines: int = 60) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def cases(junit: Path) -> list[Case]:
    found = []
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        outcome, detail = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = "failed" if child.tag == "failure" else child.tag
                detail = (child.get("message") or "") + "\n" + (child.text or "")
                break
        module = case.get("classname", "").rsplit(".", 1)[-1]
        found.append(Case(f"{module}.py", case.get("name", ""), outcome, detail.strip()))
    return found
