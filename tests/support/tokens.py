"""Keys, tokens and a JWKS endpoint for the authentication tests (PyJWT signs every token
except the forged ones, which are built by hand on purpose)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.server
import json
import threading
import time
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from jwt.algorithms import OKPAlgorithm, RSAAlgorithm

SECRET = "queen-threads-test-secret-0123456789abcdef"  # >= 32 bytes, as HS256 needs


def claims(sub: str | None = "alice", role: str | None = "read-write", exp_in: float = 3600,
           **extra: Any) -> dict[str, Any]:  # fmt: skip
    now = int(time.time())
    body: dict[str, Any] = {"iat": now, "exp": int(now + exp_in)}
    if sub is not None:
        body["sub"] = sub
    if role is not None:
        body["role"] = role
    return body | extra


def hs256(sub: str | None = "alice", role: str | None = "read-write", *, secret: str = SECRET,
          **extra: Any) -> str:  # fmt: skip
    return jwt.encode(claims(sub, role, **extra), secret, algorithm="HS256")


def sign(key: Any, alg: str, body: dict[str, Any], kid: str | None = None) -> str:
    return jwt.encode(body, key, algorithm=alg, headers={"kid": kid} if kid else None)


def unsigned(body: dict[str, Any]) -> str:
    """An `alg: none` token."""
    return jwt.encode(body, None, algorithm="none")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forged_hs256(body: dict[str, Any], hmac_key: bytes) -> str:
    """An HS256 token whose HMAC key is `hmac_key` (e.g. a public key's PEM: the algorithm
    confusion attack; PyJWT itself refuses to sign that)."""
    head = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64(json.dumps(body).encode())
    tag = hmac.new(hmac_key, f"{head}.{payload}".encode(), hashlib.sha256).digest()
    return f"{head}.{payload}.{_b64(tag)}"


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def ed_key() -> ed25519.Ed25519PrivateKey:
    return ed25519.Ed25519PrivateKey.generate()


def public_pem(private: rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey) -> str:
    return (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def jwks(**keys: rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey) -> dict[str, Any]:
    """A JWKS document with the public half of each key under its kid."""
    out = []
    for kid, private in keys.items():
        public = private.public_key()
        if isinstance(public, rsa.RSAPublicKey):
            jwk = RSAAlgorithm.to_jwk(public, as_dict=True)
        else:
            jwk = OKPAlgorithm.to_jwk(public, as_dict=True)
        out.append(jwk | {"kid": kid, "use": "sig"})
    return {"keys": out}


class JwksServer:
    """A JWKS endpoint on a free loopback port: serves `document`, counts the fetches."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.fetches = 0
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.fetches += 1
                body = json.dumps(owner.document).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/.well-known/jwks.json"

    def __enter__(self) -> JwksServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
