"""Authentication (JWT), browser origins (CORS) and the encryption key (docs/security.md)."""

from __future__ import annotations

from dataclasses import dataclass

from queen_threads.settings.parsers import boolean, csv_list, env, integer, text

JWT_ALGORITHMS = ("HS256", "RS256", "EdDSA", "auto")


def jwt_algorithm(raw: str) -> str:
    """One of JWT_ALGORITHMS, matched case-insensitively, returned in its canonical case."""
    value = raw.strip()
    for choice in JWT_ALGORITHMS:
        if value.lower() == choice.lower():
            return choice
    raise ValueError(f"expected one of {', '.join(JWT_ALGORITHMS)}, got {raw!r}")


def pem_or_path(raw: str) -> str:
    """A PEM text (`\\n` escapes allowed, as env files often carry them), or the path of a
    readable PEM file, whose text is returned."""
    value = raw.strip()
    if not value or "-----BEGIN" in value:
        return value.replace("\\n", "\n")
    try:
        with open(value, encoding="ascii") as pem:
            return pem.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"neither a PEM text nor a readable PEM file: {exc}") from None


def http_url(raw: str) -> str:
    value = raw.strip()
    if value and not value.lower().startswith(("http://", "https://")):
        raise ValueError(f"expected an http:// or https:// URL, got {raw!r}")
    return value


def paths(raw: str) -> tuple[str, ...]:
    listed = csv_list(raw)
    for path in listed:
        if not path.startswith("/"):
            raise ValueError(f"each path must start with '/', got {path!r}")
    return listed


def origins(raw: str) -> tuple[str, ...]:
    listed = csv_list(raw)
    for origin in listed:
        if origin != "*" and (
            not origin.lower().startswith(("http://", "https://"))
            or "/" in origin.split("://", 1)[1]
        ):
            raise ValueError(f"expected '*' or origins like https://app.example, got {origin!r}")
    if "*" in listed and len(listed) > 1:
        raise ValueError("'*' allows every origin: list origins or '*', not both")
    return listed


def hex_key(raw: str) -> str:
    value = raw.strip()
    if value and (len(value) != 64 or any(c not in "0123456789abcdefABCDEF" for c in value)):
        raise ValueError("must be exactly 64 hexadecimal characters (a 32-byte AES-256 key)")
    return value.lower()


@dataclass(frozen=True)
class AuthSettings:
    """Who may call the API, from which origins, and the key of encrypted queues."""

    jwt_enabled: bool = env(
        "JWT_ENABLED", False, boolean, "Require a JWT (Authorization: Bearer) on every API route."
    )
    jwt_algorithm: str = env(
        "JWT_ALGORITHM",
        "HS256",
        jwt_algorithm,
        "Accepted token algorithm: HS256, RS256, EdDSA or auto.",
    )
    jwt_secret: str = env(
        "JWT_SECRET", "", text, "HS256 shared secret (at least 32 bytes); never logged."
    )
    jwt_public_key: str = env(
        "JWT_PUBLIC_KEY",
        "",
        pem_or_path,
        "RS256/EdDSA public key or certificate: PEM text or a file.",
    )
    jwt_jwks_url: str = env(
        "JWT_JWKS_URL",
        "",
        http_url,
        "URL of the identity provider's JWKS (RS256/EdDSA keys by kid).",
    )
    jwt_issuer: str = env("JWT_ISSUER", "", text, "Required `iss` of every token (unset: any).")
    jwt_audience: tuple[str, ...] = env(
        "JWT_AUDIENCE",
        (),
        csv_list,
        "Comma list: a token's `aud` must name one (unset: not checked).",
    )
    jwt_clock_skew_s: int = env(
        "JWT_CLOCK_SKEW", 30, integer(0, 3600), "Leeway of the exp/nbf/iat checks, s."
    )
    jwt_skip_paths: tuple[str, ...] = env(
        "JWT_SKIP_PATHS",
        ("/health", "/metrics/prometheus", "/metrics", "/"),
        paths,
        "Comma list of paths served without a token (exact; `/x/*` covers everything under /x).",
    )
    cors_allowed_origins: tuple[str, ...] = env(
        "CORS_ALLOWED_ORIGINS",
        ("*",),
        origins,
        "Comma list of browser origins allowed to call the API, or * (any).",
    )

    # --- Encryption ------------------------------------------------------------------
    encryption_key: str = env(
        "QUEEN_ENCRYPTION_KEY",
        "",
        hex_key,
        "64 hex chars: AES-256-GCM key for queues with encryptionEnabled (unset: refused).",
    )
