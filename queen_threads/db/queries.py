"""Loads the named statements: `schema/queries.sql` plus `schema/queries/*.sql`.

Every statement the Python side runs lives in those files (one namespace of names). A
file is a sequence of blocks, each starting with `-- name: <name>` followed by an
optional `-- <one-line description>` and the statement.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from queen_threads.paths import QUERIES_FILE

_HEADER = re.compile(r"^--\s*name:\s*([a-z0-9_]+)\s*$", re.MULTILINE)


def parse(text: str) -> dict[str, str]:
    parts = _HEADER.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice")
        lines = [ln for ln in body.strip().splitlines() if not ln.lstrip().startswith("--")]
        queries[name] = "\n".join(lines).strip().rstrip(";")
    return queries


@cache
def _load(path: Path) -> dict[str, str]:
    files = [path, *sorted((path.parent / "queries").glob("*.sql"))]
    merged: dict[str, str] = {}
    for f in files:
        for name, sql in parse(f.read_text(encoding="utf-8")).items():
            if name in merged:
                raise ValueError(f"query {name!r} is defined twice ({f.name})")
            merged[name] = sql
    return merged


def get(name: str) -> str:
    """The SQL text of a named query; KeyError if the name is unknown."""
    return _load(QUERIES_FILE)[name]


def names() -> set[str]:
    return set(_load(QUERIES_FILE))
