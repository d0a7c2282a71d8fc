"""The database: where it is, how the pool reaches it, its timeouts, the embedded one."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from queen_threads.errors import ConfigError
from queen_threads.settings.parsers import boolean, choice, env, integer, text

POOLERS = ("auto", "none", "transaction")


@dataclass(frozen=True)
class DatabaseSettings:
    """PostgreSQL and the connection pool."""

    database_url: str = env(
        "DATABASE_URL", "", text, "libpq URL of the database; overrides the PG_* variables."
    )
    database_direct_url: str = env(
        "DATABASE_DIRECT_URL",
        "",
        text,
        "libpq URL of the same database, not through a pooler: LISTEN, background "
        "services, migrations (unset: the pool's database).",
    )
    database_socket_dir: str = env(
        "DATABASE_SOCKET_DIR",
        "",
        text,
        "Unix-socket folder through which the connection pool reaches the database of "
        "DATABASE_URL (same server and port; cheaper than loopback TCP). `serve` sets it "
        "for the embedded PostgreSQL. Unset: the URL's host.",
    )
    database_pooler: str = env(
        "DATABASE_POOLER",
        "auto",
        choice(*POOLERS),
        "transaction: the pool's URL is a transaction pooler (timeouts per transaction, "
        "no startup options); none: it is PostgreSQL; auto: transaction when "
        "DATABASE_DIRECT_URL is set.",
    )
    pg_host: str = env(
        "PG_HOST", "", text, "PostgreSQL host. Unset (with no DATABASE_URL): embedded."
    )
    pg_port: int = env("PG_PORT", 5432, integer(1, 65535), "PostgreSQL port.")
    pg_user: str = env("PG_USER", "postgres", text, "PostgreSQL user.")
    pg_password: str = env("PG_PASSWORD", "postgres", text, "PostgreSQL password.")
    pg_db: str = env("PG_DB", "postgres", text, "PostgreSQL database name.")
    pg_use_ssl: bool = env("PG_USE_SSL", False, boolean, "sslmode=require when true.")
    citus: bool = env(
        "QUEEN_CITUS",
        False,
        boolean,
        "The database is a Citus coordinator: migrate creates the extension there if missing "
        "and places the schema on the cluster. Without it Citus is used when the database "
        "already has the extension.",
    )
    db_pool_size: int = env(
        "DB_POOL_SIZE",
        150,
        integer(2),
        "Connections per server instance, shared out across the worker processes.",
    )
    db_connection_timeout_ms: int = env(
        "DB_CONNECTION_TIMEOUT", 2000, integer(1000), "Connect timeout, ms."
    )
    db_statement_timeout_ms: int = env(
        "DB_STATEMENT_TIMEOUT",
        30000,
        integer(0),
        "statement_timeout of the pool's connections (per transaction behind a pooler), ms.",
    )
    db_lock_timeout_ms: int = env(
        "DB_LOCK_TIMEOUT",
        10000,
        integer(0),
        "lock_timeout of the pool's connections (per transaction behind a pooler), ms.",
    )
    db_idle_timeout_ms: int = env(
        "DB_IDLE_TIMEOUT",
        30000,
        integer(0),
        "idle_in_transaction_session_timeout of the pool's connections, ms.",
    )
    db_pool_acquisition_timeout_ms: int = env(
        "DB_POOL_ACQUISITION_TIMEOUT",
        10000,
        integer(1),
        "How long a request waits for a free pooled connection before a 503, ms.",
    )
    data_dir: str = env(
        "QUEEN_DATA_DIR", ".queen-data", text, "Folder of the embedded PostgreSQL's data."
    )
    embedded_pg_port: int = env(
        "EMBEDDED_PG_PORT",
        0,
        integer(0, 65535),
        "Port of the embedded PostgreSQL (0: any free port).",
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


def check_database(settings: DatabaseSettings) -> None:
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
