"""The database room, and the only code that imports psycopg2: connections and their
settings (connect.py), the greenlet-safe pool (pool.py), gevent cooperation with connect
timeouts (green_wait.py), and named statements, the one way SQL runs (statements.py)."""

from queen_threads.db.connect import (
    Connection,
    Cursor,
    Listener,
    Params,
    PoolConfig,
    connect_raw,
    connection_kwargs,
    make_cooperative,
    translate,
)
from queen_threads.db.pool import Pool
from queen_threads.db.statements import (
    Database,
    Fetch,
    NamedCursor,
    StatementObserver,
    Statements,
    StatementSpan,
    run_named,
)

__all__ = [
    "Connection",
    "Cursor",
    "Database",
    "Fetch",
    "Listener",
    "NamedCursor",
    "Params",
    "Pool",
    "PoolConfig",
    "StatementObserver",
    "StatementSpan",
    "Statements",
    "connect_raw",
    "connection_kwargs",
    "make_cooperative",
    "run_named",
    "translate",
]
