"""`queen-threads serve | migrate`: the console entry point.

`serve` leaves no launcher behind when it has nothing to supervise: with a configured
database it migrates and then becomes the gunicorn master (exec). With the embedded
PostgreSQL it stays, to start the database again until it runs and to stop it at the end,
and stays small: a forked child migrates and execs gunicorn, so this process never imports
the database driver or the application (docs/operations.md, "Memory at rest").
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import NoReturn

from queen_threads import logs
from queen_threads.auth import build_verifier
from queen_threads.embedded import EmbeddedPostgres, EmbeddedStartError
from queen_threads.errors import ConfigError, MigrationDeferred, MigrationError
from queen_threads.paths import GUNICORN_CONFIG
from queen_threads.settings import Settings, load_settings

log = logging.getLogger("queen_threads.cli")


# `serve` waits this long for the embedded PostgreSQL, then serves while it finishes starting.
EMBEDDED_START_WAIT_S = 10
EMBEDDED_RETRY_MAX_S = 30.0


def resolve_database(settings: Settings) -> tuple[str, EmbeddedPostgres | None]:
    """The DSN to use, starting the embedded PostgreSQL when none is configured."""
    if not settings.uses_embedded_database:
        return settings.dsn(), None
    embedded = EmbeddedPostgres(settings.data_dir, settings.embedded_pg_port)
    return embedded.start(), embedded


def database_to_serve(
    settings: Settings, stopping: threading.Event
) -> tuple[str, EmbeddedPostgres | None]:
    """Like resolve_database, but a database that is down never keeps the server from
    starting: an embedded PostgreSQL that does not start is started again in the
    background (same port) until it does or `stopping` is set."""
    if not settings.uses_embedded_database:
        return settings.dsn(), None
    embedded = EmbeddedPostgres(settings.data_dir, settings.embedded_pg_port)
    try:
        return embedded.start(EMBEDDED_START_WAIT_S), embedded
    except EmbeddedStartError as exc:
        log.error("%s; serving anyway, starting it again in the background", exc)
    threading.Thread(
        target=keep_starting, args=(embedded, stopping), name="embedded-pg", daemon=True
    ).start()
    return embedded.dsn, embedded


def keep_starting(embedded: EmbeddedPostgres, stopping: threading.Event) -> None:
    delay = 1.0
    while not stopping.wait(delay):
        try:
            embedded.restart()
            log.warning("embedded PostgreSQL started on port %d after all", embedded.port)
            return
        except EmbeddedStartError as exc:
            log.error("%s; trying again in %.0f s", exc, delay)
        delay = min(delay * 2, EMBEDDED_RETRY_MAX_S)


def migrate_before_serving(dsn: str, connect_timeout_s: int) -> None:
    """One attempt, so that a reachable database is up to date before the first request
    (`dsn`: the direct one; migrations hold a session advisory lock).
    An unreachable one does not hold the server back: every worker keeps trying in the
    background (runtime.py); pushes are buffered and pops answer 503 meanwhile."""
    from queen_threads import migrate  # psycopg2: only in the process that migrates

    try:
        applied = migrate.migrate(dsn, connect_timeout_s)
    except MigrationDeferred as exc:
        log.warning("%s; serving anyway, the schema is migrated once it answers", exc)
        return
    log.info("schema up to date (%d files applied)", len(applied))


def cmd_migrate(settings: Settings) -> int:
    from queen_threads import migrate

    dsn, embedded = resolve_database(settings)
    try:
        applied = migrate.migrate(settings.direct_dsn(dsn))
        log.info("schema up to date (%d files applied)", len(applied))
    finally:
        if embedded is not None and embedded.started_here:
            embedded.stop()
    return 0


def gunicorn_command() -> list[str]:
    return [sys.executable, "-m", "gunicorn", "-c", str(GUNICORN_CONFIG), "queen_threads.wsgi:app"]


def announce(settings: Settings, embedded: EmbeddedPostgres | None) -> None:
    print(
        f"queen-threads listening on http://{settings.host}:{settings.port} "
        f"({settings.num_workers} workers, database: "
        f"{'embedded ' + str(embedded.pgdata) if embedded else 'configured'})",
        file=sys.stderr,
        flush=True,
    )


def cmd_serve(settings: Settings) -> int:
    if settings.uses_embedded_database:
        return supervise_embedded(settings)
    dsn = settings.dsn()
    become_gunicorn(settings, dsn, None, dict(os.environ, DATABASE_URL=dsn))


def become_gunicorn(
    settings: Settings, dsn: str, embedded: EmbeddedPostgres | None, env: dict[str, str]
) -> NoReturn:
    """Migrate once, then replace this process with the gunicorn master."""
    migrate_before_serving(
        settings.direct_dsn(dsn), max(1, settings.db_connection_timeout_ms // 1000)
    )
    announce(settings, embedded)
    cmd = gunicorn_command()
    os.execve(cmd[0], cmd, env)


def supervise_embedded(settings: Settings) -> int:
    stopping = threading.Event()
    dsn, embedded = database_to_serve(settings, stopping)
    try:
        env = dict(os.environ, DATABASE_URL=dsn)
        if embedded is not None and embedded.socket_folder:
            env["DATABASE_SOCKET_DIR"] = embedded.socket_folder
        pid = os.fork()
        if pid == 0:
            run_child(lambda: become_gunicorn(settings, dsn, embedded, env))

        def forward(signum: int, frame: FrameType | None) -> None:
            os.kill(pid, signal.SIGTERM if signum == signal.SIGINT else signum)

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, forward)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    finally:
        stopping.set()
        if embedded is not None and embedded.started_here:
            embedded.stop()


def run_child(become: Callable[[], NoReturn]) -> NoReturn:
    """A forked child never returns into its parent's code (which would stop the database
    on its way out): it execs, or exits with serve's own codes."""
    code = 1
    try:
        become()
    except (ConfigError, MigrationError) as exc:
        print(f"queen-threads: {exc}", file=sys.stderr, flush=True)
        code = 2
    except BaseException:
        log.exception("serve: could not start gunicorn")
    finally:
        os._exit(code)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="queen-threads")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the server (embedded PostgreSQL if none configured)")
    serve.add_argument("--port", type=int, help="override PORT")
    serve.add_argument("--host", help="override HOST")
    sub.add_parser("migrate", help="create or update the queen schema, then exit")
    args = parser.parse_args(argv)
    if getattr(args, "port", None):
        os.environ["PORT"] = str(args.port)
    if getattr(args, "host", None):
        os.environ["HOST"] = args.host
    try:
        settings = load_settings()
        logs.configure(settings.log_level)
        if args.command == "migrate":
            return cmd_migrate(settings)
        build_verifier(settings)  # JWT_ENABLED without a usable key: refuse before starting
        return cmd_serve(settings)
    except (ConfigError, MigrationError) as exc:
        print(f"queen-threads: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
