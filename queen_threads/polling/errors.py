"""Errors raised by the long-poll machinery; :class:`PollingError` is a branch of the
project's one hierarchy (:class:`queen_threads.errors.QueenError`)."""

from __future__ import annotations

from queen_threads.errors import QueenError


class PollingError(QueenError):
    """Root of every error raised by ``queen_threads.polling``."""


class RegistryFull(PollingError):
    """The registry already holds ``capacity`` intentions; answer 503 with Retry-After."""

    def __init__(self, capacity: int) -> None:
        super().__init__(f"long-poll registry is full ({capacity} waiting requests)")
        self.capacity = capacity


class RegistryClosed(PollingError):
    """The registry is shutting down and takes no new intentions; answer 503."""

    def __init__(self) -> None:
        super().__init__("long-poll registry is closed (server shutting down)")
