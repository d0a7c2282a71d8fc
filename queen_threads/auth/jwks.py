"""The identity provider's public keys (JWT_JWKS_URL), fetched and kept in memory.

Verifying a token never waits for the network when its `kid` is known. The set is fetched
when a worker starts, again in the background once it is `LIFESPAN_S` old (a request
that notices keeps using the keys it has), and at once when a token names an unknown
`kid` (a key rotated in) — but such a refresh happens at most once per `COOLDOWN_S` per
process, so tokens with made-up kids cannot make the server fetch on every request. One
fetch runs at a time; requests that need its result wait for it. A failed fetch keeps the
keys already known.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from jwt import PyJWK, PyJWKSet

from queen_threads.auth.keys import key_family

log = logging.getLogger("queen_threads.auth")

LIFESPAN_S = 300.0
COOLDOWN_S = 30.0
TIMEOUT_S = 5.0
MAX_BYTES = 1 << 20


class KeysUnavailable(Exception):
    """The key set could not be fetched and no key for the token is known."""


class UnknownKey(Exception):
    """The key set (freshly fetched, or within the cooldown) has no key for the token."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the configured URL, not wherever it points to


def fetch_json(url: str) -> Any:
    """GET `url` and parse its JSON body (at most MAX_BYTES, no redirects)."""
    opener = urllib.request.build_opener(_NoRedirects)
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with opener.open(request, timeout=TIMEOUT_S) as response:
        return json.loads(response.read(MAX_BYTES + 1)[:MAX_BYTES])


def signing_keys(document: Any) -> dict[str | None, PyJWK]:
    """The usable public signing keys of a JWKS document, by kid. Symmetric (`oct`) keys,
    encryption keys and private keys are left out."""
    if not isinstance(document, dict):
        raise ValueError("the JWKS is not a JSON object")
    keys = {}
    for jwk in PyJWKSet.from_dict(document).keys:
        if jwk.public_key_use in ("sig", None) and key_family(jwk.key) is not None:
            keys[jwk.key_id] = jwk
    if not keys:
        raise ValueError("the JWKS holds no RSA or Ed25519/Ed448 public signing key")
    return keys


class JwksCache:
    def __init__(self, url: str, fetch: Callable[[str], Any] = fetch_json) -> None:
        self.url = url
        self._fetch = fetch
        self._keys: dict[str | None, PyJWK] = {}
        self._loaded_at: float | None = None
        # monotonic times of the last fetch, and of the last one an unknown kid asked for
        self._last_attempt = -math.inf
        self._last_forced = -math.inf
        self._lock = threading.Lock()
        self._inflight: threading.Event | None = None
        self._generation = 0  # fetches finished
        self.fetches = 0
        self.failures = 0
        self.last_error: str | None = None

    def start(self) -> None:
        """Fetch the set in the background (a worker process is starting)."""
        self._refresh(wait=False)

    def key(self, kid: str | None, family: str) -> Any:
        """The public key for a token's `kid` and algorithm family."""
        seen = self._generation
        jwk = self._lookup(kid, family)
        if jwk is not None:
            if self._loaded_at is not None and time.monotonic() - self._loaded_at > LIFESPAN_S:
                self._refresh(wait=False, unless_tried_within=COOLDOWN_S)
            return jwk.key
        self._refresh_for_unknown(seen)
        jwk = self._lookup(kid, family)
        if jwk is not None:
            return jwk.key
        if self._loaded_at is None:
            raise KeysUnavailable(
                f"the identity provider's keys are unavailable: {self.last_error}"
            )
        raise UnknownKey("no key for the token's kid" if kid else "the token names no kid")

    def _refresh_for_unknown(self, seen: int) -> None:
        """Unless a fetch has finished since the caller looked (generation `seen`): wait
        for the fetch in flight, or start one if none was started so within COOLDOWN_S."""
        with self._lock:
            if self._generation != seen:
                return
            done = self._inflight
            if done is None:
                now = time.monotonic()
                if now - self._last_forced < COOLDOWN_S:
                    return
                self._last_forced = now
                done = self._start_locked()
        # Decided under the lock: a fetch that ends meanwhile is the one waited for, not a
        # reason to start another.
        done.wait(TIMEOUT_S * 2)

    def _lookup(self, kid: str | None, family: str) -> PyJWK | None:
        keys = self._keys
        if kid is None:  # without a kid, only an unambiguous set will do
            fitting = [jwk for jwk in keys.values() if key_family(jwk.key) == family]
            return fitting[0] if len(fitting) == 1 else None
        jwk = keys.get(kid)
        return jwk if jwk is not None and key_family(jwk.key) == family else None

    def _refresh(self, wait: bool, unless_tried_within: float = 0.0) -> None:
        """Start a fetch unless one is running (or one started less than
        `unless_tried_within` seconds ago); with `wait`, return once it has finished."""
        with self._lock:
            done = self._inflight
            if done is None:
                if time.monotonic() - self._last_attempt < unless_tried_within:
                    return
                done = self._start_locked()
        if wait:
            done.wait(TIMEOUT_S * 2)

    def _start_locked(self) -> threading.Event:
        """Start a fetch in the background (lock held); set when it has finished."""
        self._last_attempt = time.monotonic()
        done = self._inflight = threading.Event()
        threading.Thread(target=self._run, args=(done,), name="jwks", daemon=True).start()
        return done

    def _run(self, done: threading.Event) -> None:
        keys, recovered = None, False
        self.fetches += 1
        try:
            keys = signing_keys(self._fetch(self.url))
        except Exception as exc:  # unreachable, not JSON, no usable key...: keep what is known
            self.failures += 1
            self.last_error = str(exc) or type(exc).__name__
            log.warning("JWKS fetch from %s failed: %s", self.url, self.last_error)
        finally:
            with self._lock:  # new keys appear together with the end of the fetch
                self._inflight = None
                if keys is not None:
                    self._keys, self._loaded_at = keys, time.monotonic()
                    recovered, self.last_error = self.last_error is not None, None
                self._generation += 1
            done.set()
        if recovered:
            log.warning("JWKS fetched again from %s", self.url)

    def stats(self) -> dict[str, Any]:
        age = None if self._loaded_at is None else round(time.monotonic() - self._loaded_at, 1)
        return {
            "keys": len(self._keys),
            "ageSeconds": age,
            "fetches": self.fetches,
            "failures": self.failures,
            "lastError": self.last_error,
        }
