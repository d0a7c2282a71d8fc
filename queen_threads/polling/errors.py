"""Errors raised by the long-poll machinery (one root: :class:`PollingError`)."""

from __future__ import annotations


class PollingError(Exception):
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
