"""The database side of a poll round, as seen by the poll workers."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from .intention import GroupSelector, Intention, IntentionT

_I_contra = TypeVar("_I_contra", bound=Intention, contravariant=True)


@dataclass(frozen=True, slots=True)
class PopResult:
    """Outcome of one pop for one intention: 200 with messages, or 204 when empty.

    ``lease_ids`` are the leases the pop took (normally one); ``body`` is the encoded
    HTTP response body (``{"messages": [...]}``) or None when empty.

    ``wake_after`` is an optional hint of an empty result, in wall-clock epoch seconds: a
    push before this time cannot make the group's next result non-empty (a stream window
    is ready only once a message later than its end plus grace arrives), so pushes before
    it need not wake the group. None (the default; every pop) means any push may.

    ``due_in`` is an empty result's due time, in seconds from when the result came back:
    from then on something in the pop's scope may become available without any write that
    would wake the group (a lease runs out, a retry's or a delayedProcessing wait ends, a
    windowBuffer closes). The worker pops for the group again at that time, whatever its
    backoff. None: nothing is due later. ``contended``: the pop found a candidate held by
    a concurrent transaction (another pop taking a lease, an ack) whose outcome it could
    not see, so its due time may miss a lease: the worker pops again after the backoff's
    base interval to learn it. ``partitions``: the partitions the messages came from, when
    the popper knows them (the registry's linger hints of those are served).
    """

    request_id: str
    status: int
    body: bytes | None
    lease_ids: Sequence[str] = ()
    message_count: int = 0
    wake_after: float | None = None
    due_in: float | None = None
    contended: bool = False
    partitions: tuple[str, ...] = ()  # where the messages came from (linger's hints)

    @property
    def has_messages(self) -> bool:
        """True when this pop delivered at least one message."""
        return self.message_count > 0


class LeaseReleaser(Protocol):
    """Gives leases back so their messages go to the next consumer at once."""

    def release(self, lease_ids: Sequence[str]) -> None:
        """Release the leases (unknown or already released ids are ignored)."""


class Popper(LeaseReleaser, Protocol[_I_contra]):
    """Pops messages (or leases stream windows) for a group of intentions; must be safe
    to call from many workers at once.

    ``pop_group`` pops once per intention, in the given (FIFO) order, each with its own
    lease and its own batch size and subscription options, and stops at the first empty
    pop, so the list may be shorter than ``intentions``. ``partitions`` (linger.py): the
    i-th intention pops the i-th partition named, when one is, and may leave it
    unconsidered when its kind has no partitions.
    """

    def pop_group(
        self, intentions: Sequence[_I_contra], partitions: Sequence[str] = ()
    ) -> list[PopResult]:
        """One database call for the group; one result per pop attempted."""
        ...

    def pop_heads(
        self, intentions: Sequence[_I_contra], partitions: Sequence[str | None] = ()
    ) -> list[PopResult]:
        """One database call popping once for each intention (each of another group);
        never stops early: exactly one result per intention, in order."""
        ...


class Cover(Protocol):
    """Makes sure wake-ups for ``selectors`` from other processes will reach this one
    (wake/interest.py); returns only once they will, raises if it cannot."""

    def cover(self, selectors: Iterable[GroupSelector]) -> None: ...


class CoveringPopper(Generic[IntentionT]):
    """A :class:`Popper` that covers its intentions' selectors before every pop.

    Other processes send a wake-up only where some process said it waits for one
    (wake/interest.py, wake/targets.py). Saying so, committed, before the pop makes a
    wake-up impossible to miss: either the pushing process learns of it before it decides,
    or the pop sees the push's messages. If the cover fails, nothing is popped (the
    round fails and is retried)."""

    def __init__(self, popper: Popper[IntentionT], cover: Cover) -> None:
        self.popper = popper
        self._cover = cover

    def pop_group(
        self, intentions: Sequence[IntentionT], partitions: Sequence[str] = ()
    ) -> list[PopResult]:
        self._cover.cover(s for intention in intentions for s in intention.selectors())
        return self.popper.pop_group(intentions, partitions)

    def pop_heads(
        self, intentions: Sequence[IntentionT], partitions: Sequence[str | None] = ()
    ) -> list[PopResult]:
        self._cover.cover(s for intention in intentions for s in intention.selectors())
        return self.popper.pop_heads(intentions, partitions)

    def release(self, lease_ids: Sequence[str]) -> None:
        self.popper.release(lease_ids)
