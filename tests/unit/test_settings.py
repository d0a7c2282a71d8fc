from __future__ import annotations

import re
from pathlib import Path

import pytest

from queen_threads.errors import ConfigError
from queen_threads.settings import load_settings, setting_fields

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_defaults_follow_the_original() -> None:
    s = load_settings({}, dotenv_path=None)
    assert s.port == 6632
    assert s.host == "0.0.0.0"
    assert s.db_pool_size == 150
    assert s.db_statement_timeout_ms == 30000
    assert s.uses_embedded_database


@pytest.mark.parametrize(
    ("name", "value"),
    [("PORT", "abc"), ("PORT", "70000"), ("DB_POOL_SIZE", "1"), ("LOG_LEVEL", "loud"),
     ("PG_USE_SSL", "maybe")],
)  # fmt: skip
def test_malformed_value_names_the_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=rf"invalid {name}: "):
        load_settings({name: value}, dotenv_path=None)


def test_dotenv_file_is_read_and_environment_wins(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("PORT=7001\nPG_HOST=db.example\n")
    s = load_settings({"PG_HOST": "other"}, dotenv_path=str(env_file))
    assert s.port == 7001
    assert s.pg_host == "other"
    assert not s.uses_embedded_database


def test_dsn_from_pg_variables_and_database_url() -> None:
    s = load_settings({"PG_HOST": "h", "PG_PORT": "5555", "PG_USER": "u", "PG_PASSWORD": "p@ss",
                       "PG_DB": "d"}, dotenv_path=None)  # fmt: skip
    assert s.dsn() == "postgresql://u:p%40ss@h:5555/d?sslmode=disable"
    s = load_settings({"DATABASE_URL": "postgresql://x@y/z", "PG_HOST": "h"}, dotenv_path=None)
    assert s.dsn() == "postgresql://x@y/z"


def test_a_socket_folder_is_refused_beside_a_pooler() -> None:
    pooled = {
        "DATABASE_URL": "postgresql://x@pooler/z",
        "DATABASE_DIRECT_URL": "postgresql://x@db/z",
    }
    with pytest.raises(ConfigError, match="DATABASE_SOCKET_DIR bypasses the pooler"):
        load_settings(pooled | {"DATABASE_SOCKET_DIR": "/run/pg"}, dotenv_path=None)
    s = load_settings({"DATABASE_URL": "postgresql://x@y/z", "DATABASE_SOCKET_DIR": "/run/pg"},
                      dotenv_path=None)  # fmt: skip
    assert s.database_socket_dir == "/run/pg"


def test_no_database_configured_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="no database configured"):
        load_settings({}, dotenv_path=None).dsn()


def test_pool_budget_is_shared_across_workers() -> None:
    s = load_settings({"DB_POOL_SIZE": "40", "NUM_WORKERS": "4"}, dotenv_path=None)
    assert s.workers_pool_size() == 10


def test_every_variable_is_documented_in_configuration_md() -> None:
    documented = set(re.findall(r"^\|\s*`([A-Z][A-Z0-9_]+)`", DOCS.read_text(), re.MULTILINE))
    declared = {f.metadata["env"] for f in setting_fields()}
    assert declared <= documented, f"undocumented: {sorted(declared - documented)}"
    assert documented <= declared, f"documented but not read: {sorted(documented - declared)}"


def test_tls_needs_both_files_and_readable_ones(tmp_path: Path) -> None:
    cert = tmp_path / "cert.pem"
    cert.write_text("x")
    with pytest.raises(ConfigError, match="SSL_CERTFILE and SSL_KEYFILE"):
        load_settings({"SSL_CERTFILE": str(cert)}, dotenv_path=None)
    with pytest.raises(ConfigError, match="invalid SSL_KEYFILE: cannot read"):
        load_settings(
            {"SSL_CERTFILE": str(cert), "SSL_KEYFILE": str(tmp_path / "missing.pem")},
            dotenv_path=None,
        )
    s = load_settings({"SSL_CERTFILE": str(cert), "SSL_KEYFILE": str(cert)}, dotenv_path=None)
    assert s.ssl_certfile == s.ssl_keyfile == str(cert)


def test_without_a_direct_url_everything_uses_the_pool_database() -> None:
    s = load_settings({"DATABASE_URL": "postgresql://x@pool/z"}, dotenv_path=None)
    assert s.direct_dsn(s.dsn()) == "postgresql://x@pool/z"
    assert not s.transaction_pooled


def test_a_direct_url_serves_the_session_connections_and_means_a_transaction_pooler() -> None:
    env = {"DATABASE_URL": "postgresql://x@bouncer/z", "DATABASE_DIRECT_URL": "postgresql://x@pg/z"}
    s = load_settings(env, dotenv_path=None)
    assert s.dsn() == "postgresql://x@bouncer/z"
    assert s.direct_dsn(s.dsn()) == "postgresql://x@pg/z"
    assert s.transaction_pooled
    direct_only = load_settings({**env, "DATABASE_POOLER": "none"}, dotenv_path=None)
    assert not direct_only.transaction_pooled


def test_a_transaction_pooler_needs_a_direct_url() -> None:
    with pytest.raises(ConfigError, match="DATABASE_POOLER=transaction needs DATABASE_DIRECT_URL"):
        load_settings({"PG_HOST": "bouncer", "DATABASE_POOLER": "transaction"}, dotenv_path=None)
    s = load_settings(
        {"PG_HOST": "bouncer", "DATABASE_POOLER": "transaction",
         "DATABASE_DIRECT_URL": "postgresql://x@pg/z"},
        dotenv_path=None,
    )  # fmt: skip
    assert s.transaction_pooled


def test_a_direct_url_without_a_pool_database_is_refused() -> None:
    with pytest.raises(ConfigError, match="DATABASE_DIRECT_URL needs DATABASE_URL or PG_HOST"):
        load_settings({"DATABASE_DIRECT_URL": "postgresql://x@pg/z"}, dotenv_path=None)


def test_stream_poll_defaults_follow_the_original() -> None:
    s = load_settings({}, dotenv_path=None)
    assert (s.stream_poll_worker_count, s.stream_poll_worker_interval_ms) == (1, 100)
    assert (s.stream_poll_interval_ms, s.stream_max_poll_interval_ms) == (1000, 5000)
    assert (s.stream_backoff_threshold, s.stream_backoff_multiplier) == (5, 2.0)
    assert s.stream_concurrent_checks == 2


@pytest.mark.parametrize(
    ("name", "value"),
    [("STREAM_POLL_WORKER_COUNT", "0"), ("STREAM_POLL_WORKER_COUNT", "65"),
     ("STREAM_POLL_WORKER_INTERVAL", "0"), ("STREAM_POLL_INTERVAL", "0"),
     ("STREAM_BACKOFF_THRESHOLD", "-1"), ("STREAM_BACKOFF_MULTIPLIER", "0.5"),
     ("STREAM_MAX_POLL_INTERVAL", "0"), ("STREAM_CONCURRENT_CHECKS", "0"),
     ("STREAM_CONCURRENT_CHECKS", "65"), ("STREAM_CONCURRENT_CHECKS", "two")],
)  # fmt: skip
def test_bad_stream_poll_values_are_refused(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=rf"invalid {name}: "):
        load_settings({name: value}, dotenv_path=None)


def test_stream_max_poll_interval_cannot_be_below_the_base_interval() -> None:
    with pytest.raises(ConfigError, match=r"STREAM_MAX_POLL_INTERVAL .* STREAM_POLL_INTERVAL"):
        load_settings({"STREAM_MAX_POLL_INTERVAL": "500"}, dotenv_path=None)
    with pytest.raises(ConfigError, match="STREAM_MAX_POLL_INTERVAL"):
        load_settings({"STREAM_POLL_INTERVAL": "6000"}, dotenv_path=None)
    s = load_settings(
        {"STREAM_POLL_INTERVAL": "200", "STREAM_MAX_POLL_INTERVAL": "200",
         "STREAM_BACKOFF_THRESHOLD": "0", "STREAM_CONCURRENT_CHECKS": "64"},
        dotenv_path=None,
    )  # fmt: skip
    assert (s.stream_poll_interval_ms, s.stream_max_poll_interval_ms) == (200, 200)
    assert (s.stream_backoff_threshold, s.stream_concurrent_checks) == (0, 64)


def test_each_variable_belongs_to_one_concern() -> None:
    """Settings combines the concerns' classes: a name declared in two of them would
    silently keep one declaration, so names and env variables are unique across them."""
    from dataclasses import fields

    from queen_threads.settings import Settings

    concerns = [base for base in Settings.__mro__[1:] if "__dataclass_fields__" in vars(base)]
    assert len(concerns) >= 7
    declared = [f.name for base in concerns for f in fields(base)]
    assert len(declared) == len(set(declared)) == len(setting_fields())
    names = [f.metadata["env"] for f in setting_fields()]
    assert len(names) == len(set(names))
