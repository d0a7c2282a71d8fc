"""queen-threads: a PostgreSQL-backed message queue server, wire-compatible with Queen MQ."""

__version__ = "0.1.0"
