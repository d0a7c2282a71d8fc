"""Token verification (PyJWT underneath): what passes, what is refused and why."""

from __future__ import annotations

import time
from typing import Any

import pytest

from queen_threads.auth import InvalidToken, Role, TokenVerifier, bearer_token, build_verifier
from queen_threads.auth.keys import load_public_key
from queen_threads.settings import load_settings
from tests.support.tokens import (
    SECRET,
    claims,
    ed_key,
    forged_hs256,
    hs256,
    public_pem,
    rsa_key,
    sign,
    unsigned,
)


def verifier(**env: str) -> TokenVerifier:
    made = build_verifier(load_settings({"JWT_ENABLED": "true"} | env, dotenv_path=None))
    assert made is not None
    return made


HS = {"JWT_SECRET": SECRET}


def refused(v: TokenVerifier, token: str) -> InvalidToken:
    with pytest.raises(InvalidToken) as caught:
        v.verify(token)
    return caught.value


def test_a_valid_token_gives_its_sub_and_role() -> None:
    identity = verifier(**HS).verify(hs256("alice", "read-write"))
    assert (identity.sub, identity.role) == ("alice", Role.READ_WRITE)


@pytest.mark.parametrize(
    ("extra", "role"),
    [({"role": "admin"}, Role.ADMIN), ({"role": "read-only"}, Role.READ_ONLY),
     ({"roles": ["read-only", "admin", "x"]}, Role.ADMIN),
     ({"roles": ["read-write"]}, Role.READ_WRITE),
     ({"role": "superuser"}, Role.NONE), ({"roles": "admin"}, Role.NONE), ({}, Role.NONE),
     ({"role": "read-only", "roles": ["read-write"]}, Role.READ_WRITE)],
)  # fmt: skip
def test_role_is_the_highest_known_one_of_role_and_roles(extra: dict[str, Any], role: Role) -> None:
    token = sign(SECRET, "HS256", claims(role=None) | extra)
    assert verifier(**HS).verify(token).role is role


def test_a_token_without_sub_has_no_identity_name() -> None:
    assert verifier(**HS).verify(hs256(sub=None)).sub is None


def test_expired_and_skew() -> None:
    v = verifier(**HS, JWT_CLOCK_SKEW="30")
    assert v.verify(hs256(exp_in=-10)).sub == "alice"  # within the leeway
    err = refused(v, hs256(exp_in=-60))
    assert (str(err), err.kind) == ("Token has expired", "expired")
    assert str(refused(verifier(**HS, JWT_CLOCK_SKEW="0"), hs256(exp_in=-2))) == "Token has expired"


def test_not_yet_valid() -> None:
    token = sign(SECRET, "HS256", claims(nbf=int(claims()["iat"]) + 600))
    assert str(refused(verifier(**HS), token)) == "Token is not yet valid"


def test_exp_is_required() -> None:
    body = claims()
    del body["exp"]
    assert str(refused(verifier(**HS), sign(SECRET, "HS256", body))) == "Token has no 'exp' claim"


def test_wrong_signature() -> None:
    token = hs256(secret="another-secret-of-at-least-32-bytes!!")
    assert str(refused(verifier(**HS), token)) == "Invalid token signature"


def test_issuer_and_audience() -> None:
    v = verifier(**HS, JWT_ISSUER="https://idp.example", JWT_AUDIENCE="queen,queen-admin")
    good = claims(iss="https://idp.example", aud=["other", "queen"])
    assert v.verify(sign(SECRET, "HS256", good)).sub == "alice"
    wrong_iss = good | {"iss": "https://evil.example"}
    assert str(refused(v, sign(SECRET, "HS256", wrong_iss))) == "Invalid token issuer"
    wrong_aud = good | {"aud": "someone-else"}
    assert str(refused(v, sign(SECRET, "HS256", wrong_aud))) == "Invalid token audience"
    no_aud = {k: val for k, val in good.items() if k != "aud"}
    assert str(refused(v, sign(SECRET, "HS256", no_aud))) == "Token has no 'aud' claim"
    # Without JWT_AUDIENCE the claim is not checked (tokens of a shared identity provider).
    assert verifier(**HS).verify(sign(SECRET, "HS256", wrong_aud)).sub == "alice"


@pytest.mark.parametrize("algorithm", ["HS256", "auto"])
def test_alg_none_is_refused(algorithm: str) -> None:
    err = refused(verifier(**HS, JWT_ALGORITHM=algorithm), unsigned(claims(role="admin")))
    assert "not accepted" in str(err)


def test_malformed_tokens() -> None:
    for token in ("abc", "a.b.c", "Bearer", "....."):
        assert str(refused(verifier(**HS), token)) == "Malformed token"
    assert str(refused(verifier(**HS, JWT_ALGORITHM="auto"), "a.b.c")) == "Malformed token"


def test_algorithm_confusion_hs256_signed_with_the_public_key_is_refused() -> None:
    key = rsa_key()
    pem = public_pem(key)
    forged = forged_hs256(claims(role="admin"), pem.encode())
    rs_only = verifier(JWT_ALGORITHM="RS256", JWT_PUBLIC_KEY=pem)
    assert "not accepted" in str(refused(rs_only, forged))
    # auto with both kinds of key: an HS256 token is only ever checked against the secret
    both = verifier(JWT_ALGORITHM="auto", JWT_PUBLIC_KEY=pem, **HS)
    assert str(refused(both, forged)) == "Invalid token signature"
    assert both.verify(sign(key, "RS256", claims())).sub == "alice"
    assert both.verify(hs256()).sub == "alice"


def test_rs256_accepts_rs384_and_rs512_but_not_other_families() -> None:
    key = rsa_key()
    v = verifier(JWT_ALGORITHM="RS256", JWT_PUBLIC_KEY=public_pem(key))
    for alg in ("RS256", "RS384", "RS512"):
        assert v.verify(sign(key, alg, claims(role="admin"))).role is Role.ADMIN
    assert "not accepted" in str(refused(v, sign(key, "PS256", claims())))
    assert str(refused(v, sign(rsa_key(), "RS256", claims()))) == "Invalid token signature"


def test_eddsa_with_a_public_key() -> None:
    key = ed_key()
    v = verifier(JWT_ALGORITHM="EdDSA", JWT_PUBLIC_KEY=public_pem(key))
    assert v.verify(sign(key, "EdDSA", claims(sub="bob"))).sub == "bob"
    assert str(refused(v, sign(ed_key(), "EdDSA", claims()))) == "Invalid token signature"
    assert "not accepted" in str(refused(v, hs256()))


def test_a_certificate_is_a_public_key_too(tmp_path: Any) -> None:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import NameOID

    key = rsa_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "idp")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(1)
        .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    path = tmp_path / "idp.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    v = verifier(JWT_ALGORITHM="RS256", JWT_PUBLIC_KEY=str(path))
    assert v.verify(sign(key, "RS256", claims())).sub == "alice"


def test_a_pem_in_one_env_line_with_escaped_newlines() -> None:
    key = ed_key()
    one_line = public_pem(key).replace("\n", "\\n")
    v = verifier(JWT_ALGORITHM="EdDSA", JWT_PUBLIC_KEY=one_line)
    assert v.verify(sign(key, "EdDSA", claims())).sub == "alice"


def test_load_public_key_refuses_what_it_cannot_use() -> None:
    with pytest.raises(ValueError, match="not a PEM"):
        load_public_key("-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----")


@pytest.mark.parametrize(
    ("header", "token"),
    [("Bearer abc.def", "abc.def"), ("bearer abc", "abc"), ("BEARER   abc ", "abc"),
     ("abc.def", "abc.def"), ("  abc  ", "abc"), ("", ""), (None, ""), ("Bearer ", "")],
)  # fmt: skip
def test_bearer_prefix_any_case_or_a_bare_token(header: str | None, token: str) -> None:
    assert bearer_token(header) == token


# -- the verified-token cache ---------------------------------------------------------------
def counting_decode(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from queen_threads.auth import tokens

    calls: list[str] = []
    real = tokens.jwt.decode

    def decode(token: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(token)
        return real(token, *args, **kwargs)

    monkeypatch.setattr(tokens.jwt, "decode", decode)
    return calls


def test_a_verified_token_is_checked_once_then_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting_decode(monkeypatch)
    v = verifier(**HS)
    token = hs256("carol", "admin")
    for _ in range(5):
        assert v.verify(token).sub == "carol"
    assert len(calls) == 1
    bad = hs256(secret="another-secret-of-at-least-32-bytes!!")
    for _ in range(3):
        refused(v, bad)
    assert len(calls) == 4, "a refused token is never remembered"


def test_a_remembered_token_is_checked_again_once_its_entry_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from queen_threads.auth import cache

    calls = counting_decode(monkeypatch)
    v = verifier(**HS, JWT_CLOCK_SKEW="0")
    token = hs256(exp_in=2)
    v.verify(token)
    entry_end = time.time() + 2.5
    monkeypatch.setattr(cache.time, "time", lambda: entry_end)
    v.verify(token)  # PyJWT's own clock still says valid; the point: it was asked again
    assert len(calls) == 2


def test_verified_tokens_are_bounded_in_time_and_number() -> None:
    from queen_threads.auth.cache import VerifiedTokens

    tokens: VerifiedTokens[str] = VerifiedTokens(size=2, ttl_s=60)
    now = time.time()
    tokens.put("a", "A", now + 30)
    tokens.put("gone", "G", now - 1)
    assert tokens.get("a") == "A" and tokens.get("gone") is None
    tokens.put("b", "B", now + 30)
    tokens.put("c", "C", now + 30)
    assert (tokens.get("a"), tokens.get("b"), tokens.get("c")) == (None, "B", "C")
    short: VerifiedTokens[str] = VerifiedTokens(ttl_s=0)
    short.put("x", "X", now + 3600)
    assert short.get("x") is None  # TTL_S caps an entry whatever the token's exp
