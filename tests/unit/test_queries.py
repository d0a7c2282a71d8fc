from __future__ import annotations

import ast
from pathlib import Path

import pytest

from queen_threads.db import queries

ROOT = Path(__file__).resolve().parents[2] / "queen_threads"


def test_parse_names_and_strips_descriptions() -> None:
    parsed = queries.parse("-- name: a\n-- say a\nSELECT 1;\n\n-- name: b\nSELECT 2\n")
    assert parsed == {"a": "SELECT 1", "b": "SELECT 2"}


def test_duplicate_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="twice"):
        queries.parse("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n")


STATEMENT_METHODS = {"execute", "row", "rows", "value", "json", "call", "status"}


def _trees() -> list[ast.AST]:
    return [ast.parse(path.read_text(), str(path)) for path in ROOT.rglob("*.py")]


def named_at_call_sites() -> set[str]:
    """First arguments (string literals) of the named-statement methods."""
    used: set[str] = set()
    for tree in _trees():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in STATEMENT_METHODS
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                used.add(node.args[0].value)
    return used


def string_literals() -> set[str]:
    return {
        node.value
        for tree in _trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def test_every_statement_the_code_runs_exists() -> None:
    used = named_at_call_sites()
    assert len(used) > 30, f"expected the code to run named statements, found {sorted(used)}"
    assert used <= queries.names(), (
        f"missing in the queries files: {sorted(used - queries.names())}"
    )


def test_every_named_statement_is_used() -> None:
    unused = queries.names() - string_literals()
    assert not unused, f"named statements no code runs: {sorted(unused)}"


def test_the_code_runs_no_sql_text_of_its_own() -> None:
    """SQL reaches the driver only from the queries files (and the schema files)."""
    for path in ROOT.rglob("*.py"):
        text = path.read_text()
        assert "queries.get(" not in text or path.name in ("statements.py", "queries.py"), path
