"""The system under test: a server started here (embedded PostgreSQL + gunicorn) or one at --url."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import orjson

from bench import procstat
from bench.options import Options
from queen_threads.embedded import EmbeddedPostgres, free_port
from queen_threads.paths import GUNICORN_CONFIG, ROOT

# Variables of the caller's environment that would point the started server elsewhere.
_SCRUB = (
    "DATABASE_URL",
    "DATABASE_SOCKET_DIR",
    "PG_HOST",
    "PGHOST",
    "PG_PORT",
    "PGPORT",
    "QUEEN_DATA_DIR",
    "PORT",
)


@dataclass
class Target:
    """Where to send requests, and which processes to watch."""

    url: str
    server_pid: int | None
    pg_pid: int | None
    dsn: str | None
    started_here: bool
    server_env: dict[str, str]
    log_path: str | None = None
    # (i): a second server on the same database with JWT_ENABLED, and a token it accepts
    auth_twin: Target | None = None
    bearer_token: str | None = None


def auth_env() -> tuple[dict[str, str], str]:
    """Settings of an HS256-authenticated server and a read-write token for it."""
    import time

    import jwt

    secret = secrets.token_hex(32)
    claims = {"sub": "bench", "role": "read-write", "exp": int(time.time()) + 86400}
    return {"JWT_ENABLED": "true", "JWT_SECRET": secret}, jwt.encode(claims, secret, "HS256")


def health(url: str, timeout: float = 2.0) -> dict[str, object] | None:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout) as resp:
            body = orjson.loads(resp.read())
            return body if isinstance(body, dict) else None
    except (urllib.error.URLError, OSError, ValueError):
        return None


def wait_healthy(url: str, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited early with code {proc.returncode}")
        body = health(url)
        if body and body.get("status") == "healthy" and body.get("schema", "ready") == "ready":
            return
        time.sleep(0.1)
    raise RuntimeError(f"server at {url} not healthy within {timeout:.0f}s")


def postmaster_pid(pgdata: Path) -> int | None:
    try:
        return int((pgdata / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def raise_fd_limit() -> int:
    """Soft RLIMIT_NOFILE up to the hard limit (10,000 long polls need 10,000 sockets)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


class ManagedServer:
    """Embedded PostgreSQL in a temp folder + `python -m gunicorn` on a free port."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.tmp = Path(tempfile.mkdtemp(prefix="queen-bench-"))
        self.pg = EmbeddedPostgres(self.tmp / "pg")
        self.procs: list[subprocess.Popen[bytes]] = []
        self.log_path = self.tmp / "server.log"

    def start(self) -> Target:
        dsn = self.pg.start()
        target = self._serve(dsn, {}, self.log_path)
        if "i" in self.options.scenarios:  # auth off and on, side by side
            env, token = auth_env()
            target.auth_twin = self._serve(dsn, env, self.tmp / "server-auth.log")
            target.auth_twin.bearer_token = token
        return target

    def _serve(self, dsn: str, extra: dict[str, str], log_path: Path) -> Target:
        port = free_port()
        server_env = base_env(self.options, port, dsn)
        if self.pg.socket_folder:  # the server's pool goes through the socket, as with `serve`
            server_env = {"DATABASE_SOCKET_DIR": self.pg.socket_folder} | server_env
        url = f"http://127.0.0.1:{port}"
        config = None
        if self.options.cpu_profile:  # the server's configuration plus a CPU-time sampler
            config = ROOT / "bench" / "cpu_profile_conf.py"
            extra = extra | {"QUEEN_BENCH_CPU_PROFILE": str(Path(self.options.cpu_profile))}
        self.procs.append(
            spawn("queen_threads.wsgi:app", server_env | extra, log_path, url, config=config)
        )
        shown = {k: ("<embedded dsn>" if k == "DATABASE_URL" else v) for k, v in server_env.items()}
        shown |= {k: ("<random>" if k == "JWT_SECRET" else v) for k, v in extra.items()}
        return Target(
            url=url,
            server_pid=self.procs[-1].pid,
            pg_pid=postmaster_pid(self.pg.pgdata),
            dsn=self.pg.socket_dsn or dsn,  # the ceilings take the server's pool's route
            started_here=True,
            server_env=shown,
            log_path=str(log_path),
        )

    def start_baseline(self, checkout: Path) -> Target:
        """The server of another checkout (--baseline) on a database of its own of the same
        PostgreSQL, over the same route (its schema is that checkout's migrations)."""
        from queen_threads.db import connect_raw

        assert self.pg.port
        conn = connect_raw(self.pg.dsn)
        try:
            with conn.cursor() as cur:
                cur.execute("CREATE DATABASE baseline")
        finally:
            conn.close()
        dsn = self.pg.dsn.replace("/postgres?", "/baseline?")
        port = free_port()
        server_env = base_env(self.options, port, dsn)
        if self.pg.socket_folder:
            server_env = {"DATABASE_SOCKET_DIR": self.pg.socket_folder} | server_env
        url = f"http://127.0.0.1:{port}"
        log_path = self.tmp / "baseline.log"
        self.procs.append(
            spawn("queen_threads.wsgi:app", server_env, log_path, url, checkout.resolve())
        )
        socket_dsn = self.pg.socket_dsn
        return Target(
            url=url,
            server_pid=self.procs[-1].pid,
            pg_pid=postmaster_pid(self.pg.pgdata),
            dsn=socket_dsn.replace("/postgres?", "/baseline?") if socket_dsn else dsn,
            started_here=True,
            server_env={"checkout": str(checkout)},
            log_path=str(log_path),
        )

    def stop(self) -> None:
        stop_all(self.procs)
        self.pg.stop()
        if self.options.keep:
            print(f"bench: data kept in {self.tmp}", file=sys.stderr)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


class BareServer:
    """bench/bare_app.py on gunicorn with the server's configuration: the HTTP ceiling.

    The same environment as the server under test (NUM_WORKERS from --workers, --server-env),
    so that config/gunicorn.conf.py derives the same gunicorn settings from it."""

    def __init__(self, options: Options, dsn: str | None, schema: str | None = None) -> None:
        self.options = options
        self.dsn = dsn
        self.schema = schema  # store the pushed items in this scratch schema (bare_app.py)
        self.tmp = Path(tempfile.mkdtemp(prefix="queen-bench-bare-"))
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> Target:
        port = free_port()
        env = base_env(self.options, port, self.dsn)
        if self.schema:
            env["BARE_DB_SCHEMA"] = self.schema
        url = f"http://127.0.0.1:{port}"
        log_path = self.tmp / "bare.log"
        self.procs.append(spawn("bench.bare_app:app", env, log_path, url))
        return Target(url, self.procs[-1].pid, None, None, True, {}, str(log_path))

    def stop(self) -> None:
        stop_all(self.procs)
        shutil.rmtree(self.tmp, ignore_errors=True)


def base_env(options: Options, port: int, dsn: str | None) -> dict[str, str]:
    """What a started server gets on top of the caller's environment (--server-env last)."""
    env = {"HOST": "127.0.0.1", "PORT": str(port), "NUM_WORKERS": str(options.workers),
           "LOG_LEVEL": options.server_log_level}  # fmt: skip
    if dsn:
        env["DATABASE_URL"] = dsn
    return env | dict(options.server_env)


def spawn(
    app: str,
    server_env: dict[str, str],
    log_path: Path,
    url: str,
    root: Path = ROOT,
    config: Path | None = None,
) -> subprocess.Popen[bytes]:
    """`python -m gunicorn -c config/gunicorn.conf.py <app>` of the checkout at `root` (this
    one unless given: another's code comes first on PYTHONPATH), healthy at `url`."""
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB and not k.startswith("PG_")}
    env.update(server_env)
    config = config or GUNICORN_CONFIG
    if root != ROOT:
        env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")]).rstrip(":")
        config = root / GUNICORN_CONFIG.relative_to(ROOT)
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", str(config), app],
            env=env, cwd=root, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_healthy(url, 60, proc)
    except RuntimeError as exc:
        stop_all([proc])
        raise RuntimeError(f"{exc}\n--- server log ---\n{log_tail(log_path)}") from exc
    return proc


def log_tail(path: Path, size: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-size:]
    except OSError:
        return ""


def stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def attach(options: Options) -> Target:
    """A server someone else runs: find its processes by the ports they listen on."""
    assert options.url is not None
    wait_healthy(options.url, 10)
    dsn = options.database_url or os.environ.get("DATABASE_URL") or None
    return attach_url(options.url, dsn, options.server_pid, options.pg_pid)


def dsn_port(dsn: str) -> int:
    """The TCP port of a postgresql:// URL, also when given as `?port=` (socket URLs)."""
    parts = urlsplit(dsn)
    port = parse_qs(parts.query).get("port", [None])[0]
    return parts.port or int(port or 5432)


def attach_url(
    url: str, dsn: str | None, server_pid: int | None = None, pg_pid: int | None = None
) -> Target:
    """The server at `url` (already answering), its processes found by their ports."""
    parts = urlsplit(url)
    if server_pid is None and parts.hostname in ("127.0.0.1", "localhost", "::1"):
        server_pid = procstat.tree_root(procstat.pids_listening(parts.port or 80))
    if pg_pid is None and dsn:
        pg_pid = procstat.tree_root(procstat.pids_listening(dsn_port(dsn)))
    return Target(
        url=url,
        server_pid=server_pid,
        pg_pid=pg_pid,
        dsn=dsn,
        started_here=False,
        server_env={},
    )
