"""Who a verified token speaks for, and the failure of a token that does not verify.

Apart from tokens.py so that what every request path imports (the authenticator, the
HTTP middleware) does not import PyJWT and cryptography: a server without JWT_ENABLED
never loads them (auth/config.py imports the verifier only when it is enabled).
"""

from __future__ import annotations

from dataclasses import dataclass

from queen_threads.auth.roles import Role
from queen_threads.errors import AuthenticationFailed


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a verified token speaks for: its `sub` and its highest role."""

    sub: str | None
    role: Role


class InvalidToken(AuthenticationFailed):
    """A token that does not verify; `kind` ("invalid", "expired") labels the metric."""

    def __init__(self, message: str, kind: str = "invalid") -> None:
        super().__init__(message)
        self.kind = kind
