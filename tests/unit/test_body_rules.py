"""One rule for request bodies: the top-level fields a body may carry are a constant named
`<BODY>_FIELDS` in its capability's body module, and a route hands that constant to
`json_object(known=...)` (so any other field is ignored and named)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "queen_threads"


def known_arguments() -> list[tuple[str, ast.expr]]:
    found = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                for keyword in node.keywords:
                    if keyword.arg == "known":
                        found.append((f"{path.relative_to(PACKAGE)}:{node.lineno}", keyword.value))
    return found


def test_every_known_argument_names_a_fields_constant() -> None:
    found = known_arguments()
    assert len(found) > 15
    bad = []
    for where, value in found:
        name = value.attr if isinstance(value, ast.Attribute) else getattr(value, "id", None)
        if isinstance(value, ast.Tuple) and not value.elts:
            continue  # a body that takes no field at all
        if name is None or not (name == "fields" or name.endswith("_FIELDS")):
            bad.append(where)
    assert bad == [], f"known= given something other than a *_FIELDS constant: {bad}"


def test_fields_constants_live_in_body_modules() -> None:
    outside = []
    for path in PACKAGE.rglob("*.py"):
        if path.stem.endswith("body"):
            continue
        for node in ast.parse(path.read_text(), str(path)).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            for target in targets:
                if isinstance(target, ast.Name) and target.id.endswith(("_FIELDS", "_KEYS")):
                    outside.append(f"{path.relative_to(PACKAGE)}: {target.id}")
    assert outside == [], f"body field lists outside a body module: {outside}"
