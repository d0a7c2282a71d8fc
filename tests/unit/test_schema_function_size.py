"""The house's rule for stored functions: none longer than 200 lines (docs/architecture.md).

Every `CREATE FUNCTION`/`CREATE PROCEDURE` of schema/ (the function files, the migrations
and the Citus step) is measured from its `CREATE` to the end of its statement; a longer one
is split into named steps, as `queen.timers_fire_v1` is (98_timers_fire.sql).
"""

from __future__ import annotations

import re

import pytest

from queen_threads import migrate

MAX_LINES = 200
_CREATE = re.compile(r"\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:FUNCTION|PROCEDURE)\s+([\w.\"]+)", re.I)


def function_sizes(sql: str) -> list[tuple[str, int]]:
    """(name, lines) of each function or procedure a schema file creates."""
    sizes = []
    for statement in migrate.split_statements(sql):
        found = _CREATE.search(statement)
        if found:
            sizes.append((found.group(1), len(statement[found.start() :].rstrip().splitlines())))
    return sizes


def test_a_function_is_measured_from_its_create_to_its_end() -> None:
    sql = (
        "-- a comment before it is not counted\n"
        "CREATE OR REPLACE FUNCTION queen.f() RETURNS int LANGUAGE plpgsql AS $$\n"
        "BEGIN\n  RETURN 1;\nEND;\n$$;\n"
        "CREATE TABLE t (a int);\n"
        "create procedure queen.p() language sql as $x$ SELECT 1; $x$;\n"
    )
    assert function_sizes(sql) == [("queen.f", 5), ("queen.p", 1)]


@pytest.mark.parametrize("f", migrate.schema_files() + migrate.citus_files(), ids=lambda f: f.name)
def test_no_stored_function_is_longer_than_200_lines(f: migrate.SchemaFile) -> None:
    long = [(name, n) for name, n in function_sizes(f.sql) if n > MAX_LINES]
    assert not long, f"{f.name}: split these into named steps (at most {MAX_LINES} lines): {long}"
