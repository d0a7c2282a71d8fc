"""A waiting stream poll (``StreamPollIntention``): a consumer group waiting for a ready
window of a stream. Each window goes to exactly one waiter; the others keep waiting."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from queen_threads.polling import GroupSelector

__all__ = ["STREAM_KIND", "StreamGroupKey", "StreamPollIntention", "StreamPollRequest"]

STREAM_KIND = "stream"
"""The ``kind`` of every :class:`StreamGroupKey`."""


@dataclass(frozen=True, slots=True)
class StreamPollRequest:
    """One ``POST /api/v1/stream/poll``: a window of ``stream`` for ``consumer_group``.

    ``sources`` are the stream's source queues: a push into any of them may complete a
    window, so the group's wake-up selectors are built from them.
    """

    stream: str
    consumer_group: str
    sources: tuple[str, ...]


class StreamGroupKey(NamedTuple):
    """The grouping key of waiting stream polls: every waiter of one consumer group of
    one stream. A tuple, never a joined string (names may contain any character);
    ``kind`` keeps it apart from the pop long polls' :class:`GroupKey`."""

    kind: str  # always STREAM_KIND
    stream: str
    consumer_group: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamPollIntention:
    """One stream poll waiting in the stream registry until a window is ready for its
    group or it expires; ``deadline`` and ``created_at`` are monotonic seconds."""

    request_id: str
    worker_id: int
    request: StreamPollRequest
    deadline: float
    created_at: float

    def grouping_key(self) -> StreamGroupKey:
        """("stream", stream, consumer group)."""
        return StreamGroupKey(STREAM_KIND, self.request.stream, self.request.consumer_group)

    def selectors(self) -> tuple[GroupSelector, ...]:
        """One selector per source queue (any partition), so that a push into any source
        (``reset_matching`` with no group) wakes the group."""
        r = self.request
        return tuple(
            GroupSelector(
                queue=source,
                partition=None,
                namespace=None,
                task=None,
                consumer_group=r.consumer_group,
            )
            for source in r.sources
        )
