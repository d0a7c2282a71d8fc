"""In-process long polling of one gunicorn worker: intentions, registry, poll workers.

A ``wait=true`` pop opens a slot in its :class:`ResponseQueue`, registers a
:class:`PollIntention` in the :class:`PollIntentionRegistry` and wakes the owning
:class:`PollWorker`; the worker pops for the intention's group through a :class:`Popper`
and posts the answer back. :class:`LongPollService` wraps that flow for the HTTP layer.

The same machinery serves the stream polls (`streams/intention.py`): any
:class:`Intention` fits the registry, the workers and the service; :class:`PollStack`
assembles one kind of long poll.
"""

from .backoff import BackoffPolicy, BackoffState
from .clock import Clock, ManualClock
from .errors import PollingError, RegistryClosed, RegistryFull
from .intention import (
    QUEUE_MODE,
    GroupingKey,
    GroupKey,
    GroupSelector,
    Intention,
    IntentionT,
    PollIntention,
)
from .linger import LingerPolicy
from .longpoll import NO_CONTENT, LongPollService, Waker, Watch
from .popper import Cover, CoveringPopper, LeaseReleaser, Popper, PopResult
from .registry import PollIntentionRegistry, RegistryStats
from .request import PopRequest
from .responses import Response, ResponseQueue, ResponseQueues
from .sharding import shard_of
from .stack import PollStack
from .worker import WAKE_SOURCES, PollWorker, PollWorkerPool, WorkerCounters

__all__ = [
    "NO_CONTENT",
    "QUEUE_MODE",
    "WAKE_SOURCES",
    "BackoffPolicy",
    "BackoffState",
    "Clock",
    "Cover",
    "CoveringPopper",
    "GroupKey",
    "GroupSelector",
    "GroupingKey",
    "Intention",
    "IntentionT",
    "LeaseReleaser",
    "LingerPolicy",
    "LongPollService",
    "ManualClock",
    "PollIntention",
    "PollIntentionRegistry",
    "PollStack",
    "PollWorker",
    "PollWorkerPool",
    "PollingError",
    "PopRequest",
    "PopResult",
    "Popper",
    "RegistryClosed",
    "RegistryFull",
    "RegistryStats",
    "Response",
    "ResponseQueue",
    "ResponseQueues",
    "Waker",
    "Watch",
    "WorkerCounters",
    "shard_of",
]
