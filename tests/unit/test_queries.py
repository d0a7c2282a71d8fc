from __future__ import annotations

import re
from pathlib import Path

import pytest

from queen_threads import queries

ROOT = Path(__file__).resolve().parents[2] / "queen_threads"


def test_parse_names_and_strips_descriptions() -> None:
    parsed = queries.parse("-- name: a\n-- say a\nSELECT 1;\n\n-- name: b\nSELECT 2\n")
    assert parsed == {"a": "SELECT 1", "b": "SELECT 2"}


def test_duplicate_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="twice"):
        queries.parse("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n")


def test_every_query_name_used_in_code_exists() -> None:
    used: set[str] = set()
    for path in ROOT.rglob("*.py"):
        used |= set(re.findall(r"queries\.get\(\"([a-z0-9_]+)\"\)", path.read_text()))
    assert used, "expected the code to use named queries"
    assert used <= queries.names(), f"missing in queries.sql: {sorted(used - queries.names())}"
