"""Periodic database jobs that run in exactly one process per database at a time.

Every worker process of every instance runs an `ExclusiveService` loop for each job. When
its timer fires, a process opens a dedicated connection and takes the job's session
advisory lock with `pg_try_advisory_lock` (never waiting): the losers skip the turn. The
winner reads when the job last started (`queen.service_runs`, database clock) and runs it
only when a whole interval has passed, so the job keeps one cadence however many processes
and instances there are and however often they restart. The lock is released (and the
connection closed) at the end of the run; a crashed process loses it with its connection.

That connection goes to the direct database (`DATABASE_DIRECT_URL`, else the pool's):
through a transaction pooler the lock would stay on a pooled server connection after the
statement, held by no one and released by no one, and the session settings of
`ops_session_setup` would leak to whichever client gets that connection next.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from queen_threads import db
from queen_threads.db import Connection

log = logging.getLogger("queen_threads.background")


def lock_key(service: str) -> int:
    """A stable advisory-lock key per service ("queen-svc:" + crc32 of the name)."""
    return 0x7175_656E_0000_0000 | zlib.crc32(service.encode())


class Session(db.NamedCursor):
    """A dedicated autocommit connection of one run (not from the request pool): named
    statements, driver errors translated like the pool's."""

    def __init__(self, conn: Connection) -> None:
        super().__init__(conn.cursor(), translate=True)
        self.conn = conn


@contextmanager
def session(dsn: str, statement_timeout_ms: int, lock_timeout_ms: int) -> Iterator[Session]:
    conn = db.connect_raw(dsn)
    try:
        s = Session(conn)
        s.value("ops_session_setup", (str(statement_timeout_ms), str(lock_timeout_ms)))
        yield s
    finally:
        with suppress(Exception):
            conn.close()


class Job(Protocol):
    """What an ExclusiveService runs: one full cycle on the session, returning a summary."""

    name: str

    def run(self, session: Session) -> dict[str, Any]: ...


@dataclass
class RunOutcome:
    status: str  # "ran" | "locked" (another process holds it) | "not_due" | "failed"
    result: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    duration_s: float = 0.0


class ServiceObserver(Protocol):
    """Hears every turn of a service: its job's name and the turn's outcome
    (metrics/metered.py's `ServiceMetrics` counts those that ran or failed)."""

    def ran(self, service: str, outcome: RunOutcome) -> None: ...


class ExclusiveService:
    """Runs `job` every `interval_s`, in one process per database at a time."""

    def __init__(
        self,
        dsn: str,
        job: Job,
        interval_s: float,
        *,
        owner: str,
        ready: threading.Event | None = None,
        observer: ServiceObserver | None = None,
        statement_timeout_ms: int = 60_000,
        lock_timeout_ms: int = 5_000,
    ) -> None:
        self.dsn = dsn
        self.job = job
        self.interval_s = interval_s
        self.owner = owner
        self.ready = ready
        self.observer = observer
        self.statement_timeout_ms = statement_timeout_ms
        self.lock_timeout_ms = lock_timeout_ms
        self.key = lock_key(job.name)
        self.last: RunOutcome | None = None
        self.runs = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- one turn ---------------------------------------------------------------------
    def run_once(self, force: bool = False) -> RunOutcome:
        """Try one run now: skip when another process holds the lock, or (unless `force`)
        when the job started less than an interval ago anywhere."""
        started = time.monotonic()
        try:
            with session(self.dsn, self.statement_timeout_ms, self.lock_timeout_ms) as s:
                if not s.value("ops_try_lock", (self.key,)):
                    outcome = RunOutcome("locked")
                else:
                    try:
                        outcome = self._locked_run(s, force)
                    finally:
                        with suppress(Exception):
                            s.value("ops_unlock", (self.key,))
        except Exception as exc:
            outcome = RunOutcome("failed", error=str(exc))
        outcome.duration_s = time.monotonic() - started
        self._record(outcome)
        return outcome

    def _locked_run(self, s: Session, force: bool) -> RunOutcome:
        if not force:
            age = s.value("ops_service_age", (self.job.name,))
            if age is not None and float(age) < self.interval_s * 0.95:
                return RunOutcome("not_due")
        s.execute("ops_service_started", {"service": self.job.name, "owner": self.owner})
        try:
            result = self.job.run(s)
        except Exception as exc:
            with suppress(Exception):
                s.execute(
                    "ops_service_finished",
                    {"service": self.job.name, "result": None, "error": str(exc)[:2000]},
                )
            return RunOutcome("failed", error=str(exc))
        s.execute(
            "ops_service_finished",
            {"service": self.job.name, "result": orjson.dumps(result).decode(), "error": None},
        )
        return RunOutcome("ran", result)

    def _record(self, outcome: RunOutcome) -> None:
        if outcome.status in ("ran", "failed"):
            self.last = outcome
            self.runs += 1
        if outcome.status == "failed":
            log.warning("%s run failed: %s", self.job.name, outcome.error)
        elif outcome.status == "ran" and any(outcome.result.get(k) for k in ("deleted", "total")):
            log.info("%s: %s", self.job.name, outcome.result)
        if self.observer is not None:
            try:
                self.observer.ran(self.job.name, outcome)
            except Exception:
                log.exception("observer of %s failed", self.job.name)

    # -- the loop ---------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._loop, name=f"queen-{self.job.name}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        if self.ready is not None:
            while not self.ready.wait(0.5):
                if self._stop.is_set():
                    return
        # First turn soon after start (a spread-out moment), then once per interval; the
        # shared schedule in the database decides whether a turn actually runs the job.
        delay = random.uniform(0.2, 1.0) * min(self.interval_s, 10.0)
        while not self._stop.wait(delay):
            outcome = self.run_once()
            if outcome.status == "failed":
                delay = min(self.interval_s, 30.0)
            else:
                delay = self.interval_s * random.uniform(1.0, 1.1)

    def stats(self) -> dict[str, Any]:
        last = self.last
        return {
            "intervalMs": int(self.interval_s * 1000),
            "runsHere": self.runs,
            "lastRunHere": None
            if last is None
            else {
                "status": last.status,
                "durationMs": round(last.duration_s * 1000, 1),
                "result": last.result,
                "error": last.error,
            },
        }
