"""The JWT_* settings made into a TokenVerifier, or a ConfigError saying what is missing.

Checked when the gunicorn master and `queen-threads serve` start (a server with
JWT_ENABLED=true and no usable key does not start) and again in each worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from queen_threads.errors import ConfigError
from queen_threads.settings import Settings

if TYPE_CHECKING:
    from queen_threads.auth.tokens import TokenVerifier

_SECRET_HINT = "generate one with `openssl rand -hex 32`"


def build_verifier(s: Settings) -> TokenVerifier | None:
    """None when JWT_ENABLED is false (every JWT_* key setting is then ignored)."""
    if not s.jwt_enabled:
        return None
    # PyJWT and cryptography load only on a server that verifies tokens (~5 MB a process)
    from queen_threads.auth.jwks import JwksCache
    from queen_threads.auth.keys import FAMILIES, MIN_SECRET_BYTES, key_family, load_public_key
    from queen_threads.auth.tokens import TokenVerifier

    algorithm = s.jwt_algorithm
    families = tuple(FAMILIES) if algorithm == "auto" else (algorithm,)
    asymmetric = [f for f in families if f != "HS256"]
    if s.jwt_public_key and s.jwt_jwks_url:
        raise ConfigError("set JWT_PUBLIC_KEY or JWT_JWKS_URL, not both")
    if s.jwt_secret and "HS256" not in families:
        raise ConfigError(
            f"JWT_SECRET is set but JWT_ALGORITHM={algorithm} never uses it: unset it, or "
            "use JWT_ALGORITHM=auto to accept HS256 tokens too"
        )
    if (s.jwt_public_key or s.jwt_jwks_url) and not asymmetric:
        raise ConfigError(
            "JWT_PUBLIC_KEY/JWT_JWKS_URL are set but JWT_ALGORITHM=HS256 never uses them: "
            "use JWT_ALGORITHM=RS256, EdDSA or auto"
        )
    if s.jwt_secret and len(s.jwt_secret.encode("utf-8")) < MIN_SECRET_BYTES:
        raise ConfigError(
            f"JWT_SECRET must be at least {MIN_SECRET_BYTES} bytes for HS256 (RFC 7518 3.2); "
            + _SECRET_HINT
        )
    public_key = None
    if s.jwt_public_key:
        try:
            public_key = load_public_key(s.jwt_public_key)
        except ValueError as exc:
            raise ConfigError(f"invalid JWT_PUBLIC_KEY: {exc}") from None
        if key_family(public_key) not in families:
            raise ConfigError(
                f"JWT_PUBLIC_KEY holds a {type(public_key).__name__}, which cannot verify "
                f"{algorithm} tokens"
            )
    if not (s.jwt_secret or public_key is not None or s.jwt_jwks_url):
        needs = {
            "HS256": f"JWT_SECRET ({_SECRET_HINT})",
            "auto": "JWT_SECRET, JWT_PUBLIC_KEY or JWT_JWKS_URL",
        }.get(algorithm, "JWT_PUBLIC_KEY (a PEM text or file) or JWT_JWKS_URL")
        raise ConfigError(
            f"JWT_ENABLED is true but there is no key to verify tokens with: "
            f"JWT_ALGORITHM={algorithm} needs {needs}"
        )
    return TokenVerifier(
        families=families,
        secret=s.jwt_secret,
        public_key=public_key,
        jwks=JwksCache(s.jwt_jwks_url) if s.jwt_jwks_url else None,
        issuer=s.jwt_issuer,
        audience=s.jwt_audience,
        leeway_s=s.jwt_clock_skew_s,
    )
