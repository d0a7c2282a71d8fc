"""Who is asking (the token in `Authorization`) and whether they may (their role).

The HTTP middleware (http/auth.py) asks this object for every request that needs a role;
failures are counted here by kind (missing, invalid, expired, forbidden, unavailable) and
told to its observer (metrics/metered.py's `AuthMetrics`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from queen_threads.auth.identity import Identity, InvalidToken
from queen_threads.auth.roles import Role
from queen_threads.errors import AuthenticationFailed, Unavailable

if TYPE_CHECKING:
    from queen_threads.auth.tokens import TokenVerifier

FAILURE_KINDS = ("missing", "invalid", "expired", "forbidden", "unavailable")


def bearer_token(authorization: str | None) -> str:
    """The token of an Authorization header: after a `Bearer ` prefix (any case), or the
    whole value ('' when there is none)."""
    value = (authorization or "").strip()
    scheme, _, rest = value.partition(" ")
    return rest.strip() if scheme.lower() == "bearer" else value


class AuthObserver(Protocol):
    """Hears every refusal, by kind (FAILURE_KINDS)."""

    def refused(self, kind: str) -> None: ...


class Authenticator:
    def __init__(
        self,
        verifier: TokenVerifier | None,
        skip_paths: tuple[str, ...] = (),
        observer: AuthObserver | None = None,
    ) -> None:
        self.verifier = verifier
        self.observer = observer
        self._skip = frozenset(p for p in skip_paths if not p.endswith("/*"))
        self._skip_under = tuple(p[:-1] for p in skip_paths if p.endswith("/*"))
        self.failures = dict.fromkeys(FAILURE_KINDS, 0)

    @property
    def enabled(self) -> bool:
        return self.verifier is not None

    def start(self) -> None:
        if self.verifier is not None:
            self.verifier.start()

    def stop(self) -> None:
        """Nothing to stop: the key refresh (if any) is a daemon thread."""

    def skips(self, path: str) -> bool:
        """JWT_SKIP_PATHS: served without a token."""
        return path in self._skip or path.startswith(self._skip_under)

    def authenticate(self, authorization: str | None) -> Identity:
        """The caller's identity; AuthenticationFailed (401) or Unavailable (503)."""
        assert self.verifier is not None
        token = bearer_token(authorization)
        if not token:
            self.failed("missing")
            raise AuthenticationFailed("Authentication required")
        try:
            return self.verifier.verify(token)
        except InvalidToken as exc:
            self.failed(exc.kind)
            raise
        except Unavailable:
            self.failed("unavailable")
            raise

    def allows(self, identity: Identity, needed: Role) -> bool:
        """Whether the identity's role reaches `needed` (a refusal is counted)."""
        if identity.role >= needed:
            return True
        self.failed("forbidden")
        return False

    def failed(self, kind: str) -> None:
        self.failures[kind] += 1
        if self.observer is not None:
            self.observer.refused(kind)

    def stats(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "failures": dict(self.failures),
            **(self.verifier.stats() if self.verifier is not None else {}),
        }
