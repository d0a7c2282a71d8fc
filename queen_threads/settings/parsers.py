"""The building blocks of the settings: `env()` declares one variable (a dataclass field whose
metadata carries its env name, parser and doc), and the parsers shared by the concerns."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import field
from typing import Any

Parser = Callable[[str], Any]


def integer(minimum: int | None = None, maximum: int | None = None) -> Parser:
    def parse(raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ValueError(f"expected an integer, got {raw!r}") from None
        if minimum is not None and value < minimum:
            raise ValueError(f"must be >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise ValueError(f"must be <= {maximum}, got {value}")
        return value

    return parse


def number(minimum: float) -> Parser:
    def parse(raw: str) -> float:
        try:
            value = float(raw.strip())
        except ValueError:
            raise ValueError(f"expected a number, got {raw!r}") from None
        if value < minimum:
            raise ValueError(f"must be >= {minimum}, got {value}")
        return value

    return parse


def boolean(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off", ""):
        return False
    raise ValueError(f"expected true or false, got {raw!r}")


def text(raw: str) -> str:
    return raw.strip()


def choice(*choices: str) -> Parser:
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(repr(c) for c in choices)}, got {raw!r}")
        return value

    return parse


def readable_file(raw: str) -> str:
    path = raw.strip()
    if path and not os.access(path, os.R_OK):
        raise ValueError(f"cannot read file {path!r}")
    return path


def secret(raw: str) -> str:
    value = raw.strip()
    if any(not ("!" <= c <= "~") for c in value):
        raise ValueError("must be printable ASCII without spaces (it travels in an HTTP header)")
    return value


def csv_list(raw: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def cpu_count() -> int:
    return os.cpu_count() or 1


def env(name: str, default: Any, parser: Parser, doc: str) -> Any:
    """Declare a setting: the dataclass field's metadata carries its env name and parser."""
    meta = {"env": name, "parser": parser, "doc": doc}
    if callable(default):
        return field(default_factory=default, metadata=meta)
    return field(default=default, metadata=meta)
