"""Timers: messages scheduled for later (docs/timers.md).

routes.py the falcon resources; body.py the operations a request may carry and their
checks; service.py what the routes call; store.py the only caller of
`schema/queries/timers.sql`; metrics.py the Prometheus gauges; firer.py and announcer.py
the per-process firer and the announcements to the other processes; retention.py the fire
log's retention."""

from queen_threads.timers.metrics import TimersCollector
from queen_threads.timers.retention import TimerFiresRetention
from queen_threads.timers.service import TimerService
from queen_threads.timers.store import TimerStore

__all__ = ["TimerFiresRetention", "TimerService", "TimerStore", "TimersCollector"]
