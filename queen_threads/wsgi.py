"""The only module that builds real objects at import time (gunicorn loads it per worker)."""

from __future__ import annotations

import gc

from queen_threads import logs
from queen_threads.app import create_app
from queen_threads.runtime import Runtime
from queen_threads.settings import load_settings

settings = load_settings()
logs.configure(settings.log_level)
runtime = Runtime(settings, settings.dsn())
runtime.start()
app = create_app(runtime)

# Everything built so far lives as long as the worker: keep the cyclic collector off it, and
# collect young objects less often (thousands of waiting long polls make every pass long).
gc.freeze()
gc.set_threshold(50_000, 20, 100)
