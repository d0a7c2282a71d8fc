"""A Citus worker node lost mid-transaction is "database unavailable" (the failover buffer
takes the push), not a statement error: Citus reports it as an internal error (XX000)."""

from __future__ import annotations

import psycopg2

from queen_threads.db.connect import translate
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
