"""AES-256-GCM payload encryption for queues with `encryptionEnabled`.

Stored form (as the original): {"encrypted": b64(ciphertext), "iv": b64(16-byte IV),
"authTag": b64(16-byte tag)} over the JSON text of the payload.
"""

from __future__ import annotations

import base64
import os
from typing import Any

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

IV_BYTES = 16
TAG_BYTES = 16


class PayloadCipher:
    """Encrypts and decrypts message payloads with one 32-byte key."""

    def __init__(self, hex_key: str) -> None:
        self._aead = AESGCM(bytes.fromhex(hex_key))

    def encrypt(self, payload: Any) -> dict[str, str]:
        iv = os.urandom(IV_BYTES)
        sealed = self._aead.encrypt(iv, orjson.dumps(payload), None)
        ciphertext, tag = sealed[:-TAG_BYTES], sealed[-TAG_BYTES:]
        return {
            "encrypted": base64.b64encode(ciphertext).decode(),
            "iv": base64.b64encode(iv).decode(),
            "authTag": base64.b64encode(tag).decode(),
        }

    def decrypt(self, stored: Any) -> Any:
        """The original payload; a value that is not a valid envelope is returned as-is."""
        if not isinstance(stored, dict) or not {"encrypted", "iv", "authTag"} <= stored.keys():
            return stored
        try:
            iv = base64.b64decode(stored["iv"])
            sealed = base64.b64decode(stored["encrypted"]) + base64.b64decode(stored["authTag"])
            return orjson.loads(self._aead.decrypt(iv, sealed, None))
        except (InvalidTag, ValueError, orjson.JSONDecodeError):
            return stored
