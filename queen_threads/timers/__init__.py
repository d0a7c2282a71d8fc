"""Timers: messages scheduled for later (docs/timers.md). The ops and their checks
(`ops`), the database calls (`store`), the per-process firer and the announcements to
the other processes, the service the routes call, the fire log's retention and the
Prometheus gauges."""

from queen_threads.timers.metrics import TimersCollector
from queen_threads.timers.retention import TimerFiresRetention
from queen_threads.timers.service import TimerService
from queen_threads.timers.store import TimerStore

__all__ = ["TimerFiresRetention", "TimerService", "TimerStore", "TimersCollector"]
