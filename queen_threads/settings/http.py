"""The HTTP server: address, workers, limits, TLS, logging, the dashboard folder."""

from __future__ import annotations

import os
from dataclasses import dataclass

from queen_threads.errors import ConfigError
from queen_threads.settings.parsers import (
    Parser,
    boolean,
    choice,
    cpu_count,
    env,
    integer,
    number,
    readable_file,
    text,
)

LOG_LEVELS = ("trace", "debug", "info", "warn", "warning", "error")


def webapp_folder(raw: str) -> str:
    """A dashboard folder: index.html and assets/ (checked at start, not at the first page)."""
    path = raw.strip()
    if not path:
        return ""
    has_index = os.path.isfile(os.path.join(path, "index.html"))
    if not has_index or not os.path.isdir(os.path.join(path, "assets")):
        raise ValueError(f"{path!r} is not a dashboard folder (index.html and assets/)")
    return os.path.abspath(path)


def seconds(minimum: float, maximum: float) -> Parser:
    """A duration in seconds, fractions allowed, within [minimum, maximum] (so never NaN)."""
    parse_number = number(minimum)

    def parse(raw: str) -> float:
        value: float = parse_number(raw)
        if not value <= maximum:
            raise ValueError(f"must be <= {maximum:g}, got {raw.strip()!r}")
        return value

    return parse


@dataclass(frozen=True)
class HttpSettings:
    """The HTTP server (gunicorn) and what it serves."""

    host: str = env("HOST", "0.0.0.0", text, "Address the HTTP server binds.")
    port: int = env("PORT", 6632, integer(1, 65535), "HTTP port.")
    num_workers: int = env(
        "NUM_WORKERS", cpu_count, integer(1, 256), "gunicorn worker processes (default: CPU count)."
    )
    worker_connections: int = env(
        "WORKER_CONNECTIONS",
        10000,
        integer(10),
        "Concurrent connections per worker process (waiting long polls count).",
    )
    reuse_port: bool = env(
        "REUSE_PORT",
        True,
        boolean,
        "Each worker listens on its own SO_REUSEPORT socket so the kernel spreads connections "
        "evenly over the workers (false: one shared socket).",
    )
    graceful_timeout: int = env(
        "GRACEFUL_TIMEOUT", 30, integer(1), "Seconds a worker may take to finish on SIGTERM."
    )
    request_head_timeout_s: float = env(
        "QUEEN_REQUEST_HEAD_TIMEOUT",
        10.0,
        seconds(0.1, 3600),
        "Seconds a connection has to send a complete request head (from connecting, or from "
        "the first byte of a keep-alive connection's next request); then it is closed.",
    )
    idle_connection_timeout_s: float = env(
        "QUEEN_IDLE_CONNECTION_TIMEOUT",
        75.0,
        seconds(0.1, 86400),
        "Seconds a keep-alive connection may stay silent between requests before it is "
        "closed (keep it above the idle timeout of a proxy in front).",
    )
    max_body_size: int = env(
        "MAX_BODY_SIZE",
        64 * 1024 * 1024,
        integer(1024),
        "Largest accepted request body, bytes (413).",
    )
    log_level: str = env("LOG_LEVEL", "info", choice(*LOG_LEVELS), "Log level.")
    ssl_certfile: str = env(
        "SSL_CERTFILE", "", readable_file, "PEM certificate: serve HTTPS (with SSL_KEYFILE)."
    )
    ssl_keyfile: str = env("SSL_KEYFILE", "", readable_file, "PEM private key of SSL_CERTFILE.")

    # --- Dashboard (docs/dashboard.md) -------------------------------------------------
    webapp_root: str = env(
        "WEBAPP_ROOT",
        "",
        webapp_folder,
        "Folder of the dashboard served at / (index.html and assets/); unset: the one "
        "shipped in the package.",
    )


def check_http(settings: HttpSettings) -> None:
    """TLS needs both its files."""
    if bool(settings.ssl_certfile) != bool(settings.ssl_keyfile):
        raise ConfigError("SSL_CERTFILE and SSL_KEYFILE must be set together (or neither)")
