"""JWT settings: off by default, and JWT_ENABLED=true without a usable key stops the start
with one clear line."""

from __future__ import annotations

from pathlib import Path

import pytest

from queen_threads.auth import build_verifier
from queen_threads.errors import ConfigError
from queen_threads.settings import load_settings
from tests.support.tokens import SECRET, ed_key, public_pem, rsa_key


def build(**env: str) -> object:
    return build_verifier(load_settings(env, dotenv_path=None))


def test_off_by_default_with_the_original_defaults() -> None:
    s = load_settings({}, dotenv_path=None)
    assert not s.jwt_enabled and build() is None
    assert s.jwt_algorithm == "HS256" and s.jwt_clock_skew_s == 30
    assert s.jwt_skip_paths == ("/health", "/metrics/prometheus", "/metrics", "/")
    assert s.cors_allowed_origins == ("*",)
    assert build(JWT_SECRET="short") is None  # ignored while off


def test_algorithm_names_are_matched_in_any_case() -> None:
    assert load_settings({"JWT_ALGORITHM": "eddsa"}, dotenv_path=None).jwt_algorithm == "EdDSA"
    assert load_settings({"JWT_ALGORITHM": "Auto"}, dotenv_path=None).jwt_algorithm == "auto"


@pytest.mark.parametrize(
    ("env", "message"),
    [({}, "no key to verify tokens with: JWT_ALGORITHM=HS256 needs JWT_SECRET"),
     ({"JWT_ALGORITHM": "RS256"}, "JWT_ALGORITHM=RS256 needs JWT_PUBLIC_KEY"),
     ({"JWT_ALGORITHM": "auto"}, "JWT_ALGORITHM=auto needs JWT_SECRET, JWT_PUBLIC_KEY or"),
     ({"JWT_SECRET": "too-short"}, "JWT_SECRET must be at least 32 bytes"),
     ({"JWT_ALGORITHM": "RS256", "JWT_SECRET": SECRET,
       "JWT_JWKS_URL": "https://idp/jwks"}, "JWT_SECRET is set but JWT_ALGORITHM=RS256 never"),
     ({"JWT_SECRET": SECRET, "JWT_JWKS_URL": "https://idp/jwks"}, "HS256 never uses them"),
     ({"JWT_ALGORITHM": "RS256", "JWT_PUBLIC_KEY": "-----BEGIN PUBLIC KEY-----\nx\n"
       "-----END PUBLIC KEY-----"}, "invalid JWT_PUBLIC_KEY: not a PEM"),
     ({"JWT_ALGORITHM": "auto", "JWT_PUBLIC_KEY": "PEM", "JWT_JWKS_URL": "https://idp/jwks"},
      "invalid JWT_PUBLIC_KEY"),
     ({"JWT_ALGORITHM": "RS256", "JWT_JWKS_URL": "ftp://idp/jwks"}, "invalid JWT_JWKS_URL")],
)  # fmt: skip
def test_enabled_without_a_usable_key_is_refused(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        build(JWT_ENABLED="true", **env)


def test_public_key_and_jwks_together_are_ambiguous() -> None:
    with pytest.raises(ConfigError, match="JWT_PUBLIC_KEY or JWT_JWKS_URL, not both"):
        build(JWT_ENABLED="true", JWT_ALGORITHM="RS256", JWT_PUBLIC_KEY=public_pem(rsa_key()),
              JWT_JWKS_URL="https://idp/jwks")  # fmt: skip


def test_a_key_of_the_wrong_type_for_the_algorithm() -> None:
    with pytest.raises(ConfigError, match="Ed25519PublicKey, which cannot verify RS256"):
        build(JWT_ENABLED="true", JWT_ALGORITHM="RS256", JWT_PUBLIC_KEY=public_pem(ed_key()))


def test_an_unreadable_key_file_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="invalid JWT_PUBLIC_KEY: neither a PEM"):
        load_settings({"JWT_PUBLIC_KEY": str(tmp_path / "missing.pem")}, dotenv_path=None)


@pytest.mark.parametrize(
    ("name", "value"),
    [("JWT_ALGORITHM", "HS512"), ("JWT_ENABLED", "perhaps"), ("JWT_CLOCK_SKEW", "-1"),
     ("JWT_SKIP_PATHS", "health"), ("CORS_ALLOWED_ORIGINS", "*,https://a.example"),
     ("CORS_ALLOWED_ORIGINS", "https://a.example/path"), ("CORS_ALLOWED_ORIGINS", "a.example")],
)  # fmt: skip
def test_malformed_values_name_the_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=rf"invalid {name}: "):
        load_settings({name: value}, dotenv_path=None)


def test_usable_configurations() -> None:
    assert build(JWT_ENABLED="true", JWT_SECRET=SECRET) is not None
    assert build(JWT_ENABLED="true", JWT_ALGORITHM="auto", JWT_SECRET=SECRET,
                 JWT_JWKS_URL="http://127.0.0.1:9/jwks") is not None  # fmt: skip
    assert build(JWT_ENABLED="true", JWT_ALGORITHM="EdDSA",
                 JWT_PUBLIC_KEY=public_pem(ed_key())) is not None  # fmt: skip
