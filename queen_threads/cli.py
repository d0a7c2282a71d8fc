"""`queen-threads serve | migrate`: the console entry point."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import time
from types import FrameType

from queen_threads import logs, migrate
from queen_threads.embedded import EmbeddedPostgres
from queen_threads.errors import ConfigError, MigrationError
from queen_threads.paths import GUNICORN_CONFIG
from queen_threads.settings import Settings, load_settings

log = logging.getLogger("queen_threads.cli")


def resolve_database(settings: Settings) -> tuple[str, EmbeddedPostgres | None]:
    """The DSN to use, starting the embedded PostgreSQL when none is configured."""
    if not settings.uses_embedded_database:
        return settings.dsn(), None
    embedded = EmbeddedPostgres(settings.data_dir, settings.embedded_pg_port)
    return embedded.start(), embedded


def migrate_with_retry(dsn: str, attempts: int = 20) -> None:
    for attempt in range(1, attempts + 1):
        try:
            applied = migrate.migrate(dsn)
            log.info("schema up to date (%d files applied)", len(applied))
            return
        except MigrationError as exc:
            if attempt == attempts:
                raise
            log.warning("migration attempt %d failed: %s", attempt, exc)
            time.sleep(min(0.25 * attempt, 2.0))


def cmd_migrate(settings: Settings) -> int:
    dsn, embedded = resolve_database(settings)
    try:
        migrate_with_retry(dsn, attempts=1)
    finally:
        if embedded is not None and embedded.started_here:
            embedded.stop()
    return 0


def cmd_serve(settings: Settings) -> int:
    dsn, embedded = resolve_database(settings)
    try:
        migrate_with_retry(dsn)
        env = dict(os.environ, DATABASE_URL=dsn)
        cmd = [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            str(GUNICORN_CONFIG),
            "queen_threads.wsgi:app",
        ]
        proc = subprocess.Popen(cmd, env=env)

        def forward(signum: int, frame: FrameType | None) -> None:
            proc.send_signal(signal.SIGTERM if signum == signal.SIGINT else signum)

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, forward)
        print(
            f"queen-threads listening on http://{settings.host}:{settings.port} "
            f"({settings.num_workers} workers, database: "
            f"{'embedded ' + str(embedded.pgdata) if embedded else 'configured'})",
            file=sys.stderr,
            flush=True,
        )
        return proc.wait()
    finally:
        if embedded is not None and embedded.started_here:
            embedded.stop()


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
        return cmd_serve(settings)
    except (ConfigError, MigrationError) as exc:
        print(f"queen-threads: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
