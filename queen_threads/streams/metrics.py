"""The streams' observer: the windows the database leased (every stream poll, waiting or
not, goes through `StreamStore.poll`), those among them delivered again after their lease
expired, and the acks by outcome (queen_stream_windows_*_total, by stream)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from queen_threads.metrics.definitions import prom
from queen_threads.metrics.labels import inc


class StreamMetrics:
    def polled(self, results: Sequence[dict[str, Any]]) -> None:
        leased = [r for r in results if r.get("window")]
        if leased:
            metrics = prom()
            inc(metrics.stream_delivered, (_stream_of(r) for r in leased))
            again = (
                _stream_of(r) for r in leased if r.get("redelivered") and not r.get("released")
            )
            inc(metrics.stream_redelivered, again)

    def acked(self, result: dict[str, Any]) -> None:
        if not result.get("error"):
            outcome = "success" if result.get("success") else "released"
            prom().stream_acked.labels(str(result.get("stream") or ""), outcome).inc()


def _stream_of(result: dict[str, Any]) -> tuple[str]:
    return (str(result["window"].get("stream") or ""),)
