"""The lock operations a `POST /api/v1/locks` call may carry (acquire, renew, release,
get), each checked and rebuilt with only the fields `queen.locks_apply_v1` reads. A broken
rule is a 400 with `code: locks_bad_request` and a `reason` naming it (docs/kv.md)."""

from __future__ import annotations

from typing import Any

from queen_threads.errors import CodedValidationError
from queen_threads.kv.body import MAX_TTL_SECONDS, is_int

MAX_OPS = 64
MAX_LIMIT = 1024
MAX_KEYS = 4096  # slot rows one call may name
MAX_NAME_BYTES = MAX_OWNER_BYTES = 256
KINDS = ("acquire", "renew", "release", "get")

Op = dict[str, Any]


def bad(reason: str, detail: str) -> CodedValidationError:
    return CodedValidationError("locks_bad_request", reason, detail)


def _control(text: str) -> bool:
    return any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text)


def _name(at: str, name: Any) -> str:
    """'#' sits between a name and its slot in the permit's key: no name contains it."""
    if (
        not isinstance(name, str)
        or not name
        or len(name.encode("utf-8")) > MAX_NAME_BYTES
        or "#" in name
        or _control(name)
    ):
        raise bad(
            "locks_bad_name",
            f"{at}: a lock's name is a non-empty string of at most {MAX_NAME_BYTES} bytes, "
            "without control characters and without '#'",
        )
    return name


def _ttl(at: str, raw: Op) -> int:
    """Mandatory and finite: a lock nobody can take back from a dead holder is no lock."""
    if "forever" in raw or "ttlSeconds" not in raw:
        raise bad("locks_ttl_required", f"{at}: {raw['op']} needs ttlSeconds (no forever)")
    ttl = raw["ttlSeconds"]
    if not is_int(ttl) or not 0 < ttl <= MAX_TTL_SECONDS:
        raise bad("locks_bad_ttl", f"{at}: ttlSeconds must be an integer above 0")
    return int(ttl)


def _owner(at: str, raw: Op) -> Op:
    owner = raw.get("owner")
    if owner is None:
        return {}
    if (
        not isinstance(owner, str)
        or not owner
        or len(owner.encode("utf-8")) > MAX_OWNER_BYTES
        or _control(owner)
    ):
        raise bad(
            "locks_bad_owner",
            f"{at}: owner is a non-empty string of at most {MAX_OWNER_BYTES} bytes, "
            "without control characters",
        )
    return {"owner": owner}


def _token(at: str, raw: Op) -> int:
    if "token" not in raw:
        raise bad("locks_token_required", f"{at}: {raw['op']} needs the token of the permit")
    token = raw["token"]
    if not is_int(token) or not 0 < token < 2**63:
        raise bad("locks_bad_token", f"{at}: token must be an integer above 0")
    return int(token)


def _bounded(at: str, raw: Op, field: str, low: int, high: int, default: int) -> int:
    value = raw.get(field)
    if value is None:
        return default
    if not is_int(value) or not low <= value <= high:
        raise bad(f"locks_bad_{field}", f"{at}: {field} must be an integer from {low} to {high}")
    return int(value)


def operation(index: int, raw: Any) -> Op:
    at = f"operation at index {index}"
    if not isinstance(raw, dict):
        raise bad("locks_bad_request", f"{at} is not an object")
    kind = raw.get("op")
    if kind not in KINDS:
        raise bad(
            "locks_unknown_op", f"{at}: unknown operation {kind!r} (one of {', '.join(KINDS)})"
        )
    op: Op = {"op": kind, "name": _name(at, raw.get("name"))}
    if kind == "acquire":
        limit = _bounded(at, raw, "limit", 1, MAX_LIMIT, 1)
        return op | {"ttlSeconds": _ttl(at, raw), "limit": limit} | _owner(at, raw)
    if kind == "get":
        return op
    op |= {"token": _token(at, raw), "slot": _bounded(at, raw, "slot", 0, MAX_LIMIT - 1, 0)}
    if kind == "renew":
        op |= {"ttlSeconds": _ttl(at, raw)} | _owner(at, raw)
    return op


def operations(raw: Any) -> list[Op]:
    """A whole call: each operation, a lock named once, the slot rows within budget."""
    if not isinstance(raw, list):
        raise bad("locks_bad_request", "operations must be an array")
    if len(raw) > MAX_OPS:
        raise bad(
            "locks_too_many_ops", f"{len(raw)} operations in one call, the ceiling is {MAX_OPS}"
        )
    ops = [operation(i, op) for i, op in enumerate(raw)]
    names = [op["name"] for op in ops]
    if len(set(names)) != len(names):
        raise bad("locks_duplicate_in_call", "a lock may be named by one operation per call")
    keys = sum(op.get("limit", 1) for op in ops)
    if keys > MAX_KEYS:
        raise bad(
            "locks_too_many_keys", f"the call names {keys} permits, the ceiling is {MAX_KEYS}"
        )
    return ops
