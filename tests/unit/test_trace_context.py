"""The W3C trace-context rules of a push (telemetry/context.py) and when the server's own
telemetry is on (telemetry/config.py): pure functions, no database."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from queen_threads.telemetry.config import OtelConfig, database_name, from_env
from queen_threads.telemetry.context import for_item, from_headers, valid_traceparent

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.mark.parametrize(
    "value",
    [PARENT, PARENT[:-2] + "00", "01" + PARENT[2:], "cc" + PARENT[2:] + "-what-the-future-adds"],
)
def test_valid_traceparents(value: str) -> None:
    assert valid_traceparent(value)


@pytest.mark.parametrize(
    "value",
    [
        None, 42, "", "00-zzz", PARENT.upper(), PARENT + "-", PARENT[:-1],
        "ff" + PARENT[2:],  # version ff is forbidden
        "00-" + "0" * 32 + PARENT[35:],  # all-zero trace id
        PARENT[:36] + "0" * 16 + "-01",  # all-zero parent id
        "00_" + PARENT[3:],
    ],
)  # fmt: skip
def test_invalid_traceparents(value: object) -> None:
    assert not valid_traceparent(value)


def test_headers_give_the_context_and_invalid_ones_are_counted() -> None:
    told: list[str] = []
    headers = {"traceparent": f" {PARENT} ", "tracestate": "a=1,b=2"}
    assert from_headers(headers.get, told.append) == {
        "traceparent": PARENT,
        "tracestate": "a=1,b=2",
    }
    assert from_headers({}.get, told.append) is None
    assert from_headers({"traceparent": "nope", "tracestate": "a=1"}.get, told.append) is None
    # a tracestate that is not one is dropped, the traceparent kept
    assert from_headers({"traceparent": PARENT, "tracestate": "x" * 513}.get) == {
        "traceparent": PARENT
    }
    assert told == ["header"]


def test_an_items_own_fields_win_and_an_invalid_one_leaves_it_without() -> None:
    told: list[str] = []
    request = {"traceparent": PARENT}
    other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
    assert for_item({}, request, told.append) is request
    assert for_item({"traceparent": other, "tracestate": "k=v"}, request) == {
        "traceparent": other,
        "tracestate": "k=v",
    }
    assert for_item({"traceparent": "bad"}, request, told.append) is None
    assert for_item({"traceparent": None}, request, told.append) is None  # explicitly none
    assert told == ["item"]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, OtelConfig(False, False)),
        ({"OTEL_SERVICE_NAME": "x"}, OtelConfig(False, False)),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, OtelConfig(True, False)),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c/v1/traces"}, OtelConfig(True, False)),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_METRICS_EXPORTER": "otlp"},
         OtelConfig(True, True)),
        ({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://c", "OTEL_METRICS_EXPORTER": "otlp"},
         OtelConfig(False, True)),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_TRACES_EXPORTER": "none"},
         OtelConfig(False, False)),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_SDK_DISABLED": "true",
          "OTEL_METRICS_EXPORTER": "otlp"}, OtelConfig(False, False)),
    ],
)  # fmt: skip
def test_the_otel_variables_decide(env: dict[str, str], expected: OtelConfig) -> None:
    assert from_env(env) == expected


def test_database_name() -> None:
    assert database_name("postgresql://u:p@h:5432/queen%2Dx?sslmode=disable") == "queen-x"
    assert database_name("host=/tmp port=5 dbname=q user=u") == "q"
    assert database_name("host=h") is None


def test_variables_asking_for_export_without_the_sdk_stop_the_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from queen_threads.errors import ConfigError
    from queen_threads.telemetry import service

    service.check({})  # nothing asked for: nothing looked up
    service.check({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"})  # installed here
    monkeypatch.setattr(service, "NEEDED", ("opentelemetry.not_installed",))
    service.check({})
    with pytest.raises(ConfigError) as refused:
        service.check({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"})
    # from this checkout: the exact command, into the environment the server runs in
    root = Path(__file__).resolve().parents[2]
    command = f"{sys.executable} -m pip install -e '{root}[otel]'"
    assert command in str(refused.value) and "scripts/serve installs it" in str(refused.value)


def test_what_a_messaging_answer_says_for_its_span() -> None:
    import orjson

    from queen_threads.telemetry.answers import delivered, settled

    pop = {"queue": "q", "consumerGroup": "g", "messages": [{"id": "1"}, None, {"id": "2"}]}
    assert delivered(orjson.dumps(pop)) == ([{"id": "1"}, {"id": "2"}], pop)
    window = {"window": {"stream": "s", "messages": [{"id": "1"}]}}
    assert delivered(orjson.dumps(window))[0] == [{"id": "1"}]
    fetch = {"entries": [{"records": [{"offset": 0}, {"offset": 1}]}, {"records": []}]}
    assert delivered(orjson.dumps(fetch))[0] == [{"offset": 0}, {"offset": 1}]
    assert delivered(b"[1, 2]") == ([], {}) and delivered(b"not json") == ([], {})
    acks = [{"queueName": "q"}, {"queueName": "q"}]
    assert settled(orjson.dumps(acks)) == (2, "q")
    assert settled(orjson.dumps([{"queueName": "a"}, {"queueName": "b"}])) == (2, None)
    assert settled(orjson.dumps({"queue": "e", "results": [{}, {}, {}]})) == (3, "e")
    assert settled(orjson.dumps({"stream": "s", "success": True})) == (None, "s")
    assert settled(b"{") == (None, None)
