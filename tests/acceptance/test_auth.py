"""JWT authentication through real HTTP against the real server (gunicorn -k gevent):
roles against every class of route, refused tokens, producerSub from the token, long
polls checked when they start, the peer route, CORS, counters and logs, and the official
client with a bearer token."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg2
import pytest
from prometheus_client.parser import text_string_to_metric_families
from queen import Queen

from queen_threads.embedded import free_port
from tests.acceptance.conftest import open_client
from tests.acceptance.test_long_poll import Waiter, wait_registered
from tests.conftest import database_from_template
from tests.support.server import ServerProcess
from tests.support.tokens import (
    SECRET,
    JwksServer,
    claims,
    ed_key,
    forged_hs256,
    jwks,
    public_pem,
    rsa_key,
    sign,
    unsigned,
)

ISSUER, AUDIENCE, PEER_SECRET = "https://idp.test", "queen", "peer-secret-for-the-auth-tests"
ORIGIN = "https://app.example"


def token(role: str | None = "read-write", sub: str | None = "alice", **extra: Any) -> str:
    return sign(SECRET, "HS256", claims(sub, role, iss=ISSUER, aud=AUDIENCE) | extra)


def bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


@pytest.fixture(scope="module")
def dsn(pg_admin_dsn: str, template_db: str) -> Iterator[str]:
    with database_from_template(pg_admin_dsn, template_db) as dsn:
        yield dsn


@pytest.fixture(scope="module")
def srv(dsn: str) -> Iterator[ServerProcess]:
    """One worker process, so that its /metrics describes every request of the module."""
    with ServerProcess(
        dsn, workers=1, JWT_ENABLED="true", JWT_SECRET=SECRET, JWT_ISSUER=ISSUER,
        JWT_AUDIENCE=AUDIENCE, JWT_CLOCK_SKEW="0", QUEEN_PEER_SECRET=PEER_SECRET,
        CORS_ALLOWED_ORIGINS=ORIGIN,
    ) as server:  # fmt: skip
        yield server


@pytest.fixture
def http(srv: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=srv.url, timeout=15) as client:
        yield client


def qname() -> str:
    return f"auth-{uuid.uuid4().hex[:10]}"


def stored_producer_sub(dsn: str, queue: str) -> list[str | None]:
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT m.producer_sub FROM queen.messages m"
            " JOIN queen.partitions p ON p.id = m.partition_id"
            " JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = %s ORDER BY m.id",
            (queue,),
        )
        rows = [row[0] for row in cur.fetchall()]
    conn.close()
    return rows


# -- roles against a route of each class ----------------------------------------------------
def call(http: httpx.Client, route: str, headers: dict[str, str]) -> httpx.Response:
    """One request of each access class (a fresh queue each, so that allowed calls work)."""
    q = qname()
    if route == "read-only":
        return http.get("/api/v1/resources/queues", headers=headers)
    if route == "read-write":
        return http.post("/api/v1/push", json={"items": [{"queue": q, "payload": 1}]},
                         headers=headers)  # fmt: skip
    if route == "admin":
        return http.get("/api/v1/system/maintenance", headers=headers)
    assert route == "admin-delete"
    http.post("/api/v1/configure", json={"queue": q}, headers=bearer(token("admin")))
    return http.delete(f"/api/v1/resources/queues/{q}", headers=headers)


LEVEL = {"read-only": 1, "read-write": 2, "admin": 3, "admin-delete": 3}


@pytest.mark.parametrize("route", ["read-only", "read-write", "admin", "admin-delete"])
@pytest.mark.parametrize("role", ["read-only", "read-write", "admin", "none"])
def test_each_role_against_each_class_of_route(http: httpx.Client, role: str, route: str) -> None:
    rank = {"none": 0, "read-only": 1, "read-write": 2, "admin": 3}[role]
    r = call(http, route, bearer(token(role if role != "none" else None)))
    if rank >= LEVEL[route]:
        assert r.status_code in (200, 201), r.text
    else:
        assert (r.status_code, r.json()) == (403, {"error": "Insufficient permissions"})


@pytest.mark.parametrize("route", ["read-only", "read-write", "admin", "admin-delete"])
def test_no_token_is_401_everywhere(http: httpx.Client, route: str) -> None:
    r = call(http, route, {})
    assert (r.status_code, r.json()) == (401, {"error": "Authentication required"})
    assert r.headers["WWW-Authenticate"] == "Bearer"


def test_the_roles_array_and_the_bearer_prefix_in_any_case(http: httpx.Client) -> None:
    admin_by_array = token(None, roles=["read-only", "admin"])
    assert http.get("/api/v1/system/maintenance", headers=bearer(admin_by_array)).status_code == 200
    for header in (f"bearer {token()}", f"BEARER {token()}", token()):
        r = http.get("/api/v1/resources/queues", headers={"Authorization": header})
        assert r.status_code == 200, (header[:8], r.text)


def test_skip_paths_and_preflight_need_no_token(http: httpx.Client) -> None:
    for path in ("/health", "/metrics", "/metrics/prometheus"):
        assert http.get(path).status_code == 200, path
    preflight = http.options("/api/v1/push", headers={"Origin": ORIGIN})
    assert preflight.status_code == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert "Authorization" in preflight.headers["Access-Control-Allow-Headers"]


def test_a_method_a_route_does_not_serve_needs_a_token_then_is_405(http: httpx.Client) -> None:
    assert http.put("/api/v1/push").status_code == 401
    assert http.put("/api/v1/push", headers=bearer(token("read-only"))).status_code == 405


# -- refused tokens -----------------------------------------------------------------------
REFUSED = {
    "expired": (lambda: token(exp=int(time.time()) - 5), "Token has expired"),
    "wrong signature": (
        lambda: sign("another-secret-that-is-also-32-bytes-long", "HS256",
                     claims(iss=ISSUER, aud=AUDIENCE)),
        "Invalid token signature",
    ),
    "wrong issuer": (lambda: token(iss="https://evil.test"), "Invalid token issuer"),
    "wrong audience": (lambda: token(aud="someone-else"), "Invalid token audience"),
    "alg none": (lambda: unsigned(claims("root", "admin", iss=ISSUER, aud=AUDIENCE)),
                 "Token algorithm is not accepted"),
    "forged with no key": (lambda: forged_hs256(claims(role="admin"), b""),
                           "Invalid token signature"),
    "garbage": (lambda: "not-a-token", "Malformed token"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(REFUSED))
def test_refused_tokens_say_why(http: httpx.Client, case: str) -> None:
    make, reason = REFUSED[case]
    r = http.get("/api/v1/resources/queues", headers=bearer(make()))
    assert (r.status_code, r.json()) == (401, {"error": reason})


# -- producerSub ------------------------------------------------------------------------------
def test_push_stamps_the_token_sub_and_ignores_the_body(http: httpx.Client, dsn: str) -> None:
    q = qname()
    items = [{"queue": q, "payload": {"n": 1}, "producerSub": "attacker"},
             {"queue": q, "payload": {"n": 2}}]  # fmt: skip
    r = http.post("/api/v1/push", json={"items": items}, headers=bearer(token(sub="legit")))
    assert r.status_code == 201 and [i["status"] for i in r.json()] == ["queued", "queued"]
    assert stored_producer_sub(dsn, q) == ["legit", "legit"]
    popped = http.get(f"/api/v1/pop/queue/{q}", params={"batch": 5}, headers=bearer(token()))
    assert [m["producerSub"] for m in popped.json()["messages"]] == ["legit", "legit"]


def test_a_transaction_push_is_stamped_too(http: httpx.Client, dsn: str) -> None:
    q = qname()
    op = {"type": "push", "items": [{"queue": q, "payload": 1, "producerSub": "attacker"}]}
    r = http.post("/api/v1/transaction", json={"operations": [op]},
                  headers=bearer(token(sub="tx-user")))  # fmt: skip
    assert r.status_code == 200 and r.json()["success"] is True, r.text
    assert stored_producer_sub(dsn, q) == ["tx-user"]


def test_timer_routes_by_role_and_the_fire_stamps_the_scheduling_token_sub(
    http: httpx.Client, dsn: str
) -> None:
    q = qname()
    op = {"op": "schedule", "queue": q, "timerKey": "k", "payload": "MQ==", "delayMs": 0}
    ro, rw = bearer(token("read-only")), bearer(token(sub="timer-user"))
    refused = http.post("/api/v1/timers", json={"operations": [op]}, headers=ro)
    assert (refused.status_code, refused.json()) == (403, {"error": "Insufficient permissions"})
    assert http.get(f"/api/v1/timers/{q}/k", headers={}).status_code == 401
    assert http.post("/api/v1/timers", json={"operations": [op]}, headers=rw).status_code == 200
    assert http.get(f"/api/v1/timers/{q}", headers=ro).status_code == 200
    assert http.get(f"/api/v1/timers/{q}/k", headers=ro).status_code == 200
    assert http.delete(f"/api/v1/timers/{q}/k", headers=ro).status_code == 403
    deadline = time.monotonic() + 10
    while not stored_producer_sub(dsn, q) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stored_producer_sub(dsn, q) == ["timer-user"]


def test_a_token_without_sub_stores_null(http: httpx.Client, dsn: str) -> None:
    q = qname()
    r = http.post("/api/v1/push", json={"items": [{"queue": q, "producerSub": "x"}]},
                  headers=bearer(token(sub=None)))  # fmt: skip
    assert r.status_code == 201
    assert stored_producer_sub(dsn, q) == [None]


def test_with_auth_off_a_body_producer_sub_is_ignored(client_server: ServerProcess) -> None:
    q = qname()
    item = {"queue": q, "payload": 1, "producerSub": "attacker-no-jwt"}
    r = httpx.post(f"{client_server.url}/api/v1/push", json={"items": [item]})
    assert r.status_code == 201
    assert stored_producer_sub(client_server.env["DATABASE_URL"], q) == [None]


# -- long polls -------------------------------------------------------------------------------
def test_a_long_poll_is_checked_when_it_starts_not_when_answered(
    srv: ServerProcess, http: httpx.Client
) -> None:
    q = qname()
    short = token(exp=int(time.time()) + 2)  # JWT_CLOCK_SKEW=0 on this server
    waiter = Waiter(srv.url, q, timeout_ms=20000, headers=bearer(short))
    waiter.start()
    wait_registered(srv.url, 1)
    deadline = time.monotonic() + 10
    while http.get("/api/v1/resources/queues", headers=bearer(short)).status_code != 401:
        assert time.monotonic() < deadline, "the short-lived token never expired"
        time.sleep(0.2)  # waiting for the clock, not for an event
    r = http.post("/api/v1/push", json={"items": [{"queue": q, "payload": "late"}]},
                  headers=bearer(token()))  # fmt: skip
    assert r.status_code == 201
    waiter.join(20)
    assert waiter.response is not None and waiter.response.status_code == 200
    assert waiter.response.json()["messages"][0]["data"] == "late"


def test_a_long_poll_without_a_token_is_refused_at_once(http: httpx.Client) -> None:
    started = time.monotonic()
    r = http.get(f"/api/v1/pop/queue/{qname()}", params={"wait": "true", "timeout": 10000})
    assert r.status_code == 401 and time.monotonic() - started < 5


# -- the peer route ---------------------------------------------------------------------------
def test_the_peer_route_takes_the_peer_secret_never_a_user_token(http: httpx.Client) -> None:
    note = {"type": "message_available", "queue": qname(), "partition": "Default"}
    as_admin = http.post("/internal/api/notify", json=note, headers=bearer(token("admin")))
    assert as_admin.status_code == 401 and "peer secret" in as_admin.json()["error"]
    as_peer = http.post("/internal/api/notify", json=note,
                        headers={"X-Queen-Peer-Secret": PEER_SECRET})  # fmt: skip
    assert as_peer.status_code == 200


# -- CORS ---------------------------------------------------------------------------------
def test_cors_answers_only_the_allowed_origin(http: httpx.Client) -> None:
    ok = http.get("/health", headers={"Origin": ORIGIN})
    assert ok.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert ok.headers["Vary"] == "Origin"
    other = http.get("/health", headers={"Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in other.headers


# -- counted and logged, never the token -----------------------------------------------------
def auth_failures(url: str) -> dict[str, float]:
    text = httpx.get(f"{url}/metrics/prometheus").text
    return {
        sample.labels["kind"]: sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "queen_auth_failures"
        for sample in family.samples
        if sample.name == "queen_auth_failures_total"
    }


def test_failures_are_counted_and_logged_without_the_token(
    srv: ServerProcess, http: httpx.Client
) -> None:
    before_json = http.get("/metrics").json()["auth"]["failures"]
    before = auth_failures(srv.url)
    secret_looking = token(exp=int(time.time()) - 60)
    http.get("/api/v1/resources/queues", headers=bearer(secret_looking))
    http.get("/api/v1/resources/queues")
    http.get("/api/v1/system/maintenance", headers=bearer(token("read-only", sub="reader")))
    after_json = http.get("/metrics").json()["auth"]["failures"]
    for kind in ("expired", "missing", "forbidden"):
        assert after_json[kind] == before_json[kind] + 1, kind
    after = auth_failures(srv.url)
    for kind in ("expired", "missing", "forbidden"):
        assert after[kind] == before.get(kind, 0) + 1, kind
    logs = srv.logs()
    assert "authentication failed: GET /api/v1/resources/queues" in logs
    assert "Token has expired" in logs
    assert "access denied: GET /api/v1/system/maintenance for sub 'reader'" in logs
    assert secret_looking not in logs and secret_looking.split(".")[2] not in logs


# -- the official client ---------------------------------------------------------------------
def test_the_official_client_pushes_and_consumes_with_a_bearer_token(srv: ServerProcess) -> None:
    q = qname()

    async def body() -> tuple[list[Any], list[Any], str]:
        async with open_client(srv.url, bearer_token=token(sub="client-app")) as client:
            await client.queue(q).create()
            await client.queue(q).push([{"data": {"n": i}} for i in range(3)])
            seen: list[Any] = []

            async def handler(msgs: list[dict[str, Any]]) -> None:
                seen.extend((m["data"]["n"], m["producerSub"]) for m in msgs)

            await (
                client.queue(q).batch(3).limit(3).timeout_millis(2000).idle_millis(5000)
                .consume(handler)
            )  # fmt: skip
            left = await client.queue(q).batch(10).wait(False).pop()
        async with open_client(srv.url, bearer_token=token("read-only")) as reader:
            try:
                await reader.queue(q).push({"data": 1})
                refused = "pushed"
            except httpx.HTTPStatusError as exc:
                refused = f"{exc.response.status_code} {exc}"
        return seen, left, refused

    seen, left, refused = asyncio.run(asyncio.wait_for(body(), 30))
    assert seen == [(0, "client-app"), (1, "client-app"), (2, "client-app")]
    assert left == []
    assert refused.startswith("403") and "Insufficient permissions" in refused


def test_the_official_client_without_a_token_is_refused(srv: ServerProcess) -> None:
    async def body() -> str:
        async with open_client(srv.url) as client:
            client_: Queen = client
            try:
                await client_.queue(qname()).push({"data": 1})
            except httpx.HTTPStatusError as exc:
                return f"{exc.response.status_code} {exc}"
        return "pushed"

    assert asyncio.run(body()) == "401 Authentication required"


# -- RS256 with the identity provider's JWKS (served by the test) ---------------------------
def test_rs256_with_a_jwks_served_by_the_test(migrated_dsn: str) -> None:
    a, b, stranger = rsa_key(), rsa_key(), rsa_key()
    with JwksServer(jwks(a=a, e=ed_key())) as idp, ServerProcess(
        migrated_dsn, workers=1, JWT_ENABLED="true", JWT_ALGORITHM="RS256", JWT_JWKS_URL=idp.url
    ) as srv:  # fmt: skip

        def get(tok: str) -> httpx.Response:
            return httpx.get(f"{srv.url}/api/v1/resources/queues", headers=bearer(tok))

        assert get(sign(a, "RS384", claims(role="read-only"), kid="a")).status_code == 200
        assert idp.fetches == 1  # when the worker started; not per request
        for _ in range(5):
            assert get(sign(a, "RS256", claims(role="read-only"), kid="a")).status_code == 200
        assert idp.fetches == 1
        forged = get(sign(stranger, "RS256", claims(), kid="a"))
        assert forged.json() == {"error": "Invalid token signature"}
        confused = get(forged_hs256(claims(role="admin"), public_pem(a).encode()))
        assert confused.status_code == 401 and "not accepted" in confused.json()["error"]

        idp.document = jwks(a=a, b=b)  # key rotation: b is published, then used
        assert get(sign(b, "RS256", claims(), kid="b")).status_code == 200
        assert idp.fetches == 2  # the unknown kid refreshed the set once

        for n in range(10):  # made-up kids cannot make the server fetch on every request
            r = get(sign(stranger, "RS256", claims(), kid=f"made-up-{n}"))
            assert r.json() == {"error": "Unknown signing key: no key for the token's kid"}
        assert idp.fetches == 2


def test_an_unreachable_jwks_is_503_not_a_refused_start(migrated_dsn: str) -> None:
    closed = f"http://127.0.0.1:{free_port()}/jwks.json"
    with ServerProcess(
        migrated_dsn, workers=1, JWT_ENABLED="true", JWT_ALGORITHM="RS256", JWT_JWKS_URL=closed
    ) as srv:  # fmt: skip
        r = httpx.get(f"{srv.url}/api/v1/resources/queues",
                      headers=bearer(sign(rsa_key(), "RS256", claims(), kid="a")))  # fmt: skip
        assert r.status_code == 503 and r.headers["Retry-After"] == "5"
        assert "keys are unavailable" in r.json()["error"]
        assert "JWKS fetch from" in srv.logs()


@pytest.mark.parametrize(
    ("env", "message"),
    [({}, "JWT_ENABLED is true but there is no key to verify tokens with"),
     ({"JWT_SECRET": "short"}, "JWT_SECRET must be at least 32 bytes"),
     ({"JWT_ALGORITHM": "RS256", "JWT_PUBLIC_KEY": "/nonexistent/key.pem"},
      "invalid JWT_PUBLIC_KEY")],
)  # fmt: skip
def test_enabled_without_a_usable_key_does_not_start(
    migrated_dsn: str, env: dict[str, str], message: str
) -> None:
    srv = ServerProcess(migrated_dsn, workers=1, JWT_ENABLED="true", **env)
    srv.spawn()
    assert srv.proc is not None
    assert srv.proc.wait(30) != 0
    assert message in srv.logs()
