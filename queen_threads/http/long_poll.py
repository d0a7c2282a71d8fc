"""Writing answers that carry leases (pops, stream polls), the same way for all: the
body's leases are given back unless the server finished writing it, so a client that
leaves mid-answer strands nothing until its lease expires. A long poll (`wait=true` pop,
stream poll with a timeout) first waits through its service: 503 when its registry
refuses, 204 when nothing came (or the client left, or pops were paused meanwhile: the
leases go back)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import falcon

from queen_threads.errors import Unavailable
from queen_threads.http.connection import TrackedBody, client_gone, watch_readable
from queen_threads.polling import PollingError, Response, Watch
from queen_threads.telemetry import annotate


@dataclass(frozen=True)
class Timeouts:
    """A long poll's `timeout` when the request names none, and the longest it may ask
    (DEFAULT_TIMEOUT, MAX_TIMEOUT)."""

    default_ms: int
    max_ms: int


Wait = Callable[[Callable[[], bool], Watch], Response | None]
Release = Callable[[Sequence[str]], None]
# The body as written, and what to do once it was (None: nothing).
Prepare = Callable[[bytes], tuple[bytes, Callable[[], None] | None]]


def answer(
    req: falcon.Request,
    resp: falcon.Response,
    wait: Wait,
    release: Release,
    *,
    paused: Callable[[], bool],
    what: str,
    prepare: Prepare | None = None,
    empty: Callable[[falcon.Response], None] | None = None,
) -> None:
    """Wait for the poll's answer and write it to `resp` (`what` names the polls in the
    503: "long polls", "stream polls"). `empty` answers a poll that nothing came for (its
    deadline passed) instead of the plain 204."""
    annotate.event(req, "queen.wait.start", what=what)
    try:
        result = wait(lambda: client_gone(req.env), lambda nudge: watch_readable(req.env, nudge))
    except PollingError as exc:
        raise Unavailable(f"Server is busy with waiting {what} ({exc})", 1) from exc
    # its span's event: when the wait ended, and whether an answer woke it
    annotate.event(
        req,
        "queen.wait.woken" if result is not None and result.status == 200 else "queen.wait.end",
        status=result.status if result is not None else None,
    )
    if result is None or result.status != 200 or not result.body:
        if empty is not None and not client_gone(req.env) and not paused():
            empty(resp)
            return
        resp.status = 204
        return
    leases = list(result.lease_ids)
    if client_gone(req.env) or paused():
        release(leases)
        resp.status = 204
        return
    body, on_written = prepare(result.body) if prepare is not None else (result.body, None)
    write_leased(resp, body, lambda: release(leases), on_written)


def write_leased(
    resp: falcon.Response,
    body: bytes,
    give_back: Callable[[], None],
    on_written: Callable[[], None] | None = None,
) -> None:
    """Answer 200 with `body`; `give_back()` unless it was written to the end, then
    `on_written()` when given."""
    resp.status = 200
    resp.content_type = falcon.MEDIA_JSON
    resp.content_length = len(body)
    resp.stream = TrackedBody(body, give_back, on_written)
