"""Streams (docs/streams.md): windows over source queues, consumed by groups with leases.

routes.py the falcon resources; body.py what a request may carry; service.py the sources
cache, one-look polls and the wake-ups acks and seeks owe; store.py the only caller of
`schema/queries/streams.sql`; metrics.py its observer; intention.py, popper.py and
polling.py a waiting stream poll on the shared long-poll machinery (polling/).
"""

from queen_threads.streams.metrics import StreamMetrics
from queen_threads.streams.polling import StreamPollingService
from queen_threads.streams.popper import StreamWindowPopper
from queen_threads.streams.service import Streams
from queen_threads.streams.store import StreamStore

__all__ = ["StreamMetrics", "StreamPollingService", "StreamStore", "StreamWindowPopper", "Streams"]
