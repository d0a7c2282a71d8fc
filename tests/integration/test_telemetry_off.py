"""Without the OTEL_* variables nothing of OpenTelemetry is loaded: a whole Runtime and app
are built, a push and a pop served, in a fresh interpreter, and its sys.modules checked.
With them, the SDK is loaded (the same check is not vacuous)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import sys
import falcon.testing
from queen_threads.app import create_app
from queen_threads.runtime import Runtime
from queen_threads.settings import load_settings

runtime = Runtime(load_settings({}, dotenv_path=None), sys.argv[1])
runtime.start()
try:
    client = falcon.testing.TestClient(create_app(runtime))
    items = [{"queue": "off", "payload": 1}]
    headers = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    pushed = client.simulate_post("/api/v1/push", json={"items": items}, headers=headers)
    assert pushed.status_code == 201
    popped = client.simulate_get("/api/v1/pop/queue/off", params={"wait": "false"})
    assert popped.json["messages"][0]["traceContext"] == {"traceparent": headers["traceparent"]}
finally:
    runtime.stop()
print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""


def loaded(dsn: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, dsn], env={**clean, **env}, cwd=ROOT,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_nothing_of_opentelemetry_is_imported_without_the_variables(migrated_dsn: str) -> None:
    assert loaded(migrated_dsn) == "[]"


def test_the_sdk_is_imported_with_them(migrated_dsn: str) -> None:
    # an endpoint nobody listens on: the export fails quietly, the requests do not
    found = loaded(migrated_dsn, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9")
    assert "opentelemetry.sdk.trace" in found
