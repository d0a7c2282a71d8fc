"""Authentication: JWT verification (PyJWT), the three roles, the JWKS cache.

No HTTP here: the falcon middleware and the route table are in `http/auth.py` and
`http/access.py`; the runtime builds one `Authenticator` per worker process.
"""

from typing import TYPE_CHECKING, Any

from queen_threads.auth.authenticator import Authenticator, bearer_token
from queen_threads.auth.config import build_verifier
from queen_threads.auth.identity import Identity, InvalidToken
from queen_threads.auth.roles import Role, role_of

if TYPE_CHECKING:
    from queen_threads.auth.tokens import TokenVerifier

__all__ = [
    "Authenticator",
    "Identity",
    "InvalidToken",
    "Role",
    "TokenVerifier",
    "bearer_token",
    "build_verifier",
    "role_of",
]


def __getattr__(name: str) -> Any:
    """`TokenVerifier` on first use: it imports PyJWT and cryptography, which a server
    without JWT_ENABLED never needs."""
    if name == "TokenVerifier":
        from queen_threads.auth.tokens import TokenVerifier

        return TokenVerifier
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
