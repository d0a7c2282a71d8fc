"""One frozen, validated Settings object built from environment variables (and `.env`).

Each concern declares its variables in its own module (database, http, polling, streams,
auth, background, metrics, timers), each variable once, with its default, its parser and a one-line
doc; `Settings` combines them and `load_settings()` parses and validates them once.
`docs/configuration.md` documents the same table (a unit test keeps them in step).
A new variable goes into its concern's class; a new concern is a module and a base here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from dotenv import dotenv_values

from queen_threads.errors import ConfigError
from queen_threads.settings.auth import AuthSettings
from queen_threads.settings.background import BackgroundSettings
from queen_threads.settings.database import DatabaseSettings, check_database
from queen_threads.settings.http import HttpSettings, check_http
from queen_threads.settings.metrics import MetricsSettings
from queen_threads.settings.polling import PollingSettings
from queen_threads.settings.streams import StreamSettings, check_streams
from queen_threads.settings.timers import TimerSettings

__all__ = ["Settings", "load_settings", "setting_fields"]


@dataclass(frozen=True)
class Settings(
    TimerSettings,
    MetricsSettings,
    BackgroundSettings,
    AuthSettings,
    StreamSettings,
    PollingSettings,
    DatabaseSettings,
    HttpSettings,
):
    """All configuration of a queen-threads process. Build it with `load_settings()`."""

    def workers_pool_size(self) -> int:
        """Pool size of one worker process: the instance budget shared out across workers."""
        return max(2, self.db_pool_size // self.num_workers)


# The checks across variables, each concern's own; run once, after every value parsed.
CHECKS: tuple[Callable[[Any], None], ...] = (check_http, check_database, check_streams)


def setting_fields() -> list[Any]:
    return [f for f in fields(Settings) if "env" in f.metadata]


def load_settings(
    environ: Mapping[str, str] | None = None, dotenv_path: str | None = ".env"
) -> Settings:
    """Read the environment (and `.env` below it), validate, and return Settings.

    Raises ConfigError naming the variable for a malformed value.
    """
    source: dict[str, str] = {}
    if dotenv_path and os.path.exists(dotenv_path):
        source.update({k: v for k, v in dotenv_values(dotenv_path).items() if v is not None})
    source.update(os.environ if environ is None else environ)
    values: dict[str, Any] = {}
    for f in setting_fields():
        name = f.metadata["env"]
        raw = source.get(name)
        if raw is None:
            continue
        try:
            values[f.name] = f.metadata["parser"](raw)
        except ValueError as exc:
            raise ConfigError(f"invalid {name}: {exc}") from None
    settings = Settings(**values)
    for check in CHECKS:
        check(settings)
    return settings
