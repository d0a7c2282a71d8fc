"""gunicorn configuration of queen-threads: every knob comes from the environment.

Run: gunicorn -c config/gunicorn.conf.py queen_threads.wsgi:app
(`queen-threads serve` does this for you, and starts an embedded PostgreSQL if needed.)
"""

from __future__ import annotations

import sys
from typing import Any

from queen_threads.settings import load_settings

_settings = load_settings()  # a malformed variable stops the master with one clear line

bind = f"{_settings.host}:{_settings.port}"
workers = _settings.num_workers
worker_class = "gevent"
worker_connections = _settings.worker_connections
graceful_timeout = _settings.graceful_timeout
timeout = 60
keepalive = 75
preload_app = False  # the app must load after gevent patching, in each worker
loglevel = "warning" if _settings.log_level == "error" else "info"
accesslog = None  # queen-threads writes its own structured access line per request
proc_name = "queen-threads"
control_socket_disable = True  # several instances may run on one host


def post_fork(server: Any, worker: Any) -> None:
    from queen_threads.db import make_cooperative

    make_cooperative()


def post_worker_init(worker: Any) -> None:
    """On SIGTERM answer parked long polls at once (204), then drain as gunicorn does."""
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
