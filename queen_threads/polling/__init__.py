"""In-process long polling of one gunicorn worker: intentions, registry, poll workers.

A long poll opens a slot in its :class:`ResponseQueue`, registers an :class:`Intention`
in the :class:`PollIntentionRegistry` and wakes the owning :class:`PollWorker`; the worker
pops for the intention's group through a :class:`Popper` and posts the answer back.
:class:`LongPollService` wraps that flow for the HTTP layer; :class:`PollStack` assembles
one kind of long poll. Nothing here knows what is waited for: the queue's pops
(`queue/intention.py`) and the stream polls (`streams/intention.py`) bring their own
intentions, poppers and keys.
"""

from .backoff import BackoffPolicy, BackoffState
from .clock import Clock, ManualClock
from .errors import PollingError, RegistryClosed, RegistryFull
from .intention import GroupingKey, GroupSelector, Intention, IntentionT
from .linger import LingerPolicy
from .longpoll import NO_CONTENT, LongPollService, Waker, Watch
from .popper import Cover, CoveringPopper, LeaseReleaser, Popper, PopResult
from .registry import PollIntentionRegistry, RegistryStats
from .responses import Response, ResponseQueue, ResponseQueues
from .sharding import shard_of
from .stack import PollStack
from .worker import WAKE_SOURCES, PollWorker, PollWorkerPool, WorkerCounters

__all__ = [
    "NO_CONTENT",
    "WAKE_SOURCES",
    "BackoffPolicy",
    "BackoffState",
    "Clock",
    "Cover",
    "CoveringPopper",
    "GroupSelector",
    "GroupingKey",
    "Intention",
    "IntentionT",
    "LeaseReleaser",
    "LingerPolicy",
    "LongPollService",
    "ManualClock",
    "PollIntentionRegistry",
    "PollStack",
    "PollWorker",
    "PollWorkerPool",
    "PollingError",
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
