"""Ad-hoc SQL for tests that inspect what the server stored (the product itself runs only
named statements): over a `Database`'s pool, with the same error translation."""

from __future__ import annotations

from typing import Any

from queen_threads.db import Database, Params


def sql_rows(db: Database, text: str, params: Params = None) -> list[tuple[Any, ...]]:
    with db.connection() as conn, conn.cursor() as cur:
        cur.execute(text, params)
        return [tuple(r) for r in cur.fetchall()]


def sql_value(db: Database, text: str, params: Params = None) -> Any:
    rows = sql_rows(db, text, params)
    return rows[0][0] if rows else None
