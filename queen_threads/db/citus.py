"""Whether the database is a Citus coordinator (docs/scaling.md, "Citus").

The SQL is the same on both placements; what differs is how the server sends a few hot
calls. A function Citus delegates to the node that holds its distribution argument
(`schema/citus/30_push.sql`) is delegated only when it is the whole statement, in a
statement of its own (not inside a transaction block or a multi-statement query string):
so on Citus such a call travels alone, and what plain PostgreSQL gets in the same statement
(e.g. the wake-interest epoch) comes from a statement after it.

Found with Citus 13.2.2: after Citus's planner refused some statements inside a function
(SQLSTATE 0A000; e.g. "could not run distributed query with FOR UPDATE/SHARE commands" for a
claim over several shards in a sub-block, tests/citus/test_citus_push.py), that session no
longer delegates any function call (`DISCARD ALL` does not help). The pool therefore
closes a connection after such an error (`Database.connection`), so one refused statement
cannot turn every later push of that connection into coordinator work.
"""

from __future__ import annotations

import threading

from queen_threads.db.statements import Statements


def is_citus(db: Statements) -> bool:
    """The database has the citus extension (as `queen-threads migrate` decides)."""
    return db.row("citus_installed") is not None


class CitusProbe:
    """`is_citus`, asked once (the first time it is needed, when the database answers) and
    remembered: a database does not change placement while a server runs."""

    def __init__(self, db: Statements) -> None:
        self._db = db
        self._known: bool | None = None
        self._lock = threading.Lock()

    def known(self) -> bool | None:
        """The answer if it was asked already (None: not yet), without asking."""
        return self._known

    def __call__(self) -> bool:
        known = self._known
        if known is None:
            with self._lock:
                if self._known is None:
                    self._known = is_citus(self._db)
                known = self._known
        return known
