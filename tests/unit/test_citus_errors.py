"""A Citus worker node lost mid-transaction is "database unavailable" (the failover buffer
takes the push), not a statement error: Citus reports it as an internal error (XX000)."""

from __future__ import annotations

import psycopg2

from queen_threads.db.connect import from_worker_link, is_connection_error, translate
from queen_threads.errors import DatabaseError, DatabaseUnavailable


class _Internal(psycopg2.Error):
    pgcode = "XX000"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self._message = message

    @property
    def pgerror(self) -> str:  # type: ignore[override]
        return f"ERROR:  {self._message}\n"


def test_a_lost_citus_node_is_unavailable() -> None:
    exc = _Internal("failure on connection marked as essential: 127.0.0.1:5433")
    assert isinstance(translate(exc), DatabaseUnavailable)


def test_another_internal_error_stays_a_database_error() -> None:
    exc = _Internal("could not create distributed plan")
    error = translate(exc)
    assert isinstance(error, DatabaseError) and not isinstance(error, DatabaseUnavailable)


class _Diag:
    def __init__(self, context: str | None) -> None:
        self.context = context


class _Coded(psycopg2.Error):
    """An error as the coordinator relays it: its SQLSTATE, text and context."""

    def __init__(self, code: str, message: str, context: str | None = None) -> None:
        super().__init__(message)
        self._code, self._message, self._diag = code, message, _Diag(context)

    @property
    def pgcode(self) -> str:  # type: ignore[override]
        return self._code

    @property
    def pgerror(self) -> str:  # type: ignore[override]
        return f"ERROR:  {self._message}\n"

    @property
    def diag(self) -> _Diag:  # type: ignore[override]
        return self._diag


ON_WORKER = "while executing command on 127.0.0.1:5433"


def test_a_worker_link_lost_mid_statement_is_unavailable() -> None:
    """libpq's texts, relayed by Citus as XX000 when the worker gave no SQLSTATE (a worker
    backend gone while a shard moved or a node restarted)."""
    for text in (
        "server closed the connection unexpectedly\n\tThis probably means the server "
        "terminated abnormally",
        "connection not open",
        "could not receive data from server: Connection reset by peer",
        "connection to the remote node postgres@127.0.0.1:5433 failed with the following "
        "error: connection not open",
    ):
        assert isinstance(translate(_Coded("XX000", text, ON_WORKER)), DatabaseUnavailable), text


def test_a_shard_placement_dropped_by_a_move_is_unavailable() -> None:
    for exc in (
        _Coded("42P01", 'relation "queen.messages_102009" does not exist', ON_WORKER),
        _Coded("XX000", "could not find valid entry for shard 102009"),
    ):
        assert isinstance(translate(exc), DatabaseUnavailable), exc


def test_a_missing_relation_otherwise_stays_a_database_error() -> None:
    for exc in (
        _Coded("42P01", 'relation "queen.messages_102009" does not exist'),  # not a worker's
        _Coded("42P01", 'relation "queen.no_such_table" does not exist', ON_WORKER),
        _Coded("42883", "function queen.nope(uuid) does not exist", ON_WORKER),
    ):
        error = translate(exc)
        assert isinstance(error, DatabaseError) and not isinstance(error, DatabaseUnavailable)


def test_a_worker_link_keeps_the_coordinator_connection_and_the_pool() -> None:
    """A relayed failure of a worker's link discards that session only (statements.py), not
    the pool's idle connections: the link to the coordinator answered."""
    for exc in (
        _Coded("XX000", "server closed the connection unexpectedly", ON_WORKER),
        _Coded("XX000", "failure on connection marked as essential: 127.0.0.1:5433"),
        _Coded(
            "08006",
            "connection to the remote node postgres@127.0.0.1:5433 failed with "
            "the following error: connection not open",
        ),
        _Coded("57P01", "terminating connection due to administrator command", ON_WORKER),
    ):
        assert from_worker_link(exc) and not is_connection_error(exc), exc


def test_this_process_losing_the_coordinator_is_a_connection_error() -> None:
    """The driver's own text has no SQLSTATE: this connection is gone (flush the pool)."""
    exc = psycopg2.OperationalError("server closed the connection unexpectedly")
    assert not from_worker_link(exc)
    assert is_connection_error(exc)
    assert isinstance(translate(exc), DatabaseUnavailable)
    shutdown = _Coded("57P01", "terminating connection due to administrator command")
    assert not from_worker_link(shutdown) and is_connection_error(shutdown)
