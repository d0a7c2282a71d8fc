"""What the server's own routes' bodies may carry, and their checks."""

from __future__ import annotations

from typing import Any

from queen_threads.errors import ValidationError

SWITCH_FIELDS = ("enabled",)  # POST /api/v1/system/maintenance[/pop]


def switch(body: dict[str, Any]) -> bool:
    """A maintenance switch's new state (required)."""
    enabled = body.get("enabled")
    if not isinstance(enabled, bool):
        raise ValidationError("enabled (boolean) is required")
    return enabled
