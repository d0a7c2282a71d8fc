"""AES-256-GCM payload encryption for queues with `encryptionEnabled`.

Stored form (as the original): {"encrypted": b64(ciphertext), "iv": b64(16-byte IV),
"authTag": b64(16-byte tag)} over the JSON text of the payload.

A message stored encrypted that cannot be opened (no key on this server, another key,
damaged ciphertext) never goes out as its envelope: `open_message` sets `data` to null and
adds the `decryptionError` marker with a short reason, and logs a warning naming the
message (never the key or the payload).
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
from typing import Any

import orjson

from queen_threads.errors import DecryptionError

log = logging.getLogger("queen_threads.crypto")

IV_BYTES = 16
TAG_BYTES = 16
# The field a message carries (with `data: null`) when its payload could not be decrypted.
DECRYPTION_ERROR_FIELD = "decryptionError"
NO_KEY = "QUEEN_ENCRYPTION_KEY is not set on this server"


class PayloadCipher:
    """Encrypts and decrypts message payloads with one 32-byte key."""

    def __init__(self, hex_key: str) -> None:
        # cryptography loads only on a server with a key (a few MB per process otherwise)
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._aead = AESGCM(bytes.fromhex(hex_key))
        self._invalid_tag = InvalidTag

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
        """The original payload; DecryptionError (with a short reason) when `stored` is not
        an envelope that this key opens."""
        if not isinstance(stored, dict) or not {"encrypted", "iv", "authTag"} <= stored.keys():
            raise DecryptionError("stored payload is not an encrypted envelope")
        try:
            iv = base64.b64decode(stored["iv"], validate=True)
            sealed = base64.b64decode(stored["encrypted"], validate=True) + base64.b64decode(
                stored["authTag"], validate=True
            )
        except (binascii.Error, ValueError, TypeError) as exc:
            raise DecryptionError("malformed encrypted envelope") from exc
        try:
            plain = self._aead.decrypt(iv, sealed, None)
        except self._invalid_tag as exc:
            raise DecryptionError("wrong key or damaged ciphertext") from exc
        except (ValueError, TypeError) as exc:  # e.g. an empty IV
            raise DecryptionError("malformed encrypted envelope") from exc
        try:
            return orjson.loads(plain)
        except orjson.JSONDecodeError as exc:
            raise DecryptionError("decrypted payload is not JSON") from exc


def open_message(message: dict[str, Any], cipher: PayloadCipher | None) -> str | None:
    """Drop the internal `isEncrypted` flag of a message leaving the server, decrypting its
    `data` when it was set. When that fails, `data` becomes None, the message gets
    `decryptionError: <reason>` and a warning is logged; the reason is returned (None when
    the message is plain or was decrypted)."""
    if not message.pop("isEncrypted", False):
        return None
    if cipher is None:
        reason = NO_KEY
    else:
        try:
            message["data"] = cipher.decrypt(message.get("data"))
            return None
        except DecryptionError as exc:
            reason = str(exc)
    message["data"] = None
    message[DECRYPTION_ERROR_FIELD] = reason
    log.warning(
        "message %s (transactionId %s) of queue %s partition %s could not be decrypted: %s",
        message.get("id"),
        message.get("transactionId"),
        message.get("queue"),
        message.get("partition"),
        reason,
    )
    return reason
