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
from typing import Any

from queen_threads import __version__, migrate
from queen_threads.auth import Authenticator, build_verifier
from queen_threads.background.exclusive import ExclusiveService
from queen_threads.background.maintenance import Maintenance
from queen_threads.background.metrics_job import metrics_service
from queen_threads.background.retention import RetentionServices
from queen_threads.buffer import FileBuffer
from queen_threads.crypto import PayloadCipher
from queen_threads.db import Database, PoolConfig
from queen_threads.ephemeral import EphemeralQueues, EphemeralStore
from queen_threads.errors import DatabaseUnavailable, MigrationError
from queen_threads.kv import KvStore, kv_sweep_service
from queen_threads.metrics import (
    AnalyticsCollector,
    Instruments,
    MeteredAuthenticator,
    MeteredPollingService,
    MeteredQueueStore,
    MeteredStreamsSdk,
    MeteredStreamStore,
    ObservedRequestStats,
    ProcessIdentity,
    ProcessReader,
    RequestStats,
    Sampler,
    TimedDatabase,
    count_buffered,
    count_lock_acquires,
    observe_service,
)
from queen_threads.metrics.ignored import IgnoredParameters
from queen_threads.queue.admin_store import AdminStore
from queen_threads.queue.analytics_store import AnalyticsStore
from queen_threads.queue.polling import PollingService
from queen_threads.queue.service import QueueService
from queen_threads.queue.store import QueueStore
from queen_threads.queue.streams import Streams
from queen_threads.reads import ReadStore
from queen_threads.settings import Settings
from queen_threads.timers import TimerFiresRetention, TimersCollector, TimerService, TimerStore
from queen_threads.wake.interest import WakeInterest
from queen_threads.wake.listener import WakeupListener
from queen_threads.wake.notifier import WakeNotifier
from queen_threads.wake.peers import PeerService
from queen_threads.wake.siblings import SiblingRelay
from queen_threads.wake.targets import WakeTargets

log = logging.getLogger("queen_threads.runtime")

UNAVAILABLE_RETRY_S = 2  # Retry-After of a pop refused while the database is down
SCHEMA_RETRY_MAX_S = 2.0  # longest pause between migration attempts at start


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
        # Metered subclasses: they feed /metrics and /metrics/prometheus (metrics/).
        self.instruments = Instruments()
        self.db: Database = TimedDatabase(pool_config(settings, dsn), self.instruments.counters)
        self.stats: RequestStats = ObservedRequestStats()
        self.ignored = IgnoredParameters()
        self.auth: Authenticator = MeteredAuthenticator(
            build_verifier(settings), settings.jwt_skip_paths
        )
        self.started_at = time.time()
        cipher = PayloadCipher(settings.encryption_key) if settings.encryption_key else None
        minutes = self.instruments.minutes
        self.store: QueueStore = MeteredQueueStore(
            self.db, cipher, self.instruments.counters, minutes
        )
        # Other processes wake this one's long polls only where it said it waits
        # (wake/interest.py): said before every pop, under the notifier's origin.
        origin = uuid.uuid4().hex
        self.interest = WakeInterest(self.store.want_wakes, self.store.withdraw_wakes, origin)
        cover = self.interest if settings.listen_notify else None
        self.polling: PollingService = MeteredPollingService(
            settings, self.store, self.worker_id, minutes, cover
        )
        self.admin = AdminStore(
            self.db,
            cipher,
            str(self.worker_id),
            on_decryption_error=self.store.decryption_failed,
        )
        self.queues = QueueService(self.store, self.polling)
        self.reads = ReadStore(self.db, cipher)
        self.ephemeral = EphemeralQueues(EphemeralStore(self.db))
        self.queues.on_push_results = count_buffered
        # Streams wait on the same response queues; pushes into their sources wake them.
        self.streams = Streams(
            settings,
            MeteredStreamStore(self.db, self.store),
            self.polling.responses,
            self.worker_id,
            cover,
        )
        # The official clients' streaming SDK: its cycles push and ack like transactions.
        self.streams_sdk = MeteredStreamsSdk(self.db, self.store, self.queues)
        self.interest.watch(self.polling.registry.waiting_selectors)
        self.interest.watch(self.streams.registry.waiting_selectors)
        self.queues.sinks.append(lambda event: self.streams.on_event(event, "push"))
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
        self.queues.sinks.append(self.peers)
        # Pushes and acks wake other processes after their commit (wake/notifier.py).
        self.targets = WakeTargets(
            self.store.read_wake_interest, origin, lambda: self.store.wake_epoch
        )
        # What only this instance's other workers wait for goes over their sockets.
        self.peers.relay = SiblingRelay(self.targets, lambda: self.peers.bus)
        self.notifier = WakeNotifier(self.store.wake, origin, self.targets.wanted, self.peers.relay)
        self.queues.sinks.append(self.notifier)
        self.listener = WakeupListener(self.direct_dsn, self._on_wakeup, self._wake_everything)
        self.schema_ready = threading.Event()
        self._schema_retry = threading.Event()  # try the migration now, not after the backoff
        self.schema_error: str | None = None  # why the last migration attempt failed
        self._stopping = threading.Event()
        self._shutdown_lock = threading.Lock()
        self.maintenance = Maintenance(self.db)
        self.buffer = FileBuffer(
            settings,
            self.direct_dsn,
            self.store,
            self.maintenance,
            on_replayed=self.queues.announce_pushed,
            ready=self.schema_ready.is_set,
            ping=self.db.ping,
        )
        self.queues.failover = self.buffer.push
        hostname = socket.gethostname()
        owner = f"{hostname}:{settings.port}:{self.worker_id}"
        self.operations = RetentionServices(
            settings, self.direct_dsn, owner, ready=self.schema_ready, observer=observe_service
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
            settings, self.direct_dsn, owner, self.schema_ready, observe_service
        )
        # Timers (timers/): this process's firer, and the fire log's retention.
        self.timers = TimerService(
            TimerStore(self.db, self.store),
            announce_pushed=self.queues.announce_pushed,
            saw_wake_epoch=self.store.saw_wake_epoch,
            count_stored=self.store.stored_by_timers,
            origin=origin,
            batch=settings.timers_fire_batch,
            max_sleep_s=settings.timers_max_sleep_ms / 1000,
            # No fire while push maintenance routes pushes away from the database.
            ready=lambda: self.schema_ready.is_set() and not self.maintenance.push_on,
        )
        self.timers_retention = ExclusiveService(
            self.direct_dsn,
            TimerFiresRetention(
                settings.timers_fired_retention_hours, settings.retention_batch_size
            ),
            settings.retention_interval_ms / 1000,
            owner=owner,
            ready=self.schema_ready,
            observer=observe_service,
        )
        self.analytics = AnalyticsStore(self.db)
        # Key/value state and locks (kv/): their store and the sweeper of expired keys.
        self.kv = KvStore(self.db, count_lock_acquires)
        self.kv_sweeper = kv_sweep_service(
            settings, self.direct_dsn, owner, self.schema_ready, observe_service
        )
        self.instruments.bind(
            Sampler(
                self.started_at,
                self.db.pool,
                self.polling,
                self.listener,
                self.maintenance,
                self.peers,
                streams=self.streams,
            ),
            backlog=self.admin.backlog,
            buffer=self.buffer.status,
        )
        assert self.instruments.exposition is not None
        self.instruments.exposition.collectors.append(TimersCollector(self.timers.store.stats))

    def start(self) -> None:
        threading.Thread(target=self._ensure_schema, name="migrate", daemon=True).start()
        self.auth.start()
        self.polling.start()
        self.streams.start()
        if self.settings.listen_notify:
            self.listener.start()
            self.interest.start()
        self.peers.start()
        self.notifier.start()
        self.maintenance.start()
        self.buffer.start()
        self.operations.start()
        self.metrics_service.start()
        self.kv_sweeper.start()
        self.timers.start()
        self.timers_retention.start()
        self.collector.start()
        self.instruments.start()

    def _on_wakeup(self, event: dict[str, Any]) -> None:
        """A NOTIFY from any process; this process's own were acted on when sent."""
        if self.timers.on_wakeup(event):
            return
        if not self.notifier.is_own(event):
            self.polling.on_event(event)
            self.streams.on_event(event)

    def _on_peer_event(self, event: dict[str, Any], source: str = "notify") -> None:
        """A notification from a peer instance (or a sibling process relaying one)."""
        self.polling.on_event(event, source)
        self.streams.on_event(event, source)

    def _wake_everything(self) -> None:
        self.polling.pool.wake_all("notify")
        self.streams.polling.pool.wake_all("notify")

    def _ensure_schema(self) -> None:
        """Apply migrations; while the database is down keep trying in the background
        (every SCHEMA_RETRY_MAX_S at most, so the replay starts soon after it is back).
        A failure is logged as a warning when its reason changes, else at debug level."""
        delay = 0.5
        timeout_s = self.db.pool.config.connect_timeout_s
        while not self._stopping.is_set():
            try:
                migrate.migrate(self.direct_dsn, timeout_s)
                if self.schema_error is not None:
                    log.warning("schema ready; the database answers again")
                self.schema_ready.set()
                self.schema_error = None
                return
            except MigrationError as exc:
                level = logging.DEBUG if str(exc) == self.schema_error else logging.WARNING
                self.schema_error = str(exc)
                log.log(level, "schema not ready yet: %s", exc)
            self._schema_retry.wait(delay)
            self._schema_retry.clear()
            delay = min(delay * 2, SCHEMA_RETRY_MAX_S)

    def schema_ready_now(self, wait_s: float = 1.0) -> bool:
        """True when the schema is ready; otherwise ask the migration loop to try at once
        (the database answers again: no process should wait out its backoff, nor answer
        503 meanwhile) and wait up to `wait_s` for it."""
        if self.schema_ready.is_set():
            return True
        self._schema_retry.set()
        return self.schema_ready.wait(wait_s)

    def require_database(self) -> None:
        """Raise DatabaseUnavailable (503 + Retry-After) when PostgreSQL is known to be
        unreachable, or reachable without its schema. Costs no round trip, except once per
        process before anything used the database (a ping then finds out)."""
        pool = self.db.pool
        if pool.reachable is None:
            self.db.ping()
        if pool.reachable is False:
            raise DatabaseUnavailable(
                pool.last_error or "database unavailable", UNAVAILABLE_RETRY_S
            )
        if self.schema_error is not None and not self.schema_ready_now():
            raise DatabaseUnavailable(
                f"database schema not ready yet: {self.schema_error}", UNAVAILABLE_RETRY_S
            )

    def begin_shutdown(self) -> None:
        """SIGTERM: refuse new long polls, answer every waiting one with 204 at once and
        stop the poll workers; requests in flight go on (the pool stays open). A second
        call returns when the first has finished."""
        with self._shutdown_lock:
            if self._stopping.is_set():
                return
            self._stopping.set()
            self._schema_retry.set()
            self.polling.stop(timeout=1.0)
            self.streams.stop(timeout=1.0)
            self.ephemeral.stop()
            self.interest.stop()
            self.listener.stop()
            self.peers.stop()
            self.notifier.stop()
            self.operations.stop()
            self.metrics_service.stop()
            self.kv_sweeper.stop()
            self.timers.stop()
            self.timers_retention.stop()
            self.instruments.stop()

    def stop(self) -> None:
        """Worker exit: everything in flight has finished; close the pool."""
        self.begin_shutdown()
        self.buffer.stop()
        self.maintenance.stop()
        self.collector.stop()  # the last flush, while the pool is open
        self.db.close()
