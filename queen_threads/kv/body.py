"""The key/value operations a request may carry: each checked and rebuilt with only the
fields its stored function reads (unknown fields are ignored, as everywhere).

The same rules serve `POST /api/v1/kv` and the `kv` rider of `POST /api/v1/transaction`
(where `getPrefix` is refused and the budgets are smaller). A broken rule is a 400 with
`code: kv_bad_request` and a `reason` naming the rule (docs/kv.md), and nothing runs.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from queen_threads.errors import CodedValidationError

NAMESPACE = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
MAX_KEY_BYTES = 512
MAX_VALUE_BYTES = 65536
MAX_TTL_SECONDS = 3_153_600_000  # a hundred years; `forever` is the longer one
MAX_OPS = {False: 256, True: 64}  # per call: standalone, inside a transaction
MAX_KEYS = {False: 4096, True: 256}
PREFIX_DEFAULT, PREFIX_CAP = 100, 1000
READS = ("get", "getMany", "getPrefix")
WRITES = ("put", "putIfAbsent", "delete", "incr")
KINDS = (*READS, *WRITES, "check")
# The top-level fields each body may carry (others are ignored and named): the batch
# routes (kv and locks), and one key's PUT.
BATCH_FIELDS = ("operations",)
PUT_FIELDS = ("value", "ttlSeconds", "forever", "expect")

Op = dict[str, Any]


def bad(reason: str, detail: str) -> CodedValidationError:
    return CodedValidationError("kv_bad_request", reason, detail)


def is_int(value: Any) -> bool:
    """A JSON integer (a float with no fraction counts; a bool does not)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _key(at: str, key: Any) -> str:
    if not isinstance(key, str) or not key or "\x00" in key:
        raise bad("kv_bad_key", f"{at}: a key is a non-empty string without NUL")
    size = len(key.encode("utf-8"))
    if size > MAX_KEY_BYTES:
        raise bad("kv_key_too_large", f"{at}: key is {size} bytes, the ceiling is {MAX_KEY_BYTES}")
    return key


def _namespace(at: str, ns: Any) -> str:
    if not isinstance(ns, str) or not NAMESPACE.fullmatch(ns):
        raise bad(
            "kv_bad_namespace",
            f"{at}: namespace {ns!r} does not match ^[a-z0-9][a-z0-9._-]{{0,63}}$",
        )
    return ns


def _expiry(at: str, raw: Op) -> Op:
    """Exactly one of ttlSeconds (an integer > 0) and forever: true."""
    declared = ("ttlSeconds" in raw) + (raw.get("forever") is True)
    if declared != 1:
        raise bad(
            "kv_expiry_not_specified",
            f"{at}: exactly one of ttlSeconds (an integer > 0) and forever: true is required",
        )
    if raw.get("forever") is True:
        return {"forever": True}
    ttl = raw["ttlSeconds"]
    if not is_int(ttl) or not 0 < ttl <= MAX_TTL_SECONDS:
        raise bad("kv_bad_ttl", f"{at}: ttlSeconds must be an integer from 1 to {MAX_TTL_SECONDS}")
    return {"ttlSeconds": int(ttl)}


def _expect(at: str, raw: Op, kind: str) -> Op:
    if "expect" not in raw:
        if kind == "check":
            raise bad("kv_bad_expect", f"{at}: check needs expect (0: the key must not exist)")
        return {}
    expect = raw["expect"]
    if not is_int(expect) or expect < 0 or expect >= 2**63:
        raise bad("kv_bad_expect", f"{at}: expect must be a non-negative integer version")
    if kind == "putIfAbsent" and expect != 0:
        raise bad(
            "kv_bad_expect",
            f"{at}: putIfAbsent is put with expect 0; another expect contradicts it",
        )
    return {"expect": int(expect)}


def _value(at: str, raw: Op) -> Op:
    if "value" not in raw:
        raise bad("kv_bad_request", f"{at}: a value is required (null is a value)")
    size = len(orjson.dumps(raw["value"]))
    if size > MAX_VALUE_BYTES:
        raise bad(
            "kv_value_too_large", f"{at}: value is {size} bytes, the ceiling is {MAX_VALUE_BYTES}"
        )
    return {"value": raw["value"]}


def _incr(at: str, raw: Op) -> Op:
    if "expect" in raw:
        raise bad("kv_bad_request", f"{at}: incr takes no expect")
    out: Op = {}
    for field, needed in (("delta", True), ("min", False), ("max", False)):
        if field not in raw or raw[field] is None:
            if needed:
                raise bad("kv_bad_request", f"{at}: incr needs a numeric delta")
            continue
        if not is_number(raw[field]) or raw[field] != raw[field] or abs(raw[field]) == float("inf"):
            raise bad("kv_bad_request", f"{at}: {field} must be a finite number")
        out[field] = raw[field]
    return out


def _prefix(at: str, raw: Op, in_transaction: bool) -> Op:
    if in_transaction:
        raise bad(
            "kv_get_prefix_not_allowed_in_transaction",
            f"{at}: getPrefix is only available on POST /api/v1/kv",
        )
    prefix = raw.get("prefix")
    if not isinstance(prefix, str) or not prefix:
        raise bad("kv_prefix_required", f"{at}: getPrefix needs a non-empty prefix")
    out: Op = {"prefix": _key(at, prefix)}
    if raw.get("after") is not None:
        out["after"] = _key(at, raw["after"])
    if raw.get("limit") is not None:
        if not is_int(raw["limit"]):
            raise bad(
                "kv_bad_request", f"{at}: limit must be an integer (it is clamped to 1..1000)"
            )
        out["limit"] = min(max(int(raw["limit"]), 1), PREFIX_CAP)
    if raw.get("keysOnly") is not None:
        if not isinstance(raw["keysOnly"], bool):
            raise bad("kv_bad_request", f"{at}: keysOnly must be a boolean")
        out["keysOnly"] = raw["keysOnly"]
    return out


def _many(at: str, raw: Op) -> Op:
    keys = raw.get("keys")
    if not isinstance(keys, list) or not keys:
        raise bad("kv_bad_request", f"{at}: getMany needs a non-empty keys array")
    return {"keys": [_key(at, k) for k in keys]}


def _body(at: str, raw: Op, kind: str, in_transaction: bool) -> Op:
    """The fields after op/ns: what each kind reads."""
    if kind == "getMany":
        return _many(at, raw)
    if kind == "getPrefix":
        return _prefix(at, raw, in_transaction)
    out: Op = {"key": _key(at, raw.get("key"))}
    if kind in ("put", "putIfAbsent"):
        out |= _value(at, raw) | _expiry(at, raw)
    if kind == "incr":
        out |= _incr(at, raw) | _expiry(at, raw)
    if kind in ("put", "putIfAbsent", "delete", "check"):
        out |= _expect(at, raw, kind)
    if "required" in raw and raw["required"] is not None:
        if not isinstance(raw["required"], bool):
            raise bad("kv_bad_request", f"{at}: required must be a boolean")
        if raw["required"]:
            out["required"] = True
    return out


def operation(index: int, raw: Any, in_transaction: bool = False) -> Op:
    """One operation, checked and rebuilt."""
    at = f"op at index {index}"
    if not isinstance(raw, dict):
        raise bad("kv_bad_request", f"{at} is not an object")
    kind = raw.get("op")
    if kind not in KINDS:
        raise bad("kv_unknown_op", f"{at}: unknown operation {kind!r} (one of {', '.join(KINDS)})")
    return {"op": kind, "ns": _namespace(at, raw.get("ns"))} | _body(at, raw, kind, in_transaction)


def _keys_of(op: Op) -> int:
    if op["op"] == "getMany":
        return len(op["keys"])
    if op["op"] == "getPrefix":
        return int(op.get("limit", PREFIX_DEFAULT))
    return 1


def operations(raw: Any, in_transaction: bool = False) -> list[Op]:
    """A whole call: each operation, then the rules of the call (op and key budgets, one
    write per key, which makes the apply order of concurrent calls total)."""
    if not isinstance(raw, list):
        raise bad("kv_bad_request", "operations must be an array")
    ceiling = MAX_OPS[in_transaction]
    if len(raw) > ceiling:
        raise bad("kv_too_many_ops", f"{len(raw)} operations in one call, the ceiling is {ceiling}")
    ops = [operation(i, op, in_transaction) for i, op in enumerate(raw)]
    keys = sum(_keys_of(op) for op in ops)
    if keys > MAX_KEYS[in_transaction]:
        raise bad(
            "kv_too_many_keys",
            f"{keys} keys in one call, the ceiling is {MAX_KEYS[in_transaction]}",
        )
    written = [(op["ns"], op["key"]) for op in ops if op["op"] in WRITES]
    if len(set(written)) != len(written):
        raise bad("kv_duplicate_key_in_call", "a key may be written by one operation per call")
    return ops
