"""POST /internal/api/notify: a peer instance says messages or a partition became free.

With `QUEEN_PEER_SECRET` set, the request must carry it in `X-Queen-Peer-Secret`:
without it the answer is 401, with a wrong one 403; either is counted and wakes nothing.
A user's token never opens this route (Rule.PEER in its row); with JWT_ENABLED and no peer
secret every notification is refused (403).
"""

from __future__ import annotations

import falcon

from queen_threads.http.request import json_body, media
from queen_threads.wake.peer_auth import HEADER
from queen_threads.wake.peers import PeerService, from_wire

STATUS = {"missing": 401, "wrong": 403, "unset": 403}
MESSAGE = {
    "missing": f"missing peer secret ({HEADER})",
    "wrong": f"wrong peer secret ({HEADER})",
    "unset": "peer notifications need QUEEN_PEER_SECRET on this server while JWT_ENABLED is on",
}


class Notify:
    def __init__(self, peers: PeerService) -> None:
        self.peers = peers

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        peers = self.peers
        problem = peers.auth.check_header(req.get_header(HEADER))
        if problem is not None:
            peers.reject("http")
            media(resp, {"error": MESSAGE[problem]}, status=STATUS[problem])
            return
        event = from_wire(json_body(req, 64 * 1024))
        if event is not None:
            peers.receive(event)
        media(resp, {"status": "ok"})
