"""Stream polls: waiting for a ready window."""

from __future__ import annotations

from dataclasses import dataclass

from queen_threads.errors import ConfigError
from queen_threads.settings.parsers import env, integer, number


@dataclass(frozen=True)
class StreamSettings:
    """The stream poll workers and their backoff."""

    stream_poll_worker_count: int = env(
        "STREAM_POLL_WORKER_COUNT", 1, integer(1, 64), "Stream poll-worker greenlets per process."
    )
    stream_poll_worker_interval_ms: int = env(
        "STREAM_POLL_WORKER_INTERVAL",
        100,
        integer(1),
        "Longest sleep of an idle stream worker, ms.",
    )
    stream_poll_interval_ms: int = env(
        "STREAM_POLL_INTERVAL",
        1000,
        integer(1),
        "Base (reset) interval between a stream group's readiness checks, ms.",
    )
    stream_backoff_threshold: int = env(
        "STREAM_BACKOFF_THRESHOLD", 5, integer(0), "Empty checks before a stream group backs off."
    )
    stream_backoff_multiplier: float = env(
        "STREAM_BACKOFF_MULTIPLIER", 2.0, number(1.0), "Growth factor of the stream backoff."
    )
    stream_max_poll_interval_ms: int = env(
        "STREAM_MAX_POLL_INTERVAL", 5000, integer(1), "Cap of a stream group's check interval, ms."
    )
    stream_concurrent_checks: int = env(
        "STREAM_CONCURRENT_CHECKS",
        2,
        integer(1, 64),
        "Readiness-check database calls one stream worker may run at once.",
    )


def check_streams(settings: StreamSettings) -> None:
    """The stream backoff cap cannot be below its base interval."""
    if settings.stream_max_poll_interval_ms < settings.stream_poll_interval_ms:
        raise ConfigError(
            f"STREAM_MAX_POLL_INTERVAL ({settings.stream_max_poll_interval_ms} ms) must be >= "
            f"STREAM_POLL_INTERVAL ({settings.stream_poll_interval_ms} ms)"
        )
