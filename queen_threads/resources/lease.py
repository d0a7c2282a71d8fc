"""POST /api/v1/lease/{leaseId}/extend: empty body = the queue's lease time."""

from __future__ import annotations

import falcon

from queen_threads import validation as v
from queen_threads.http.request import json_object, media
from queen_threads.runtime import Runtime

MAX_EXTEND_SECONDS = 7 * 24 * 3600


class LeaseExtend:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def on_post(self, req: falcon.Request, resp: falcon.Response, leaseId: str) -> None:
        body = json_object(req, self.runtime.settings.max_body_size, allow_empty=True)
        seconds = body.get("seconds")
        if seconds is not None and (
            isinstance(seconds, bool)
            or not isinstance(seconds, int)
            or not 1 <= seconds <= MAX_EXTEND_SECONDS
        ):
            raise v.ValidationError(f"seconds must be an integer from 1 to {MAX_EXTEND_SECONDS}")
        lease = v.uuid_str(leaseId, "leaseId")
        assert lease is not None
        result = self.runtime.store.renew(lease, seconds)
        media(resp, result, 200 if result.get("success") else 404)
