"""Key material: algorithm families, and public keys loaded once from PEM.

A token's `alg` header picks its family, and each family verifies only with a key of its
own type: an HS256 token is checked against JWT_SECRET and never against a public key (the
classic algorithm confusion), an RS256 token only against an RSA key, an EdDSA token only
against an Ed25519/Ed448 key. `none` belongs to no family.
"""

from __future__ import annotations

from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.ed448 import Ed448PublicKey
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key

PublicKey = RSAPublicKey | Ed25519PublicKey | Ed448PublicKey

# JWT_ALGORITHM -> the `alg` values it accepts (RS256 also takes RS384/RS512, as the
# original server does).
FAMILIES: dict[str, tuple[str, ...]] = {
    "HS256": ("HS256",),
    "RS256": ("RS256", "RS384", "RS512"),
    "EdDSA": ("EdDSA",),
}
_KEY_TYPES: dict[str, tuple[type[Any], ...]] = {
    "RS256": (RSAPublicKey,),
    "EdDSA": (Ed25519PublicKey, Ed448PublicKey),
}
MIN_SECRET_BYTES = 32  # RFC 7518 3.2: an HS256 key at least as long as the hash


def family_of(alg: str) -> str | None:
    """The JWT_ALGORITHM family an `alg` header value belongs to (None: not accepted)."""
    return next((name for name, algs in FAMILIES.items() if alg in algs), None)


def fits(family: str, key: Any) -> bool:
    """Whether `key` (a public key object) may verify tokens of `family`."""
    return isinstance(key, _KEY_TYPES.get(family, ()))


def key_family(key: Any) -> str | None:
    return next((family for family in _KEY_TYPES if fits(family, key)), None)


def load_public_key(pem: str) -> PublicKey:
    """An RSA or Ed25519/Ed448 public key from a PEM public key or X.509 certificate;
    ValueError naming what is wrong otherwise."""
    data = pem.encode("ascii", "replace")
    try:
        if b"-----BEGIN CERTIFICATE-----" in data:
            key: Any = x509.load_pem_x509_certificate(data).public_key()
        else:
            key = load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not a PEM public key or certificate ({exc})") from None
    if key_family(key) is None:
        raise ValueError(f"a {type(key).__name__}: only RSA and Ed25519/Ed448 keys are supported")
    return key
