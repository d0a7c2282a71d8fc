"""How `migrate` splits a schema file into statements (used on Citus, docs/scaling.md)."""

from __future__ import annotations

import pytest

from queen_threads import migrate


def test_statements_keep_quotes_comments_and_dollar_bodies_whole() -> None:
    sql = (
        "-- a comment; not a statement\n"
        "CREATE TABLE t (a text DEFAULT 'x;y', \"b;c\" int);\n"
        "/* block; comment */ CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $fn$\n"
        "BEGIN RETURN 1; END;\n$fn$;\n"
        "SELECT 'it''s; fine', $$a;b$$;\n"
        "-- trailing comment only\n"
    )
    parts = migrate.split_statements(sql)
    assert len(parts) == 3
    assert parts[0].strip().endswith('"b;c" int);')
    assert "BEGIN RETURN 1; END;" in parts[1] and parts[1].rstrip().endswith("$fn$;")
    assert parts[2].strip() == "SELECT 'it''s; fine', $$a;b$$;"
    assert "".join(parts) in sql


@pytest.mark.parametrize("f", migrate.schema_files() + migrate.citus_files(), ids=lambda f: f.name)
def test_every_schema_file_splits_back_into_itself(f: migrate.SchemaFile) -> None:
    parts = migrate.split_statements(f.sql)
    assert parts and "".join(parts) in f.sql
    assert all(p.rstrip().endswith(";") for p in parts[:-1])


def test_queen_citus_is_a_boolean() -> None:
    assert migrate.citus_requested({"QUEEN_CITUS": "1"}) is True
    assert migrate.citus_requested({}) is False
    with pytest.raises(migrate.MigrationError, match="QUEEN_CITUS"):
        migrate.citus_requested({"QUEEN_CITUS": "maybe"})
