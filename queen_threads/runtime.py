"""Everything one worker process owns: settings, database pool, counters, services.

`Runtime.start()` runs when the app loads in a gunicorn worker (after the fork and the
gevent patching); `Runtime.stop()` runs from gunicorn's `worker_exit` hook.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from typing import Any, Protocol

from queen_threads import __version__
from queen_threads.admin.analytics_store import AnalyticsStore
from queen_threads.admin.store import AdminStore
from queen_threads.auth import Authenticator, build_verifier
from queen_threads.availability import Availability
from queen_threads.background.exclusive import ExclusiveService
from queen_threads.background.maintenance import Maintenance
from queen_threads.background.metrics_job import metrics_service
from queen_threads.background.retention import RetentionServices
from queen_threads.buffer import FileBuffer
from queen_threads.crypto import PayloadCipher
from queen_threads.db import Database, PoolConfig
from queen_threads.dlq.store import DlqStore
from queen_threads.ephemeral import EphemeralQueues, EphemeralStore
from queen_threads.kv import KvStore, kv_sweep_service
from queen_threads.kv.metrics import LockMetrics
from queen_threads.metrics import (
    AnalyticsCollector,
    AuthMetrics,
    Exposition,
    Instruments,
    ProcessIdentity,
    ProcessReader,
    RequestMetrics,
    RequestStats,
    Sampler,
    ServiceMetrics,
    StatementMetrics,
)
from queen_threads.metrics.ignored import IgnoredParameters
from queen_threads.queue.metrics import QueueMetrics, WaitMetrics, count_buffered
from queen_threads.queue.polling import PollingService
from queen_threads.queue.service import QueueService
from queen_threads.queue.store import QueueStore
from queen_threads.reads import ReadStore
from queen_threads.settings import Settings
from queen_threads.streams import (
    StreamMetrics,
    StreamPollingService,
    Streams,
    StreamStore,
    StreamWindowPopper,
)
from queen_threads.streams_sdk import StreamsSdk
from queen_threads.streams_sdk.metrics import CycleMetrics
from queen_threads.telemetry import service as telemetry
from queen_threads.telemetry.config import database_name
from queen_threads.timers import TimerFiresRetention, TimersCollector, TimerService, TimerStore
from queen_threads.wake.interest import WakeInterest
from queen_threads.wake.listener import WakeupListener
from queen_threads.wake.notifier import WakeNotifier
from queen_threads.wake.peers import PeerService
from queen_threads.wake.siblings import SiblingRelay
from queen_threads.wake.store import WakeStore
from queen_threads.wake.targets import WakeTargets

log = logging.getLogger("queen_threads.runtime")


class Service(Protocol):
    """What the runtime starts and stops."""

    def start(self) -> None: ...

    def stop(self) -> object: ...


def pool_config(settings: Settings, dsn: str) -> PoolConfig:
    return PoolConfig(
        dsn=dsn,
        max_size=settings.workers_pool_size(),
        acquire_timeout_s=settings.db_pool_acquisition_timeout_ms / 1000,
        connect_timeout_s=max(1, settings.db_connection_timeout_ms // 1000),
        statement_timeout_ms=settings.db_statement_timeout_ms,
        lock_timeout_ms=settings.db_lock_timeout_ms,
        idle_in_transaction_timeout_ms=settings.db_idle_timeout_ms,
        application_name=f"queen-threads:{os.getpid()}",
        transaction_pooled=settings.transaction_pooled,
        socket_dir=settings.database_socket_dir,
    )


class Runtime:
    """The per-process object graph handed to `create_app`.

    `dsn` is the pool's database (perhaps through a transaction pooler); `direct_dsn`
    (default: `settings.direct_dsn(dsn)`) the same database for whatever needs a session
    of its own: the LISTEN connection, the background services' advisory locks and
    migrations. The failover buffer tags its files with the direct one too: it names the
    database, whichever way the pool reaches it."""

    def __init__(self, settings: Settings, dsn: str, direct_dsn: str | None = None) -> None:
        self.settings = settings
        self.dsn = dsn
        self.direct_dsn = direct_dsn or settings.direct_dsn(dsn)
        self.version = __version__
        self.worker_id = os.getpid()
        # Observers handed to what they observe: they feed /metrics and
        # /metrics/prometheus (metrics/).
        self.instruments = Instruments()
        # OpenTelemetry spans and metrics when the OTEL_* variables ask for them, built
        # here, after the fork (telemetry/setup.py); None otherwise.
        self.telemetry = telemetry.from_environment(os.environ, database_name(dsn))
        statements = self.telemetry.statements if self.telemetry is not None else None
        self.db = Database(
            pool_config(settings, dsn),
            StatementMetrics(self.instruments.counters),
            statements.statement if statements is not None else None,
        )
        self.stats = RequestStats()
        self.requests = RequestMetrics(self.stats)
        self.ignored = IgnoredParameters()
        self.auth = Authenticator(build_verifier(settings), settings.jwt_skip_paths, AuthMetrics())
        self.started_at = time.time()
        cipher = PayloadCipher(settings.encryption_key) if settings.encryption_key else None
        minutes = self.instruments.minutes
        queue_metrics = QueueMetrics(self.instruments.counters, minutes)
        self.wakes = WakeStore(self.db)
        self.store = QueueStore(self.db, cipher, queue_metrics, self.wakes.saw_epoch)
        # Other processes wake this one's long polls only where it said it waits
        # (wake/interest.py): said before every pop, under the notifier's origin.
        origin = uuid.uuid4().hex
        self.interest = WakeInterest(self.wakes.want, self.wakes.withdraw, origin)
        cover = self.interest if settings.listen_notify else None
        self.polling = PollingService(
            settings, self.store, self.worker_id, cover, WaitMetrics(minutes)
        )
        self.admin = AdminStore(
            self.db,
            cipher,
            str(self.worker_id),
            observer=queue_metrics,
        )
        self.dlq = DlqStore(self.db, self.admin.plain)
        self.reads = ReadStore(self.db, cipher)
        self.ephemeral = EphemeralQueues(EphemeralStore(self.db))
        # Stream polls wait on the same response queues; pushes into their sources wake
        # them (streams/).
        self.stream_store = StreamStore(self.db, self.store, StreamMetrics())
        self.stream_polling = StreamPollingService(
            settings,
            StreamWindowPopper(self.stream_store),
            self.polling.responses,
            self.worker_id,
            cover,
        )
        self.streams = Streams(self.stream_store, self.stream_polling)
        self.interest.watch(self.polling.registry.waiting_selectors)
        self.interest.watch(self.stream_polling.registry.waiting_selectors)
        self.peers = PeerService(
            self._on_peer_event,
            http_peers=settings.peers,
            udp_peers=settings.udp_peers,
            udp_port=settings.udp_notify_port,
            batch_ms=settings.peer_notify_batch_ms,
            host=settings.host,
            port=settings.port,
            secret=settings.peer_secret,
            udp_bind=settings.udp_bind,
            closed=settings.jwt_enabled,
            origin=origin,
        )
        # Pushes and acks wake other processes after their commit (wake/notifier.py).
        self.targets = WakeTargets(self.wakes.read, origin, lambda: self.wakes.epoch)
        # What only this instance's other workers wait for goes over their sockets.
        self.peers.relay = SiblingRelay(self.targets, lambda: self.peers.bus)
        self.notifier = WakeNotifier(
            self.wakes.notify, origin, self.targets.wanted, self.peers.relay
        )
        self.listener = WakeupListener(self.direct_dsn, self._on_wakeup, self._wake_everything)
        # The schema, migrated in the background, and whether requests may use the database.
        self.availability = Availability(self.db, self.direct_dsn)
        self.schema_ready = self.availability.schema_ready
        self._stopping = threading.Event()
        self._shutdown_lock = threading.Lock()
        self.maintenance = Maintenance(self.db)
        self.buffer = FileBuffer(
            settings,
            self.direct_dsn,
            self.store,
            self.maintenance,
            on_replayed=lambda pairs: self.queues.announce_pushed(pairs),
            ready=self.schema_ready.is_set,
            ping=self.db.ping,
        )
        self.queues = QueueService(
            self.store,
            self.polling,
            sinks=[
                lambda event: self.stream_polling.on_event(event, "push"),
                self.peers,
                self.notifier,
            ],
            failover=self.buffer.push,
            on_push_results=count_buffered,
        )
        # The official clients' streaming SDK: its cycles push and ack like transactions.
        self.streams_sdk = StreamsSdk(self.db, self.store, self.queues, CycleMetrics())
        hostname = socket.gethostname()
        owner = f"{hostname}:{settings.port}:{self.worker_id}"
        services_observer = ServiceMetrics()
        self.operations = RetentionServices(
            settings, self.direct_dsn, owner, ready=self.schema_ready, observer=services_observer
        )
        # Analytics: this process's counts and figures (flushed by the collector), the
        # queues' levels (one process per database), and the chart reads.
        self.collector = AnalyticsCollector(
            self.db,
            minutes,
            ProcessIdentity(hostname, settings.port, str(self.worker_id)),
            ProcessReader(self.db.pool, self.polling, self.stats),
            settings.metrics_flush_interval_s,
            ready=self.schema_ready.is_set,
        )
        self.metrics_service = metrics_service(
            settings, self.direct_dsn, owner, self.schema_ready, services_observer
        )
        # Timers (timers/): this process's firer, and the fire log's retention.
        self.timers = TimerService(
            TimerStore(self.db, self.store),
            announce_pushed=self.queues.announce_pushed,
            saw_wake_epoch=self.wakes.saw_epoch,
            origin=origin,
            batch=settings.timers_fire_batch,
            max_sleep_s=settings.timers_max_sleep_ms / 1000,
            # No fire while push maintenance routes pushes away from the database.
            ready=lambda: self.schema_ready.is_set() and not self.maintenance.push_on,
            observer=queue_metrics,
        )
        self.timers_retention = ExclusiveService(
            self.direct_dsn,
            TimerFiresRetention(
                settings.timers_fired_retention_hours, settings.retention_batch_size
            ),
            settings.retention_interval_ms / 1000,
            owner=owner,
            ready=self.schema_ready,
            observer=services_observer,
        )
        self.analytics = AnalyticsStore(self.db)
        # Key/value state and locks (kv/): their store and the sweeper of expired keys.
        self.kv = KvStore(self.db, LockMetrics())
        self.kv_sweeper = kv_sweep_service(
            settings, self.direct_dsn, owner, self.schema_ready, services_observer
        )
        self.instruments.bind(
            Exposition(
                Sampler(
                    self.started_at,
                    self.db.pool,
                    self.polling,
                    self.listener,
                    self.maintenance,
                    self.peers,
                    streams=self.stream_polling,
                ),
                backlog=self.admin.backlog,
                buffer=self.buffer.status,
                collectors=[TimersCollector(self.timers.store.stats)],
            )
        )
        # Every service, in the order they start; they stop in reverse. Those of `at_exit`
        # stop only at worker exit (`stop`), after the requests in flight: the buffer and
        # the maintenance switches serve them, and the collector's last flush needs the
        # pool. The others stop when shutdown begins (`begin_shutdown`), the poll workers
        # first, so every waiting long poll is answered at once.
        wake: list[Service] = [self.listener, self.interest] if settings.listen_notify else []
        at_exit: list[Service] = [self.auth, self.collector, self.maintenance, self.buffer]
        at_shutdown: list[Service] = [
            self.availability,
            self.instruments,
            self.timers_retention,
            self.timers,
            self.kv_sweeper,
            self.metrics_service,
            self.operations,
            self.notifier,
            self.peers,
            *wake,
            self.ephemeral,
            self.stream_polling,
            self.polling,
        ]
        self.services = [*at_exit, *at_shutdown]
        self._at_exit = len(at_exit)

    def start(self) -> None:
        for service in self.services:
            service.start()

    def _on_wakeup(self, event: dict[str, Any]) -> None:
        """A NOTIFY from any process; this process's own were acted on when sent."""
        if self.timers.on_wakeup(event):
            return
        if not self.notifier.is_own(event):
            self.polling.on_event(event)
            self.stream_polling.on_event(event)

    def _on_peer_event(self, event: dict[str, Any], source: str = "notify") -> None:
        """A notification from a peer instance (or a sibling process relaying one)."""
        self.polling.on_event(event, source)
        self.stream_polling.on_event(event, source)

    def _wake_everything(self) -> None:
        self.polling.pool.wake_all("notify")
        self.stream_polling.pool.wake_all("notify")

    def begin_shutdown(self) -> None:
        """SIGTERM: refuse new long polls, answer every waiting one with 204 at once and
        stop the poll workers; requests in flight go on (the pool stays open). A second
        call returns when the first has finished."""
        with self._shutdown_lock:
            if self._stopping.is_set():
                return
            self._stopping.set()
            for service in reversed(self.services[self._at_exit :]):
                service.stop()

    def stop(self) -> None:
        """Worker exit: everything in flight has finished; close the pool."""
        self.begin_shutdown()
        for service in reversed(self.services[: self._at_exit]):
            service.stop()
        self.db.close()
        if self.telemetry is not None:
            self.telemetry.shutdown()  # the last spans go out
