"""POST /api/v1/lease/{leaseId}/extend: empty body = the queue's lease time; the answer is
{leaseId, success, renewed, newExpiresAt, expiresAt, error}."""

from __future__ import annotations

import falcon

from queen_threads import validation as v
from queen_threads.http.request import json_object, media
from queen_threads.queue.body import LEASE_FIELDS
from queen_threads.queue.store import QueueStore

MAX_EXTEND_SECONDS = 7 * 24 * 3600  # also the most a pop's leaseSeconds may ask for


class LeaseExtend:
    def __init__(self, store: QueueStore, body_limit: int) -> None:
        self.store = store
        self.body_limit = body_limit

    def on_post(self, req: falcon.Request, resp: falcon.Response, leaseId: str) -> None:
        body = json_object(req, self.body_limit, allow_empty=True, known=LEASE_FIELDS)
        seconds = body.get("seconds")
        if seconds is not None and (
            isinstance(seconds, bool)
            or not isinstance(seconds, int)
            or not 1 <= seconds <= MAX_EXTEND_SECONDS
        ):
            raise v.ValidationError(f"seconds must be an integer from 1 to {MAX_EXTEND_SECONDS}")
        lease = v.uuid_str(leaseId, "leaseId")
        assert lease is not None
        result = self.store.renew(lease, seconds)
        # A lease the server freed or that expired: 200 with success false and renewed 0
        # (the 2.6.0 client reads those); one it never handed out: 404, which the 0.15.0
        # client needs to report the failure (it takes any 2xx for success).
        known = result.pop("known", False)
        media(resp, result, 200 if result.get("success") or known else 404)
