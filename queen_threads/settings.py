"""One frozen, validated Settings object built from environment variables (and `.env`).

Every variable is declared once here, with its default, its parser and a one-line doc;
`docs/configuration.md` documents the same table (a unit test keeps them in step).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any
from urllib.parse import quote

from dotenv import dotenv_values

from queen_threads.errors import ConfigError

Parser = Callable[[str], Any]

LOG_LEVELS = ("trace", "debug", "info", "warn", "warning", "error")
SUBSCRIPTION_MODES = ("", "all", "from_beginning", "new", "new-only")
POOLERS = ("auto", "none", "transaction")


def _int(minimum: int | None = None, maximum: int | None = None) -> Parser:
    def parse(raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ValueError(f"expected an integer, got {raw!r}") from None
        if minimum is not None and value < minimum:
            raise ValueError(f"must be >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise ValueError(f"must be <= {maximum}, got {value}")
        return value

    return parse


def _float(minimum: float) -> Parser:
    def parse(raw: str) -> float:
        try:
            value = float(raw.strip())
        except ValueError:
            raise ValueError(f"expected a number, got {raw!r}") from None
        if value < minimum:
            raise ValueError(f"must be >= {minimum}, got {value}")
        return value

    return parse


def _bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off", ""):
        return False
    raise ValueError(f"expected true or false, got {raw!r}")


def _str(raw: str) -> str:
    return raw.strip()


def _choice(*choices: str) -> Parser:
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(repr(c) for c in choices)}, got {raw!r}")
        return value

    return parse


def _hex_key(raw: str) -> str:
    value = raw.strip()
    if value and (len(value) != 64 or any(c not in "0123456789abcdefABCDEF" for c in value)):
        raise ValueError("must be exactly 64 hexadecimal characters (a 32-byte AES-256 key)")
    return value.lower()


def _readable_file(raw: str) -> str:
    path = raw.strip()
    if path and not os.access(path, os.R_OK):
        raise ValueError(f"cannot read file {path!r}")
    return path


def _secret(raw: str) -> str:
    value = raw.strip()
    if any(not ("!" <= c <= "~") for c in value):
        raise ValueError("must be printable ASCII without spaces (it travels in an HTTP header)")
    return value


def _csv(raw: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in raw.split(",") if part.strip())


JWT_ALGORITHMS = ("HS256", "RS256", "EdDSA", "auto")


def _jwt_algorithm(raw: str) -> str:
    """One of JWT_ALGORITHMS, matched case-insensitively, returned in its canonical case."""
    value = raw.strip()
    for choice in JWT_ALGORITHMS:
        if value.lower() == choice.lower():
            return choice
    raise ValueError(f"expected one of {', '.join(JWT_ALGORITHMS)}, got {raw!r}")


def _pem_or_path(raw: str) -> str:
    """A PEM text (`\\n` escapes allowed, as env files often carry them), or the path of a
    readable PEM file, whose text is returned."""
    value = raw.strip()
    if not value or "-----BEGIN" in value:
        return value.replace("\\n", "\n")
    try:
        with open(value, encoding="ascii") as pem:
            return pem.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"neither a PEM text nor a readable PEM file: {exc}") from None


def _http_url(raw: str) -> str:
    value = raw.strip()
    if value and not value.lower().startswith(("http://", "https://")):
        raise ValueError(f"expected an http:// or https:// URL, got {raw!r}")
    return value


def _paths(raw: str) -> tuple[str, ...]:
    paths = _csv(raw)
    for path in paths:
        if not path.startswith("/"):
            raise ValueError(f"each path must start with '/', got {path!r}")
    return paths


def _webapp_folder(raw: str) -> str:
    """A dashboard folder: index.html and assets/ (checked at start, not at the first page)."""
    path = raw.strip()
    if not path:
        return ""
    has_index = os.path.isfile(os.path.join(path, "index.html"))
    if not has_index or not os.path.isdir(os.path.join(path, "assets")):
        raise ValueError(f"{path!r} is not a dashboard folder (index.html and assets/)")
    return os.path.abspath(path)


def _origins(raw: str) -> tuple[str, ...]:
    origins = _csv(raw)
    for origin in origins:
        if origin != "*" and (
            not origin.lower().startswith(("http://", "https://"))
            or "/" in origin.split("://", 1)[1]
        ):
            raise ValueError(f"expected '*' or origins like https://app.example, got {origin!r}")
    if "*" in origins and len(origins) > 1:
        raise ValueError("'*' allows every origin: list origins or '*', not both")
    return origins


def _cpu_count() -> int:
    return os.cpu_count() or 1


def env(name: str, default: Any, parser: Parser, doc: str) -> Any:
    """Declare a setting: the dataclass field's metadata carries its env name and parser."""
    meta = {"env": name, "parser": parser, "doc": doc}
    if callable(default):
        return field(default_factory=default, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Settings:
    """All configuration of a queen-threads process. Build it with `load_settings()`."""

    # --- HTTP server -----------------------------------------------------------------
    host: str = env("HOST", "0.0.0.0", _str, "Address the HTTP server binds.")
    port: int = env("PORT", 6632, _int(1, 65535), "HTTP port.")
    num_workers: int = env(
        "NUM_WORKERS", _cpu_count, _int(1, 256), "gunicorn worker processes (default: CPU count)."
    )
    worker_connections: int = env(
        "WORKER_CONNECTIONS",
        10000,
        _int(10),
        "Concurrent connections per worker process (waiting long polls count).",
    )
    reuse_port: bool = env(
        "REUSE_PORT",
        True,
        _bool,
        "Each worker listens on its own SO_REUSEPORT socket so the kernel spreads connections "
        "evenly over the workers (false: one shared socket).",
    )
    graceful_timeout: int = env(
        "GRACEFUL_TIMEOUT", 30, _int(1), "Seconds a worker may take to finish on SIGTERM."
    )
    max_body_size: int = env(
        "MAX_BODY_SIZE", 64 * 1024 * 1024, _int(1024), "Largest accepted request body, bytes (413)."
    )
    log_level: str = env("LOG_LEVEL", "info", _choice(*LOG_LEVELS), "Log level.")
    ssl_certfile: str = env(
        "SSL_CERTFILE", "", _readable_file, "PEM certificate: serve HTTPS (with SSL_KEYFILE)."
    )
    ssl_keyfile: str = env("SSL_KEYFILE", "", _readable_file, "PEM private key of SSL_CERTFILE.")

    # --- Database --------------------------------------------------------------------
    database_url: str = env(
        "DATABASE_URL", "", _str, "libpq URL of the database; overrides the PG_* variables."
    )
    database_direct_url: str = env(
        "DATABASE_DIRECT_URL",
        "",
        _str,
        "libpq URL of the same database, not through a pooler: LISTEN, background "
        "services, migrations (unset: the pool's database).",
    )
    database_socket_dir: str = env(
        "DATABASE_SOCKET_DIR",
        "",
        _str,
        "Unix-socket folder through which the connection pool reaches the database of "
        "DATABASE_URL (same server and port; cheaper than loopback TCP). `serve` sets it "
        "for the embedded PostgreSQL. Unset: the URL's host.",
    )
    database_pooler: str = env(
        "DATABASE_POOLER",
        "auto",
        _choice(*POOLERS),
        "transaction: the pool's URL is a transaction pooler (timeouts per transaction, "
        "no startup options); none: it is PostgreSQL; auto: transaction when "
        "DATABASE_DIRECT_URL is set.",
    )
    pg_host: str = env(
        "PG_HOST", "", _str, "PostgreSQL host. Unset (with no DATABASE_URL): embedded."
    )
    pg_port: int = env("PG_PORT", 5432, _int(1, 65535), "PostgreSQL port.")
    pg_user: str = env("PG_USER", "postgres", _str, "PostgreSQL user.")
    pg_password: str = env("PG_PASSWORD", "postgres", _str, "PostgreSQL password.")
    pg_db: str = env("PG_DB", "postgres", _str, "PostgreSQL database name.")
    pg_use_ssl: bool = env("PG_USE_SSL", False, _bool, "sslmode=require when true.")
    db_pool_size: int = env(
        "DB_POOL_SIZE",
        150,
        _int(2),
        "Connections per server instance, shared out across the worker processes.",
    )
    db_connection_timeout_ms: int = env(
        "DB_CONNECTION_TIMEOUT", 2000, _int(1000), "Connect timeout, ms."
    )
    db_statement_timeout_ms: int = env(
        "DB_STATEMENT_TIMEOUT",
        30000,
        _int(0),
        "statement_timeout of the pool's connections (per transaction behind a pooler), ms.",
    )
    db_lock_timeout_ms: int = env(
        "DB_LOCK_TIMEOUT",
        10000,
        _int(0),
        "lock_timeout of the pool's connections (per transaction behind a pooler), ms.",
    )
    db_idle_timeout_ms: int = env(
        "DB_IDLE_TIMEOUT",
        30000,
        _int(0),
        "idle_in_transaction_session_timeout of the pool's connections, ms.",
    )
    db_pool_acquisition_timeout_ms: int = env(
        "DB_POOL_ACQUISITION_TIMEOUT",
        10000,
        _int(1),
        "How long a request waits for a free pooled connection before a 503, ms.",
    )
    data_dir: str = env(
        "QUEEN_DATA_DIR", ".queen-data", _str, "Folder of the embedded PostgreSQL's data."
    )
    embedded_pg_port: int = env(
        "EMBEDDED_PG_PORT", 0, _int(0, 65535), "Port of the embedded PostgreSQL (0: any free port)."
    )

    # --- Pop and long polling ---------------------------------------------------------
    default_timeout_ms: int = env(
        "DEFAULT_TIMEOUT", 30000, _int(0), "Pop `timeout` when the request has none, ms."
    )
    max_timeout_ms: int = env(
        "MAX_TIMEOUT", 60000, _int(1), "Longest long-poll wait; larger `timeout`s are clamped, ms."
    )
    default_batch_size: int = env(
        "DEFAULT_BATCH_SIZE", 1, _int(1, 10000), "Pop `batch` when the request has none."
    )
    default_subscription_mode: str = env(
        "DEFAULT_SUBSCRIPTION_MODE",
        "",
        _choice(*SUBSCRIPTION_MODES),
        "Subscription mode of a new consumer group that sends none ('' = all).",
    )
    poll_worker_count: int = env(
        "POLL_WORKER_COUNT", 2, _int(1, 64), "Poll-worker greenlets per worker process."
    )
    poll_worker_interval_ms: int = env(
        "POLL_WORKER_INTERVAL", 50, _int(1), "Longest sleep of an idle poll worker, ms."
    )
    poll_db_interval_ms: int = env(
        "POLL_DB_INTERVAL", 100, _int(1), "Base (reset) interval between a group's queries, ms."
    )
    queue_max_poll_interval_ms: int = env(
        "QUEUE_MAX_POLL_INTERVAL", 2000, _int(1), "Cap of a group's backoff interval, ms."
    )
    queue_backoff_threshold: int = env(
        "QUEUE_BACKOFF_THRESHOLD", 1, _int(1), "Empty rounds before a group's interval grows."
    )
    queue_backoff_multiplier: float = env(
        "QUEUE_BACKOFF_MULTIPLIER", 2.0, _float(1.0), "Growth factor of the backoff interval."
    )
    queue_backoff_cleanup_threshold_s: int = env(
        "QUEUE_BACKOFF_CLEANUP_THRESHOLD", 3600, _int(1), "Drop backoff states idle this long, s."
    )
    max_poll_intentions: int = env(
        "MAX_POLL_INTENTIONS",
        10000,
        _int(1),
        "Waiting long polls per worker process; beyond it a long poll gets 503 + Retry-After.",
    )

    # --- Stream polls (waiting for a ready window) ---------------------------------------
    stream_poll_worker_count: int = env(
        "STREAM_POLL_WORKER_COUNT", 1, _int(1, 64), "Stream poll-worker greenlets per process."
    )
    stream_poll_worker_interval_ms: int = env(
        "STREAM_POLL_WORKER_INTERVAL", 100, _int(1), "Longest sleep of an idle stream worker, ms."
    )
    stream_poll_interval_ms: int = env(
        "STREAM_POLL_INTERVAL",
        1000,
        _int(1),
        "Base (reset) interval between a stream group's readiness checks, ms.",
    )
    stream_backoff_threshold: int = env(
        "STREAM_BACKOFF_THRESHOLD", 5, _int(0), "Empty checks before a stream group backs off."
    )
    stream_backoff_multiplier: float = env(
        "STREAM_BACKOFF_MULTIPLIER", 2.0, _float(1.0), "Growth factor of the stream backoff."
    )
    stream_max_poll_interval_ms: int = env(
        "STREAM_MAX_POLL_INTERVAL", 5000, _int(1), "Cap of a stream group's check interval, ms."
    )
    stream_concurrent_checks: int = env(
        "STREAM_CONCURRENT_CHECKS",
        2,
        _int(1, 64),
        "Readiness-check database calls one stream worker may run at once.",
    )

    # --- Peers (wake-ups between instances besides LISTEN/NOTIFY) ------------------------
    listen_notify: bool = env(
        "QUEEN_LISTEN_NOTIFY",
        True,
        _bool,
        "Wake long polls through PostgreSQL LISTEN/NOTIFY (on the DATABASE_DIRECT_URL).",
    )
    peers: tuple[str, ...] = env(
        "QUEEN_PEERS", (), _csv, "Comma list of peer base URLs notified over HTTP on push/ack."
    )
    udp_peers: tuple[str, ...] = env(
        "QUEEN_UDP_PEERS", (), _csv, "Comma list of host[:port] peers notified over UDP."
    )
    udp_notify_port: int = env(
        "QUEEN_UDP_NOTIFY_PORT", 6633, _int(1, 65535), "UDP port to receive (and default send)."
    )
    peer_notify_batch_ms: int = env(
        "PEER_NOTIFY_BATCH_MS", 10, _int(0, 1000), "Window in which peer notifications batch, ms."
    )
    peer_secret: str = env(
        "QUEEN_PEER_SECRET",
        "",
        _secret,
        "Shared secret of the peers (HTTP header, UDP HMAC key); others are dropped. Unset: open.",
    )
    udp_bind: str = env(
        "QUEEN_UDP_BIND",
        "127.0.0.1",
        _str,
        "Address the UDP notification receiver binds (0.0.0.0: every interface).",
    )

    # --- Authentication (docs/security.md) -----------------------------------------------
    jwt_enabled: bool = env(
        "JWT_ENABLED", False, _bool, "Require a JWT (Authorization: Bearer) on every API route."
    )
    jwt_algorithm: str = env(
        "JWT_ALGORITHM",
        "HS256",
        _jwt_algorithm,
        "Accepted token algorithm: HS256, RS256, EdDSA or auto.",
    )
    jwt_secret: str = env(
        "JWT_SECRET", "", _str, "HS256 shared secret (at least 32 bytes); never logged."
    )
    jwt_public_key: str = env(
        "JWT_PUBLIC_KEY",
        "",
        _pem_or_path,
        "RS256/EdDSA public key or certificate: PEM text or a file.",
    )
    jwt_jwks_url: str = env(
        "JWT_JWKS_URL",
        "",
        _http_url,
        "URL of the identity provider's JWKS (RS256/EdDSA keys by kid).",
    )
    jwt_issuer: str = env("JWT_ISSUER", "", _str, "Required `iss` of every token (unset: any).")
    jwt_audience: tuple[str, ...] = env(
        "JWT_AUDIENCE", (), _csv, "Comma list: a token's `aud` must name one (unset: not checked)."
    )
    jwt_clock_skew_s: int = env(
        "JWT_CLOCK_SKEW", 30, _int(0, 3600), "Leeway of the exp/nbf/iat checks, s."
    )
    jwt_skip_paths: tuple[str, ...] = env(
        "JWT_SKIP_PATHS",
        ("/health", "/metrics/prometheus", "/metrics", "/"),
        _paths,
        "Comma list of paths served without a token (exact; `/x/*` covers everything under /x).",
    )
    cors_allowed_origins: tuple[str, ...] = env(
        "CORS_ALLOWED_ORIGINS",
        ("*",),
        _origins,
        "Comma list of browser origins allowed to call the API, or * (any).",
    )

    # --- Dashboard (docs/dashboard.md) -------------------------------------------------
    webapp_root: str = env(
        "WEBAPP_ROOT",
        "",
        _webapp_folder,
        "Folder of the dashboard served at / (index.html and assets/); unset: the one "
        "shipped in the package.",
    )

    # --- Retention, eviction, metrics -------------------------------------------------
    retention_interval_ms: int = env(
        "RETENTION_INTERVAL", 300000, _int(100), "Period of the retention service, ms."
    )
    retention_batch_size: int = env(
        "RETENTION_BATCH_SIZE",
        1000,
        _int(1, 100000),
        "Messages (and partitions) per retention batch: one statement and transaction each.",
    )
    eviction_interval_ms: int = env(
        "EVICTION_INTERVAL", 60000, _int(100), "Period of the maxWaitTimeSeconds eviction, ms."
    )
    eviction_batch_size: int = env(
        "EVICTION_BATCH_SIZE", 1000, _int(1, 100000), "Messages per eviction batch."
    )
    kv_sweep_interval_ms: int = env(
        "KV_SWEEP_INTERVAL",
        10000,
        _int(100),
        "Period of the key/value sweeper (deletes expired keys and lock permits), ms.",
    )
    kv_sweep_batch_size: int = env(
        "KV_SWEEP_BATCH_SIZE",
        1000,
        _int(1, 100000),
        "Expired key/value rows per sweeper batch: one statement and transaction each.",
    )
    partition_cleanup_days: int = env(
        "PARTITION_CLEANUP_DAYS",
        30,
        _int(0),
        "Delete empty partitions with no push for this many days (0: never).",
    )
    metrics_retention_days: int = env(
        "METRICS_RETENTION_DAYS",
        7,
        _int(0),
        "Keep the analytics minutes and queen.retention_history rows this many days (0: forever).",
    )
    metrics_flush_interval_s: float = env(
        "METRICS_FLUSH_INTERVAL_S",
        60.0,
        _float(0.1),
        "Each worker process writes its analytics counts this often, s; the queues' levels "
        "are sampled twice as often.",
    )
    prometheus_multiproc_dir: str = env(
        "PROMETHEUS_MULTIPROC_DIR",
        "",
        _str,
        "Folder of prometheus-client's per-process files (unset: a fresh temporary folder).",
    )

    # --- Timers (docs/timers.md) -------------------------------------------------------
    timers_fire_batch: int = env(
        "TIMERS_FIRE_BATCH",
        500,
        _int(1, 10000),
        "Due timers one fire call claims and delivers (one transaction).",
    )
    timers_max_sleep_ms: int = env(
        "TIMERS_MAX_SLEEP_MS",
        1000,
        _int(10, 60000),
        "Longest a process's timer firer sleeps without a known due time, ms.",
    )
    timers_fired_retention_hours: int = env(
        "TIMERS_FIRED_RETENTION_HOURS",
        24,
        _int(1),
        "Keep the log of fired timers (queen.timer_fires) this many hours.",
    )

    # --- Encryption ------------------------------------------------------------------
    encryption_key: str = env(
        "QUEEN_ENCRYPTION_KEY",
        "",
        _hex_key,
        "64 hex chars: AES-256-GCM key for queues with encryptionEnabled (unset: refused).",
    )

    # --- Failover file buffer ----------------------------------------------------------
    file_buffer_dir: str = env(
        "FILE_BUFFER_DIR",
        ".queen-data/buffers",
        _str,
        "Folder of the failover buffer files (relative: to the working directory).",
    )
    file_buffer_flush_ms: int = env(
        "FILE_BUFFER_FLUSH_MS", 100, _int(1), "Replay poll interval while buffer files exist, ms."
    )
    file_buffer_max_batch: int = env(
        "FILE_BUFFER_MAX_BATCH", 100, _int(1, 10000), "Buffered events per replay push."
    )
    file_buffer_events_per_file: int = env(
        "FILE_BUFFER_EVENTS_PER_FILE", 10000, _int(1), "Events after which a buffer file rotates."
    )

    @property
    def uses_embedded_database(self) -> bool:
        return not self.database_url and not self.pg_host

    def dsn(self) -> str:
        """The libpq connection string of the configured (not embedded) database."""
        if self.database_url:
            return self.database_url
        if not self.pg_host:
            raise ConfigError(
                "no database configured: set DATABASE_URL or PG_HOST, "
                "or start with `queen-threads serve`, which runs an embedded PostgreSQL"
            )
        ssl = "require" if self.pg_use_ssl else "disable"
        return (
            f"postgresql://{quote(self.pg_user, safe='')}:{quote(self.pg_password, safe='')}"
            f"@{self.pg_host}:{self.pg_port}/{quote(self.pg_db, safe='')}?sslmode={ssl}"
        )

    def direct_dsn(self, pool_dsn: str) -> str:
        """The DSN of the connections that need a session of their own (LISTEN, session
        advisory locks, session settings): DATABASE_DIRECT_URL, else the pool's own
        `pool_dsn` (the configured or the embedded database)."""
        return self.database_direct_url or pool_dsn

    @property
    def transaction_pooled(self) -> bool:
        """The pool's DSN leads to a transaction pooler (PgBouncer pool_mode=transaction):
        its connections must leave no session state behind and send no startup options."""
        if self.database_pooler == "auto":
            return bool(self.database_direct_url)
        return self.database_pooler == "transaction"

    def workers_pool_size(self) -> int:
        """Pool size of one worker process: the instance budget shared out across workers."""
        return max(2, self.db_pool_size // self.num_workers)


def setting_fields() -> list[Any]:
    return [f for f in fields(Settings) if "env" in f.metadata]


def load_settings(
    environ: Mapping[str, str] | None = None, dotenv_path: str | None = ".env"
) -> Settings:
    """Read the environment (and `.env` below it), validate, and return Settings.

    Raises ConfigError naming the variable for a malformed value.
    """
    source: dict[str, str] = {}
    if dotenv_path and os.path.exists(dotenv_path):
        source.update({k: v for k, v in dotenv_values(dotenv_path).items() if v is not None})
    source.update(os.environ if environ is None else environ)
    values: dict[str, Any] = {}
    for f in setting_fields():
        name = f.metadata["env"]
        raw = source.get(name)
        if raw is None:
            continue
        try:
            values[f.name] = f.metadata["parser"](raw)
        except ValueError as exc:
            raise ConfigError(f"invalid {name}: {exc}") from None
    settings = Settings(**values)
    if bool(settings.ssl_certfile) != bool(settings.ssl_keyfile):
        raise ConfigError("SSL_CERTFILE and SSL_KEYFILE must be set together (or neither)")
    _check_direct_database(settings)
    _check_stream_intervals(settings)
    return settings


def _check_stream_intervals(settings: Settings) -> None:
    """The stream backoff cap cannot be below its base interval."""
    if settings.stream_max_poll_interval_ms < settings.stream_poll_interval_ms:
        raise ConfigError(
            f"STREAM_MAX_POLL_INTERVAL ({settings.stream_max_poll_interval_ms} ms) must be >= "
            f"STREAM_POLL_INTERVAL ({settings.stream_poll_interval_ms} ms)"
        )


def _check_direct_database(settings: Settings) -> None:
    """A direct URL only makes sense beside a configured pool URL; a transaction pooler
    without one would run LISTEN and session advisory locks through the pooler, where
    they silently break (a lock stays on a pooled server connection, LISTEN hears
    nothing)."""
    if settings.database_direct_url and settings.uses_embedded_database:
        raise ConfigError("DATABASE_DIRECT_URL needs DATABASE_URL or PG_HOST (the pool's database)")
    if settings.database_socket_dir and settings.transaction_pooled:
        raise ConfigError(
            "DATABASE_SOCKET_DIR bypasses the pooler of DATABASE_URL: unset it with a pooler"
        )
    if settings.database_pooler == "transaction" and not settings.database_direct_url:
        raise ConfigError(
            "DATABASE_POOLER=transaction needs DATABASE_DIRECT_URL: LISTEN, the background "
            "services' advisory locks and migrations need a session of their own"
        )
