"""The database side of the stream poll workers: leases ready windows for waiting polls."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence

import orjson

from queen_threads.polling import PopResult
from queen_threads.streams.intention import StreamPollIntention
from queen_threads.streams.store import StreamStore


class StreamWindowPopper:
    """Implements the polling package's Popper for stream polls over `StreamStore.poll`:
    each intention asks for one window under a lease of its own; a result without a
    window carries the wake hint (`wake_after`: no push before then can make one ready)."""

    def __init__(self, store: StreamStore) -> None:
        self.store = store

    def pop_group(
        self, intentions: Sequence[StreamPollIntention], partitions: Sequence[str] = ()
    ) -> list[PopResult]:
        return self._poll(intentions, stop_on_empty=True)  # (no partitions: no linger)

    def pop_heads(
        self, intentions: Sequence[StreamPollIntention], partitions: Sequence[str | None] = ()
    ) -> list[PopResult]:
        return self._poll(intentions, stop_on_empty=False)

    def _poll(
        self, intentions: Sequence[StreamPollIntention], stop_on_empty: bool
    ) -> list[PopResult]:
        requests = [
            {
                "idx": idx,
                "stream": intention.request.stream,
                "consumerGroup": intention.request.consumer_group,
                "leaseId": str(uuid.uuid4()),
            }
            for idx, intention in enumerate(intentions)
        ]
        now = time.time()
        out: list[PopResult] = []
        for intention, result in zip(
            intentions, self.store.poll(requests, stop_on_empty), strict=False
        ):
            window = result.get("window")
            if window:
                out.append(
                    PopResult(
                        intention.request_id,
                        200,
                        orjson.dumps({"window": window}),
                        (window["leaseId"],),
                        max(1, len(window.get("messages") or ())),
                    )
                )
                continue
            wake_in = result.get("wakeInMs")
            wake_after = now + wake_in / 1000.0 if isinstance(wake_in, int | float) else None
            out.append(PopResult(intention.request_id, 204, None, wake_after=wake_after))
        return out

    def release(self, lease_ids: Sequence[str]) -> None:
        self.store.release(lease_ids)
