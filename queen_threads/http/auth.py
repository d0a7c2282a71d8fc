"""The authentication middleware: every routed request passes here before its responder.

With JWT_ENABLED off it does nothing. On, a request to a path outside JWT_SKIP_PATHS
needs a token whose role reaches the route's row (`http/routes.py`): no token 401
`Authentication required`, a token that does not verify 401 with the reason, too low a
role 403 `Insufficient permissions`. Failures are counted (Authenticator) and logged
with the method, path and reason, never the token. A long poll is checked here, when it
starts; a token that expires while it waits does not cut it short.
"""

from __future__ import annotations

import logging
from typing import Any

import falcon

from queen_threads.auth import Authenticator, Identity
from queen_threads.errors import AuthenticationFailed, Forbidden
from queen_threads.http.routes import RouteTable, Rule

log = logging.getLogger("queen_threads.auth")


def producer_sub(req: falcon.Request) -> str | None:
    """The `sub` of the request's verified token: what a push stamps as producerSub
    (None with auth off, on a skipped path, or for a token without `sub`)."""
    identity: Identity | None = getattr(req.context, "identity", None)
    return identity.sub if identity is not None else None


class Authentication:
    def __init__(self, authenticator: Authenticator, routes: RouteTable) -> None:
        self.auth = authenticator
        self.routes = routes

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, params: dict[str, Any]
    ) -> None:
        auth = self.auth
        if not auth.enabled or auth.skips(req.path):
            return
        needed = self.routes.access(req.method, req.uri_template or "", resource)
        if isinstance(needed, Rule):  # the peer secret (checked by the route), or public
            return
        extra = {"request_id": getattr(req.context, "request_id", None)}
        try:
            identity = auth.authenticate(req.get_header("Authorization"))
        except AuthenticationFailed as exc:
            log.warning(
                "authentication failed: %s %s from %s: %s",
                req.method, req.path, req.remote_addr, exc, extra=extra,
            )  # fmt: skip
            raise
        if not auth.allows(identity, needed):
            log.warning(
                "access denied: %s %s for sub %r with role %s (needs %s)",
                req.method, req.path, identity.sub, identity.role.label, needed.label,
                extra=extra,
            )  # fmt: skip
            raise Forbidden("Insufficient permissions")
        req.context.identity = identity
