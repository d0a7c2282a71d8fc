"""Stream routes: POST /api/v1/stream/{define,poll,ack,renew-lease,seek} and the admin
reads under /api/v1/resources/streams (docs/streams.md).

A stream poll with a timeout waits the way a `wait=true` pop does: a StreamPollIntention in
the stream registry, answered by a stream poll worker (streams/polling.py) with the
first ready window, or 204 at its deadline. A window whose answer could not be written
(the client left) is given back at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import falcon
import orjson

from queen_threads.background.maintenance import Maintenance
from queen_threads.errors import Conflict, NotFound, ValidationError
from queen_threads.http import long_poll
from queen_threads.http.long_poll import Timeouts
from queen_threads.http.params import name_param
from queen_threads.http.request import json_object, media
from queen_threads.http.routes import ADMIN, API, RO, RW, Route, route
from queen_threads.streams import body as stream_body
from queen_threads.streams.intention import StreamPollRequest
from queen_threads.streams.polling import StreamPollingService
from queen_threads.streams.service import Streams
from queen_threads.streams.store import StreamStore

NOT_FOUND = "Stream not found"


def _stream_not_found(name: str) -> NotFound:
    return NotFound(f"{NOT_FOUND}: {name}")


class _Route:
    def __init__(self, streams: Streams, body_limit: int) -> None:
        self.streams = streams
        self.body_limit = body_limit


class Define(_Route):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        definition = stream_body.define_body(
            json_object(req, self.body_limit, known=stream_body.DEFINE_FIELDS)
        )
        result = self.streams.define(definition)
        error = result.get("error")
        if error == "sources_not_found":
            raise NotFound(f"Source queue(s) not found: {', '.join(result['missing'])}")
        if error == "conflict":
            name = definition["name"]
            raise Conflict(
                f"Stream {name} exists with other options and has consumers; "
                f"delete it first (DELETE /api/v1/resources/streams/{name})"
            )
        media(resp, result, 201 if result["created"] else 200)


class Poll(_Route):
    def __init__(
        self,
        streams: Streams,
        polling: StreamPollingService,
        body_limit: int,
        timeouts: Timeouts,
        maintenance: Maintenance,
        require_database: Callable[[], None],
    ) -> None:
        super().__init__(streams, body_limit)
        self.polling = polling
        self.timeouts = timeouts
        self.maintenance = maintenance
        self.require_database = require_database  # 503 + Retry-After while it is down

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        poll = stream_body.poll_body(
            json_object(req, self.body_limit, known=stream_body.POLL_FIELDS),
            self.timeouts.default_ms,
            self.timeouts.max_ms,
        )
        if self.maintenance.pop_on:  # pop maintenance: nothing is handed out
            resp.status = 204
            return
        self.require_database()
        streams = self.streams
        sources = streams.sources(poll.stream)
        if sources is None:
            raise _stream_not_found(poll.stream)
        request = StreamPollRequest(poll.stream, poll.consumer_group, sources)
        if poll.timeout_ms == 0:
            self._once(resp, request)
            return
        intention = self.polling.intention(request, poll.timeout_ms, uuid.uuid4().hex)
        long_poll.answer(
            req,
            resp,
            lambda gone, watch: self.polling.wait(intention, gone, watch),
            streams.release,
            paused=lambda: self.maintenance.pop_on,
            what="stream polls",
        )

    def _once(self, resp: falcon.Response, request: StreamPollRequest) -> None:
        """timeout 0: one look, no waiting."""
        streams = self.streams
        result = streams.poll_once(request)
        if result is None:
            resp.status = 204
            return
        lease = result["window"]["leaseId"]
        long_poll.write_leased(resp, orjson.dumps(result), lambda: streams.release([lease]))


class Ack(_Route):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = stream_body.ack_body(json_object(req, self.body_limit, known=stream_body.ACK_FIELDS))
        result = self.streams.ack(body["leaseId"], body["success"])
        if result.get("error"):
            expired = " (expired)" if result.get("expired") else ""
            raise ValidationError(f"Invalid lease{expired}: {body['leaseId']}")
        media(resp, result)


class RenewLease:
    def __init__(self, store: StreamStore, body_limit: int) -> None:
        self.store = store
        self.body_limit = body_limit

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = stream_body.renew_body(
            json_object(req, self.body_limit, known=stream_body.RENEW_FIELDS)
        )
        result = self.store.renew(body["leaseId"], body["extendMs"])
        if result is None:
            raise NotFound(f"Lease not found or expired: {body['leaseId']}")
        media(resp, result)


class Seek(_Route):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = stream_body.seek_body(
            json_object(req, self.body_limit, known=stream_body.SEEK_FIELDS)
        )
        result = self.streams.seek(body)
        if result is None:
            raise _stream_not_found(body["stream"])
        media(resp, result)


class _Read:
    def __init__(self, store: StreamStore) -> None:
        self.store = store


class StreamList(_Read):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        namespace = name_param(req, "namespace", "Namespace")
        media(resp, {"streams": self.store.list_streams(namespace)})


class StreamStats(_Read):
    def __init__(self, store: StreamStore, polling: StreamPollingService) -> None:
        super().__init__(store)
        self.polling = polling

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        stats = self.store.stats()
        stats["waitingPolls"] = self.polling.registry.size()
        media(resp, stats)


class Stream(_Read):
    def __init__(self, store: StreamStore, streams: Streams) -> None:
        super().__init__(store)
        self.streams = streams

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        detail = self.store.detail(name)
        if detail is None:
            raise _stream_not_found(name)
        media(resp, detail)

    def on_delete(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        if not self.streams.delete(name):
            raise _stream_not_found(name)
        media(resp, {"deleted": True, "stream": name})


class StreamConsumers(_Read):
    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        consumers = self.store.consumers(name)
        if consumers is None:
            raise _stream_not_found(name)
        media(resp, {"stream": name, "consumers": consumers})


def routes(
    streams: Streams,
    store: StreamStore,
    polling: StreamPollingService,
    body_limit: int,
    timeouts: Timeouts,
    maintenance: Maintenance,
    require_database: Callable[[], None],
) -> list[Route]:
    """Consuming is read-write, reading read-only, deleting admin."""
    poll = Poll(streams, polling, body_limit, timeouts, maintenance, require_database)
    admin = f"{API}/resources/streams"
    return [
        route(f"{API}/stream/define", Define(streams, body_limit), POST=RW),
        route(f"{API}/stream/poll", poll, POST=RW),
        route(f"{API}/stream/ack", Ack(streams, body_limit), POST=RW),
        route(f"{API}/stream/renew-lease", RenewLease(store, body_limit), POST=RW),
        route(f"{API}/stream/seek", Seek(streams, body_limit), POST=RW),
        route(admin, StreamList(store), GET=(RO, {"namespace"})),
        route(f"{admin}/stats", StreamStats(store, polling), GET=RO),
        route(f"{admin}/{{name}}", Stream(store, streams), GET=RO, DELETE=ADMIN),
        route(f"{admin}/{{name}}/consumers", StreamConsumers(store), GET=RO),
    ]
