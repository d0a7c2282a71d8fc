"""The three roles of a token and their order: admin > read-write > read-only."""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from typing import Any


class Role(IntEnum):
    """What a token may do; a higher role may do everything a lower one may."""

    NONE = 0  # a valid token without a known role: refused everywhere a role is needed
    READ_ONLY = 1
    READ_WRITE = 2
    ADMIN = 3

    @property
    def label(self) -> str:
        return _LABELS[self]


ROLE_NAMES = {"read-only": Role.READ_ONLY, "read-write": Role.READ_WRITE, "admin": Role.ADMIN}
_LABELS = {role: name for name, role in ROLE_NAMES.items()} | {Role.NONE: "(none)"}


def role_of(claims: Mapping[str, Any]) -> Role:
    """The highest known role named by the claim `role` (a string) or `roles` (an array of
    strings); unknown names and other types are ignored."""
    names: list[Any] = [claims.get("role")]
    roles = claims.get("roles")
    if isinstance(roles, list):
        names.extend(roles)
    return max(
        (ROLE_NAMES[name] for name in names if isinstance(name, str) and name in ROLE_NAMES),
        default=Role.NONE,
    )
