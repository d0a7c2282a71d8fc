"""The entry points: `from_environment`, which the runtime calls (the worker's telemetry,
or None when the environment does not ask for any: then nothing of OpenTelemetry is
imported), and `check`, which the gunicorn master calls so that variables asking for
telemetry on a server without the SDK stop it with one clear line."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

from queen_threads.errors import ConfigError
from queen_threads.telemetry.config import from_env

if TYPE_CHECKING:
    from queen_threads.telemetry.setup import Telemetry

MISSING = (
    "the OTEL_* variables ask for OpenTelemetry export, but the OpenTelemetry SDK is not "
    "installed: {install} (or unset OTEL_EXPORTER_OTLP_ENDPOINT)"
)
NEEDED = ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")


def wanted(env: Mapping[str, str]) -> bool:
    """Whether the environment asks for spans or metrics."""
    return from_env(env).enabled


def sdk_missing() -> bool:
    """Whether the OpenTelemetry SDK (the `otel` extra) is missing here (imports nothing)."""
    return any(_missing(name) for name in NEEDED)


def check(env: Mapping[str, str]) -> None:
    """ConfigError when telemetry is asked for and the SDK is missing (imports nothing)."""
    if from_env(env).enabled and sdk_missing():
        raise ConfigError(MISSING.format(install=install_command()))


def install_command() -> str:
    """The exact command that installs the `otel` extra where this server runs: into this
    interpreter's environment, from the checkout when it runs from one (whose scripts/serve
    also does it by itself when an OTEL_* variable asks for export)."""
    root = Path(__file__).resolve().parents[2]
    if (root / "setup.cfg").is_file() and (root / "scripts" / "serve").is_file():
        return (
            f"scripts/serve installs it by itself; or {sys.executable} -m pip install "
            f"-e '{root}[otel]'"
        )
    return f"{sys.executable} -m pip install 'queen-threads[otel]'"


def _missing(module: str) -> bool:
    try:
        return find_spec(module) is None
    except ModuleNotFoundError:
        return True


def from_environment(env: Mapping[str, str], database: str | None) -> Telemetry | None:
    config = from_env(env)
    if not config.enabled:
        return None
    check(env)
    from queen_threads.telemetry.setup import start  # the SDK: only now

    return start(config, database)
