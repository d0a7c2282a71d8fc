"""The JWKS cache: keys served from memory, a refresh for an unknown kid at most once per
cooldown, a failed fetch keeps what is known (the fetch itself is a stub here; the
acceptance tests fetch over HTTP)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from queen_threads.auth import jwks as jwks_module
from queen_threads.auth.jwks import JwksCache, KeysUnavailable, UnknownKey, signing_keys
from tests.support.tokens import ed_key, jwks, rsa_key

A, B = rsa_key(), rsa_key()


class Endpoint:
    """Stands for the identity provider: serves `document` (or raises `error`)."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.error: Exception | None = None
        self.fetches = 0
        self.entered = threading.Event()  # set by every fetch as it starts
        self.release = threading.Event()
        self.release.set()

    def __call__(self, url: str) -> Any:
        self.fetches += 1
        self.entered.set()
        self.release.wait(5)
        if self.error is not None:
            raise self.error
        return self.document


def loaded(endpoint: Endpoint) -> JwksCache:
    cache = JwksCache("https://idp/jwks", fetch=endpoint)
    cache.start()
    assert cache.key("a", "RS256") is not None  # waits for the start fetch to finish
    return cache


def test_known_kids_never_fetch_again() -> None:
    endpoint = Endpoint(jwks(a=A))
    cache = loaded(endpoint)
    for _ in range(50):
        cache.key("a", "RS256")
    assert endpoint.fetches == 1


def test_an_unknown_kid_refreshes_once_per_cooldown(monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint = Endpoint(jwks(a=A))
    cache = loaded(endpoint)
    endpoint.document = jwks(a=A, b=B)  # key b rotated in
    assert cache.key("b", "RS256").public_numbers() == B.public_key().public_numbers()
    assert endpoint.fetches == 2
    for kid in ("made-up-1", "made-up-2", "made-up-3"):
        with pytest.raises(UnknownKey):
            cache.key(kid, "RS256")
    assert endpoint.fetches == 2  # the refresh for b was this cooldown's one
    monkeypatch.setattr(jwks_module, "COOLDOWN_S", 0.0)
    with pytest.raises(UnknownKey):
        cache.key("made-up-4", "RS256")
    assert endpoint.fetches == 3


def test_a_key_of_another_family_does_not_match_its_kid() -> None:
    cache = loaded(Endpoint(jwks(a=A, e=ed_key())))
    assert cache.key("e", "EdDSA") is not None
    with pytest.raises(UnknownKey):
        cache.key("e", "RS256")


def test_without_a_kid_only_an_unambiguous_set_will_do() -> None:
    cache = loaded(Endpoint(jwks(a=A, e=ed_key())))
    assert cache.key(None, "RS256") is not None  # the only RSA key
    two = loaded(Endpoint(jwks(a=A, b=B)))
    with pytest.raises(UnknownKey, match="names no kid"):
        two.key(None, "RS256")


def test_unreachable_at_start_then_rate_limited(monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint = Endpoint(jwks(a=A))
    endpoint.error = OSError("connection refused")
    cache = JwksCache("https://idp/jwks", fetch=endpoint)
    cache.start()
    with pytest.raises(KeysUnavailable, match="connection refused"):
        cache.key("a", "RS256")  # waits for the start fetch, then one fetch of its own
    for _ in range(20):
        with pytest.raises(KeysUnavailable):
            cache.key("a", "RS256")
    assert endpoint.fetches <= 2  # the start and one for the unknown kid, not one per request
    endpoint.error = None
    monkeypatch.setattr(jwks_module, "COOLDOWN_S", 0.0)
    assert cache.key("a", "RS256") is not None
    assert cache.stats()["lastError"] is None


def test_a_failed_refresh_keeps_the_known_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint = Endpoint(jwks(a=A))
    cache = loaded(endpoint)
    endpoint.error = OSError("down")
    with pytest.raises(UnknownKey):
        cache.key("b", "RS256")
    assert cache.key("a", "RS256") is not None
    assert cache.stats()["failures"] == 1


def test_a_stale_set_is_refreshed_in_the_background(monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint = Endpoint(jwks(a=A))
    cache = loaded(endpoint)
    monkeypatch.setattr(jwks_module, "LIFESPAN_S", 0.0)
    monkeypatch.setattr(jwks_module, "COOLDOWN_S", 0.0)
    endpoint.release.clear()  # the refresh hangs: the request must not wait for it
    endpoint.entered.clear()
    endpoint.document = jwks(b=B)
    assert cache.key("a", "RS256") is not None
    assert endpoint.entered.wait(5)  # the refresh started, in the background
    assert endpoint.fetches == 2
    endpoint.release.set()
    assert cache.key("b", "RS256") is not None  # waits for the refresh in flight
    with pytest.raises(UnknownKey):  # key a left the set
        cache.key("a", "RS256")


def test_only_public_signing_keys_of_known_types_are_kept() -> None:
    document = jwks(a=A)
    document["keys"] += [
        {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA"},
        jwks(enc=B)["keys"][0] | {"use": "enc"},
    ]
    assert set(signing_keys(document)) == {"a"}
    with pytest.raises(ValueError, match="no RSA or Ed25519"):
        signing_keys({"keys": document["keys"][1:]})
    with pytest.raises(ValueError, match="not a JSON object"):
        signing_keys(["a"])
