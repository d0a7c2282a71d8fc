"""The read room's only caller of the database: one stored-function call per request."""

from __future__ import annotations

from typing import Any

from queen_threads.crypto import DECRYPTION_ERROR_FIELD, PayloadCipher, open_message
from queen_threads.db import Database


class ReadStore:
    """Fetch by offset and list changed partitions; encrypted payloads are opened here."""

    def __init__(self, db: Database, cipher: PayloadCipher | None = None) -> None:
        self.db = db
        self.cipher = cipher

    def fetch(self, body: dict[str, Any]) -> dict[str, Any]:
        """{entries: [...]} in the order asked (queen.fetch_offsets_v1)."""
        answer: dict[str, Any] = self.db.call("reads_fetch", body)
        for entry in answer["entries"]:
            for record in entry["records"]:
                if record.get("isEncrypted"):
                    self._open(record)
        return answer

    def changed(self, body: dict[str, Any]) -> dict[str, Any]:
        """{safeTime, entries: [...]} (queen.partitions_changed_v1)."""
        answer: dict[str, Any] = self.db.call("reads_changed", body)
        return answer

    def _open(self, record: dict[str, Any]) -> None:
        """Decrypt one record in place; on failure its payload is null and it carries
        `decryptionError` (crypto.open_message)."""
        message = {
            "data": record.pop("payload"),
            "isEncrypted": record.pop("isEncrypted"),
            "transactionId": record["transactionId"],
        }
        open_message(message, self.cipher)
        record["payload"] = message["data"]
        if DECRYPTION_ERROR_FIELD in message:
            record[DECRYPTION_ERROR_FIELD] = message[DECRYPTION_ERROR_FIELD]
