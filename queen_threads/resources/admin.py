"""Routes for administration and dashboards (DLQ, messages, consumer groups, traces,
resource listings). Each route family lives in its own module; they register here."""

from __future__ import annotations

import falcon

from queen_threads.runtime import Runtime


def register(app: falcon.App, runtime: Runtime, api: str) -> None:
    """Add the administration routes under `api` (e.g. /api/v1)."""
