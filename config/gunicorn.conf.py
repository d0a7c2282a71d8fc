"""gunicorn configuration of queen-threads: every knob comes from the environment.

Run: gunicorn -c config/gunicorn.conf.py queen_threads.wsgi:app
(`queen-threads serve` does this for you, and starts an embedded PostgreSQL if needed.)

Memory: gevent patches the standard library here, first, in the master; `on_starting`
then imports the application's modules in the master and `pre_fork` freezes them
(gc.freeze), so the workers share those pages with the master (copy-on-write) instead of
each importing its own copy. The app itself (queen_threads.wsgi: runtime, pool, services)
is still built in each worker, after psycopg2 is made cooperative (`post_fork`).
"""

from __future__ import annotations

# Before any other import: what the master imports binds the cooperative socket, ssl,
# threading and time, exactly as it would after the worker's own patch_all.
from gevent import monkey

monkey.patch_all()

import gc  # noqa: E402
import importlib  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from queen_threads.auth import build_verifier  # noqa: E402
from queen_threads.settings import load_settings  # noqa: E402
from queen_threads.telemetry import service as telemetry  # noqa: E402

_settings = load_settings()  # a malformed variable stops the master with one clear line
build_verifier(_settings)  # so does JWT_ENABLED=true without a usable key
telemetry.check(os.environ)  # and OTEL_* variables without the OpenTelemetry SDK

bind = f"{_settings.host}:{_settings.port}"
workers = _settings.num_workers
# gunicorn's gevent worker, with deadlines on request heads for slow and silent clients
# (queen_threads/http/worker.py, QUEEN_REQUEST_HEAD_TIMEOUT, QUEEN_IDLE_CONNECTION_TIMEOUT).
worker_class = "queen_threads.http.worker.QueenGeventWorker"
# One listening socket per worker (SO_REUSEPORT, gunicorn >= 22 creates them in each worker):
# the kernel hashes new connections over the workers. With one shared socket the first
# worker to wake accepts a whole burst of connections, and keep-alive clients stay there.
reuse_port = _settings.reuse_port
worker_connections = _settings.worker_connections
graceful_timeout = _settings.graceful_timeout
timeout = 60
# Keep-alive on (0 would make gunicorn read heads without any deadline); the worker bounds
# the wait between requests itself. gunicorn also closes an idle HTTP/2 connection after it.
keepalive = max(1, math.ceil(_settings.idle_connection_timeout_s))
preload_app = False  # the app (runtime, pool, services) is built in each worker
loglevel = "warning" if _settings.log_level == "error" else "info"
accesslog = None  # queen-threads writes its own structured access line per request
proc_name = "queen-threads"
control_socket_disable = True  # several instances may run on one host
if _settings.ssl_certfile:
    certfile = _settings.ssl_certfile
    keyfile = _settings.ssl_keyfile


_PROMETHEUS_ENV = "PROMETHEUS_MULTIPROC_DIR"
_PROMETHEUS_TMP_PREFIX = "queen-prometheus-"


def on_starting(server: Any) -> None:
    """Prometheus multiprocess mode: every worker writes its metrics into one folder, which
    must be empty when the server starts (stale files of an earlier run would be summed).
    Without PROMETHEUS_MULTIPROC_DIR a fresh temporary folder is created (removed at exit).
    The workers inherit the variable (set before they are forked)."""
    folder = _settings.prometheus_multiproc_dir
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        for stale in Path(folder).glob("*.db"):
            stale.unlink(missing_ok=True)
    else:
        folder = tempfile.mkdtemp(prefix=_PROMETHEUS_TMP_PREFIX)
    os.environ[_PROMETHEUS_ENV] = folder
    import_shared_modules()
    # The maintenance switches: one memory page every worker inherits, so a switch made
    # through one worker holds in all of them at once (queen_threads/background/flags.py).
    from queen_threads.background import flags

    flags.share_between_workers()


def import_shared_modules() -> None:
    """Import in the master what every worker imports, so that the workers share it.
    After PROMETHEUS_MULTIPROC_DIR is set: prometheus-client picks its multiprocess mode
    when it is first imported."""
    import mimetypes

    import queen_threads.app
    import queen_threads.runtime  # noqa: F401

    mimetypes.init()  # falcon's App() reads the system's table (~0.3 MB): read it once, here

    if _settings.encryption_key:  # the workers' PayloadCipher (cryptography otherwise not loaded)
        import cryptography.hazmat.primitives.ciphers.aead  # noqa: F401

    # The OpenTelemetry SDK's modules when the OTEL_* variables ask for it: imported only,
    # its providers and their export threads are each worker's, built after the fork.
    if telemetry.wanted(os.environ):
        importlib.import_module("queen_threads.telemetry.setup")


def pre_fork(server: Any, worker: Any) -> None:
    """Move everything the master holds into the collector's permanent generation: a
    collection in a worker then never writes to (and so never copies) those pages."""
    gc.freeze()


def child_exit(server: Any, worker: Any) -> None:
    """A worker is gone: drop its live gauges (its counters keep counting in the totals)."""
    if os.environ.get(_PROMETHEUS_ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


def on_exit(server: Any) -> None:
    """Remove the temporary folder on_starting created (a configured one is kept)."""
    folder = Path(os.environ.get(_PROMETHEUS_ENV, ""))
    if folder.name.startswith(_PROMETHEUS_TMP_PREFIX) and folder.parent == Path(
        tempfile.gettempdir()
    ):
        shutil.rmtree(folder, ignore_errors=True)


def post_fork(server: Any, worker: Any) -> None:
    from queen_threads.db import make_cooperative

    make_cooperative()


def post_worker_init(worker: Any) -> None:
    """On SIGTERM answer waiting long polls at once (204), then drain as gunicorn does:
    gunicorn's own handler only stops accepting, and a long poll would hold the worker
    until its deadline or the graceful timeout."""
    import signal

    import gevent

    def on_term(signum: int, frame: Any) -> None:
        worker.alive = False
        wsgi = sys.modules.get("queen_threads.wsgi")
        if wsgi is not None:
            gevent.spawn(wsgi.runtime.begin_shutdown)

    signal.signal(signal.SIGTERM, on_term)


def worker_int(worker: Any) -> None:
    _stop_runtime()


def worker_exit(server: Any, worker: Any) -> None:
    _stop_runtime()


def _stop_runtime() -> None:
    wsgi = sys.modules.get("queen_threads.wsgi")
    if wsgi is not None:
        wsgi.runtime.stop()
