"""One run of the queen-mq 2.6.0 sdist's tests, in a subprocess, and its results by case."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLIENT26 = ROOT / ".venv" / "client26"
LIB, SDIST_TESTS = CLIENT26 / "lib", CLIENT26 / "tests"
CONFTEST = Path(__file__).with_name("sdist_conftest.py")
INSTALL = ROOT / "scripts" / "_client26.sh"


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
    """`pytest FILES` of the sdist's tests against `url`, in the background."""

    def __init__(self, label: str, url: str, files: list[str], workdir: Path, **env: str) -> None:
        self.label, self.url, self.files = label, url, files
        self.workdir = workdir / label
        self.junit = self.workdir / "junit.xml"
        self.log = self.workdir / "pytest.log"
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
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfEs",
                 f"--junitxml={self.junit}", *self.files],
                cwd=self.workdir, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        return self

    def wait(self, timeout: float) -> list[Case]:
        """The cases, once the run has ended (killed after `timeout` seconds)."""
        assert self.proc is not None
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            message = f"the {self.label} run took over {timeout} s:\n{self.tail()}"
            raise AssertionError(message) from None
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
