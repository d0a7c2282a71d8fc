from __future__ import annotations

import pytest

from queen_threads.crypto import PayloadCipher

KEY = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"


@pytest.mark.parametrize("payload", [None, {}, [], "text", 42, {"nested": {"a": [1, 2, None]}}])
def test_round_trip_any_json(payload: object) -> None:
    cipher = PayloadCipher(KEY)
    sealed = cipher.encrypt(payload)
    assert set(sealed) == {"encrypted", "iv", "authTag"}
    assert cipher.decrypt(sealed) == payload


def test_wrong_key_or_tampering_returns_stored_value() -> None:
    sealed = PayloadCipher(KEY).encrypt({"secret": 1})
    other = PayloadCipher("ff" * 32)
    assert other.decrypt(sealed) == sealed
    assert PayloadCipher(KEY).decrypt({"plain": True}) == {"plain": True}
