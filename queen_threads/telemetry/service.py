"""The one entry point the runtime calls: the worker's telemetry, or None when the
environment does not ask for any (then nothing of OpenTelemetry is imported)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from queen_threads.telemetry.config import from_env

if TYPE_CHECKING:
    from queen_threads.telemetry.setup import Telemetry


def from_environment(env: Mapping[str, str], database: str | None) -> Telemetry | None:
    config = from_env(env)
    if not config.enabled:
        return None
    from queen_threads.telemetry.setup import start  # the SDK: only now

    return start(config, database)
