"""The database side of a poll round, as seen by the poll workers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from .intention import PollIntention


@dataclass(frozen=True, slots=True)
class PopResult:
    """Outcome of one pop for one intention: 200 with messages, or 204 when empty.

    ``lease_ids`` are the leases the pop took (normally one); ``body`` is the encoded
    HTTP response body (``{"messages": [...]}``) or None when empty.
    """

    request_id: str
    status: int
    body: bytes | None
    lease_ids: Sequence[str] = ()
    message_count: int = 0

    @property
    def has_messages(self) -> bool:
        """True when this pop delivered at least one message."""
        return self.message_count > 0


class LeaseReleaser(Protocol):
    """Gives leases back so their messages go to the next consumer at once."""

    def release(self, lease_ids: Sequence[str]) -> None:
        """Release the leases (unknown or already released ids are ignored)."""


class Popper(LeaseReleaser, Protocol):
    """Pops messages for a group of intentions; must be safe to call from many workers.

    ``pop_group`` pops once per intention, in the given (FIFO) order, each with its own
    lease and its own batch size and subscription options, and stops at the first empty
    pop, so the list may be shorter than ``intentions``.
    """

    def pop_group(self, intentions: Sequence[PollIntention]) -> list[PopResult]:
        """One database call for the group; one result per pop attempted."""
        ...

    def pop_heads(self, intentions: Sequence[PollIntention]) -> list[PopResult]:
        """One database call popping once for each intention (each of another group);
        never stops early: exactly one result per intention, in order."""
        ...
