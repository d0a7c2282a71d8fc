"""Authentication: JWT verification (PyJWT), the three roles, the JWKS cache.

No HTTP here: the falcon middleware and the route table are in `http/auth.py` and
`http/routes.py`; the runtime builds one `Authenticator` per worker process.
"""

from queen_threads.auth.authenticator import Authenticator, bearer_token
from queen_threads.auth.config import build_verifier
from queen_threads.auth.roles import Role, role_of
from queen_threads.auth.tokens import Identity, InvalidToken, TokenVerifier

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
