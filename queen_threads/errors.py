"""The project's single exception hierarchy. HTTP mapping lives in `http/errors.py`."""

from __future__ import annotations


class QueenError(Exception):
    """Root of every error queen-threads raises on purpose."""


class ConfigError(QueenError):
    """A setting is malformed; the process must not start."""


class ValidationError(QueenError):
    """A request is malformed (answered 400)."""


class CodedValidationError(ValidationError):
    """A 400 that also names a stable `code` (the surface's: `kv_bad_request`,
    `locks_bad_request`) and `reason` (the rule broken) a client branches on, never the
    prose: {"error": "<reason>: <detail>", "code", "reason", "detail"}."""

    def __init__(self, code: str, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.code = code
        self.reason = reason
        self.detail = detail


class AuthenticationFailed(QueenError):
    """No token, or one that does not verify (answered 401 with the reason)."""


class Forbidden(QueenError):
    """The token verified but its role is too low for the route (answered 403)."""


class NotFound(QueenError):
    """The addressed resource does not exist (answered 404)."""


class Conflict(QueenError):
    """The request contradicts the current state (answered 409)."""


class PayloadTooLarge(QueenError):
    """The request body is over MAX_BODY_SIZE (answered 413)."""


class Unavailable(QueenError):
    """A temporary condition; the client should retry (answered 503)."""

    def __init__(self, message: str, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class DatabaseUnavailable(Unavailable):
    """PostgreSQL cannot be reached, or no pooled connection freed up in time."""


class DatabaseError(QueenError):
    """PostgreSQL rejected a statement for a reason that is not the client's fault."""


class DecryptionError(QueenError):
    """A stored encrypted payload could not be decrypted. Never an HTTP error: the message
    goes out with `data: null` and a `decryptionError` marker (crypto.open_message)."""


class MigrationError(QueenError):
    """The schema could not be brought up to date."""


class MigrationDeferred(MigrationError):
    """The database could not be reached (or was busy): the migration can run later."""
