"""Which routes are messaging operations, as the messaging semantic conventions name them
(https://opentelemetry.io/docs/specs/semconv/messaging/messaging-spans/): the operation's
name (the span's name is "<name> <destination>") and its type (send, receive, settle).
Every other route's span is named "<METHOD> <route>", as an HTTP server span."""

from __future__ import annotations

from typing import NamedTuple

API = "/api/v1"


class Operation(NamedTuple):
    name: str
    type: str | None  # messaging.operation.type; None: not one of the standard types


OPERATIONS: dict[tuple[str, str], Operation] = {
    ("POST", f"{API}/push"): Operation("push", "send"),
    ("GET", f"{API}/pop"): Operation("pop", "receive"),
    ("GET", f"{API}/pop/queue/{{queue}}"): Operation("pop", "receive"),
    ("GET", f"{API}/pop/queue/{{queue}}/partition/{{partition}}"): Operation("pop", "receive"),
    ("POST", f"{API}/ack"): Operation("ack", "settle"),
    ("POST", f"{API}/ack/batch"): Operation("ack", "settle"),
    ("POST", f"{API}/transaction"): Operation("transaction", None),
    ("POST", f"{API}/lease/{{leaseId}}/extend"): Operation("renew", None),
    ("POST", f"{API}/fetch"): Operation("fetch", "receive"),
    ("POST", f"{API}/stream/poll"): Operation("poll", "receive"),
    ("POST", f"{API}/stream/ack"): Operation("ack", "settle"),
    ("POST", f"{API}/ephemeral/push"): Operation("push", "send"),
    ("GET", f"{API}/ephemeral/pop"): Operation("pop", "receive"),
    ("POST", f"{API}/ephemeral/ack"): Operation("ack", "settle"),
    ("POST", "/streams/v1/cycle"): Operation("cycle", "process"),
}


def operation(method: str, template: str | None) -> Operation | None:
    return OPERATIONS.get((method, template or ""))
