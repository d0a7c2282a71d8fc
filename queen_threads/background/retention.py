"""The retention and eviction services (what they delete is defined in
`schema/functions/90_operations.sql`; how they are scheduled in `background.py`).

RetentionService, every RETENTION_INTERVAL:
  1. `retention`: messages older than the queue's retentionSeconds (retentionEnabled);
  2. `completed_retention`: messages older than completedRetentionSeconds that every
     consumer group reading their partition has consumed (retentionEnabled);
  3. `partition_cleanup`: empty partitions with no push for PARTITION_CLEANUP_DAYS;
  4. retention history older than METRICS_RETENTION_DAYS.
EvictionService, every EVICTION_INTERVAL:
  1. `max_wait_time_eviction`: messages older than the queue's maxWaitTimeSeconds that
     queue mode has not consumed (pop never delivers them any more); they are deleted;
  2. `ephemeral`: messages of ephemeral queues past their ttlSeconds, and the cursors of
     ephemeral groups idle for EPHEMERAL_GROUP_IDLE_SECONDS (docs/ephemeral.md); the
     answer carries the ephemeral totals the metrics show.

Each step is a loop of bounded batches (at most the batch size of messages per statement
and transaction) until a batch comes back short, so no lock is held for long.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from queen_threads.background.exclusive import ExclusiveService, ServiceObserver, Session
from queen_threads.settings import Settings

KINDS = ("retention", "completed_retention", "max_wait_time_eviction")


@dataclass
class StepTotals:
    deleted: int = 0
    batches: int = 0
    busy_partitions: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "deleted": self.deleted,
            "batches": self.batches,
            "busyPartitions": self.busy_partitions,
        }


def cleanup_messages(
    s: Session, kind: str, batch_size: int, stop: threading.Event | None = None
) -> StepTotals:
    """Run one cleanup kind to the end, one bounded batch (transaction) at a time."""
    if kind not in KINDS:
        raise ValueError(f"unknown cleanup kind {kind!r}")
    totals = StepTotals()
    after: str | None = None
    while True:
        batch = s.call("ops_cleanup_batch", {"kind": kind, "limit": batch_size, "after": after})
        totals.batches += 1
        totals.deleted += int(batch["deleted"])
        totals.busy_partitions += int(batch["busyPartitions"])
        if not batch["more"] or (stop is not None and stop.is_set()):
            return totals
        after = batch["next"]


def cleanup_partitions(
    s: Session, days: int, batch_size: int, stop: threading.Event | None = None
) -> StepTotals:
    """Delete empty partitions idle for `days` days, one bounded batch at a time."""
    totals = StepTotals()
    while True:
        batch = s.call("ops_cleanup_partitions", {"days": days, "limit": batch_size})
        totals.batches += 1
        totals.deleted += int(batch["deleted"])
        if not batch["more"] or (stop is not None and stop.is_set()):
            return totals


def prune_history(
    s: Session, days: int, batch_size: int, stop: threading.Event | None = None
) -> StepTotals:
    totals = StepTotals()
    while True:
        n = s.execute("ops_prune_history", {"days": days, "limit": batch_size})
        totals.batches += 1
        totals.deleted += n
        if n < batch_size or (stop is not None and stop.is_set()):
            return totals


class RetentionJob:
    """One retention cycle: both message retentions, idle partitions, old history."""

    name = "retention"

    def __init__(
        self,
        batch_size: int,
        partition_cleanup_days: int,
        history_days: int,
        stop: threading.Event | None = None,
    ) -> None:
        self.batch_size = batch_size
        self.partition_cleanup_days = partition_cleanup_days
        self.history_days = history_days
        self.stop = stop

    def run(self, session: Session) -> dict[str, Any]:
        retention = cleanup_messages(session, "retention", self.batch_size, self.stop)
        completed = cleanup_messages(session, "completed_retention", self.batch_size, self.stop)
        partitions = StepTotals()
        if self.partition_cleanup_days > 0:
            partitions = cleanup_partitions(
                session, self.partition_cleanup_days, self.batch_size, self.stop
            )
        history = StepTotals()
        if self.history_days > 0:
            history = prune_history(session, self.history_days, self.batch_size, self.stop)
        return {
            "deleted": retention.deleted + completed.deleted,
            "retention": retention.as_dict(),
            "completedRetention": completed.as_dict(),
            "partitionsDeleted": partitions.deleted,
            "historyPruned": history.deleted,
        }


EPHEMERAL_GROUP_IDLE_SECONDS = 3600
"""An ephemeral group that has not popped for this long stops holding messages in the ring
(its cursors are dropped; it starts again from the oldest kept message)."""


class EvictionJob:
    """One eviction cycle: messages that waited longer than maxWaitTimeSeconds, and the
    ephemeral queues' expired messages and idle groups."""

    name = "eviction"

    def __init__(self, batch_size: int, stop: threading.Event | None = None) -> None:
        self.batch_size = batch_size
        self.stop = stop

    def run(self, session: Session) -> dict[str, Any]:
        evicted = cleanup_messages(session, "max_wait_time_eviction", self.batch_size, self.stop)
        ephemeral = session.json("ephemeral_retention", (EPHEMERAL_GROUP_IDLE_SECONDS,))
        return {"deleted": evicted.deleted, "eviction": evicted.as_dict(), "ephemeral": ephemeral}


class RetentionServices:
    """The retention and eviction loops of one worker process (each job runs in one
    process per database at a time; see background.py)."""

    def __init__(
        self,
        settings: Settings,
        dsn: str,
        owner: str,
        ready: threading.Event | None = None,
        observer: ServiceObserver | None = None,
    ) -> None:
        self._stop = threading.Event()
        self.retention = ExclusiveService(
            dsn,
            RetentionJob(
                settings.retention_batch_size,
                settings.partition_cleanup_days,
                settings.metrics_retention_days,
                self._stop,
            ),
            settings.retention_interval_ms / 1000,
            owner=owner,
            ready=ready,
            observer=observer,
        )
        self.eviction = ExclusiveService(
            dsn,
            EvictionJob(settings.eviction_batch_size, self._stop),
            settings.eviction_interval_ms / 1000,
            owner=owner,
            ready=ready,
            observer=observer,
        )

    def start(self) -> None:
        self.retention.start()
        self.eviction.start()

    def stop(self) -> None:
        self._stop.set()
        self.retention.stop()
        self.eviction.stop()

    def stats(self) -> dict[str, Any]:
        return {"retention": self.retention.stats(), "eviction": self.eviction.stats()}
