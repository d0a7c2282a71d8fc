from __future__ import annotations

import base64
import os

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from queen_threads.crypto import DECRYPTION_ERROR_FIELD, NO_KEY, PayloadCipher, open_message
from queen_threads.errors import DecryptionError

KEY = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"


@pytest.mark.parametrize("payload", [None, {}, [], "text", 42, {"nested": {"a": [1, 2, None]}}])
def test_round_trip_any_json(payload: object) -> None:
    cipher = PayloadCipher(KEY)
    sealed = cipher.encrypt(payload)
    assert set(sealed) == {"encrypted", "iv", "authTag"}
    assert cipher.decrypt(sealed) == payload


def test_wrong_key_or_tampering_raises_with_a_short_reason() -> None:
    sealed = PayloadCipher(KEY).encrypt({"secret": 1})
    with pytest.raises(DecryptionError, match="wrong key or damaged ciphertext"):
        PayloadCipher("ff" * 32).decrypt(sealed)
    flipped = sealed["encrypted"][:-2] + ("AA" if sealed["encrypted"][-2:] != "AA" else "BB")
    with pytest.raises(DecryptionError, match="wrong key or damaged ciphertext"):
        PayloadCipher(KEY).decrypt({**sealed, "encrypted": flipped})


@pytest.mark.parametrize(
    ("stored", "reason"),
    [
        ({"plain": True}, "not an encrypted envelope"),
        ("text", "not an encrypted envelope"),
        (None, "not an encrypted envelope"),
        ({"encrypted": "!!", "iv": "AAAA", "authTag": "AAAA"}, "malformed"),
        ({"encrypted": 1, "iv": "AAAA", "authTag": "AAAA"}, "malformed"),
        ({"encrypted": "AAAA", "iv": "", "authTag": "AAAA"}, "malformed"),
    ],
)
def test_a_value_that_is_not_a_valid_envelope_raises(stored: object, reason: str) -> None:
    with pytest.raises(DecryptionError, match=reason):
        PayloadCipher(KEY).decrypt(stored)


def test_ciphertext_of_something_that_is_not_json_raises() -> None:
    iv = os.urandom(16)
    sealed = AESGCM(bytes.fromhex(KEY)).encrypt(iv, b"{not json", None)
    stored = {
        "encrypted": base64.b64encode(sealed[:-16]).decode(),
        "iv": base64.b64encode(iv).decode(),
        "authTag": base64.b64encode(sealed[-16:]).decode(),
    }
    with pytest.raises(DecryptionError, match="decrypted payload is not JSON"):
        PayloadCipher(KEY).decrypt(stored)


def test_open_message_decrypts_and_drops_the_internal_flag() -> None:
    cipher = PayloadCipher(KEY)
    message = {"id": "1", "queue": "q", "data": cipher.encrypt({"a": 1}), "isEncrypted": True}
    assert open_message(message, cipher) is None
    assert message == {"id": "1", "queue": "q", "data": {"a": 1}}
    plain = {"id": "2", "queue": "q", "data": {"encrypted": "x"}, "isEncrypted": False}
    assert open_message(plain, None) is None
    assert plain == {"id": "2", "queue": "q", "data": {"encrypted": "x"}}


def test_open_message_that_fails_has_null_data_and_the_marker(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sealed = PayloadCipher(KEY).encrypt({"card": "4111"})
    wrong = {"id": "7", "queue": "pay", "partition": "P", "data": sealed, "isEncrypted": True}
    assert open_message(wrong, PayloadCipher("ff" * 32)) == "wrong key or damaged ciphertext"
    assert wrong["data"] is None and "isEncrypted" not in wrong
    assert wrong[DECRYPTION_ERROR_FIELD] == "wrong key or damaged ciphertext"
    keyless = {"id": "8", "queue": "pay", "data": sealed, "isEncrypted": True}
    assert open_message(keyless, None) == NO_KEY
    assert keyless["data"] is None and keyless[DECRYPTION_ERROR_FIELD] == NO_KEY
    logged = caplog.text
    assert "pay" in logged and "could not be decrypted" in logged
    assert "4111" not in logged and sealed["encrypted"] not in logged and "ff" * 32 not in logged
