"""Token verification with PyJWT: signature, algorithm, exp/nbf/iat (with the clock-skew
leeway), issuer, audience; then who the token speaks for (`Identity`).

Keys are loaded once (the secret's bytes, public key objects, the JWKS cache), so
verifying costs one signature check and no parsing of key material; a token that verified
is remembered for a while (auth/cache.py). `exp` is required: a token that never expires
is refused.
"""

from __future__ import annotations

from typing import Any

import jwt
from jwt import exceptions as jwt_errors

from queen_threads.auth.cache import VerifiedTokens
from queen_threads.auth.identity import Identity, InvalidToken
from queen_threads.auth.jwks import JwksCache, KeysUnavailable, UnknownKey
from queen_threads.auth.keys import FAMILIES, family_of, key_family
from queen_threads.auth.roles import role_of
from queen_threads.errors import Unavailable

KEYS_RETRY_AFTER_S = 5


# PyJWT's exceptions, most specific first, and the reason a client reads.
_REASONS: list[tuple[type[Exception], str]] = [
    (jwt_errors.ExpiredSignatureError, "Token has expired"),
    (jwt_errors.InvalidSignatureError, "Invalid token signature"),
    (jwt_errors.InvalidIssuerError, "Invalid token issuer"),
    (jwt_errors.InvalidAudienceError, "Invalid token audience"),
    (jwt_errors.ImmatureSignatureError, "Token is not yet valid"),
    (jwt_errors.InvalidAlgorithmError, "Token algorithm is not accepted"),
    (jwt_errors.DecodeError, "Malformed token"),
]


def invalid(exc: jwt_errors.PyJWTError) -> InvalidToken:
    if isinstance(exc, jwt_errors.MissingRequiredClaimError):
        return InvalidToken(f"Token has no '{exc.claim}' claim")
    for cls, reason in _REASONS:
        if isinstance(exc, cls):
            kind = "expired" if cls is jwt_errors.ExpiredSignatureError else "invalid"
            return InvalidToken(reason, kind)
    return InvalidToken(f"Invalid token: {exc}")


class TokenVerifier:
    """Verifies tokens of the configured algorithm family (or of every family that has a
    key, for `auto`), each family only with a key of its own type."""

    def __init__(
        self,
        *,
        families: tuple[str, ...],
        secret: str = "",
        public_key: Any = None,
        jwks: JwksCache | None = None,
        issuer: str = "",
        audience: tuple[str, ...] = (),
        leeway_s: int = 30,
    ) -> None:
        self._static: dict[str, Any] = {}
        if secret and "HS256" in families:
            self._static["HS256"] = secret.encode("utf-8")
        if public_key is not None and key_family(public_key) in families:
            self._static[str(key_family(public_key))] = public_key
        self.jwks = jwks
        self._jwks_families = (
            tuple(f for f in families if f != "HS256" and f not in self._static) if jwks else ()
        )
        self.families = tuple(self._static) + self._jwks_families
        self.algorithms = tuple(alg for family in self.families for alg in FAMILIES[family])
        # One static key and no JWKS: no need to read the header first.
        self._single: tuple[Any, list[str]] | None = None
        if len(self._static) == 1 and not self._jwks_families:
            family, key = next(iter(self._static.items()))
            self._single = (key, list(FAMILIES[family]))
        self._issuer = issuer or None
        self._audience = list(audience) or None
        self._options: Any = {"require": ["exp"], "verify_aud": bool(audience)}
        self._leeway = leeway_s
        self.verified: VerifiedTokens[Identity] = VerifiedTokens()

    def start(self) -> None:
        if self.jwks is not None:
            self.jwks.start()

    def verify(self, token: str) -> Identity:
        """The token's identity; InvalidToken (401) when it does not verify, Unavailable
        (503) when the identity provider's keys cannot be fetched."""
        identity = self.verified.get(token)
        if identity is not None:
            return identity
        try:
            key, algorithms = self._single or self._key_for(token)
            claims = jwt.decode(
                token,
                key,
                algorithms=algorithms,
                options=self._options,
                issuer=self._issuer,
                audience=self._audience,
                leeway=self._leeway,
            )
        except jwt_errors.PyJWTError as exc:
            raise invalid(exc) from None
        sub = claims.get("sub")
        identity = Identity(sub if isinstance(sub, str) and sub else None, role_of(claims))
        self.verified.put(token, identity, float(claims["exp"]) + self._leeway)
        return identity

    def _key_for(self, token: str) -> tuple[Any, list[str]]:
        header = jwt.get_unverified_header(token)
        alg = header.get("alg")
        family = family_of(alg) if isinstance(alg, str) else None
        if not isinstance(alg, str) or family is None or family not in self.families:
            accepted = ", ".join(self.algorithms)
            raise InvalidToken(f"Token algorithm {alg!r} is not accepted (accepted: {accepted})")
        static = self._static.get(family)
        if static is not None:
            return static, [alg]
        kid = header.get("kid")
        assert self.jwks is not None
        try:
            return self.jwks.key(kid if isinstance(kid, str) else None, family), [alg]
        except UnknownKey as exc:
            raise InvalidToken(f"Unknown signing key: {exc}") from None
        except KeysUnavailable as exc:
            raise Unavailable(str(exc), KEYS_RETRY_AFTER_S) from None

    def stats(self) -> dict[str, Any]:
        return {
            "algorithms": list(self.algorithms),
            "verifiedTokensCached": len(self.verified),
            "jwks": self.jwks.stats() if self.jwks is not None else None,
        }
