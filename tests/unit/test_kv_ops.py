"""The key/value and lock operations as the stored functions receive them: rebuilt with
only the fields they read, defaults filled in, the call-level rules applied (the refusals
themselves are tested through the real server, tests/acceptance/test_kv_http.py)."""

from __future__ import annotations

import pytest

from queen_threads.errors import CodedValidationError
from queen_threads.kv import body as ops
from queen_threads.kv import lock_body as lock_ops


def test_an_operation_keeps_only_what_its_function_reads() -> None:
    raw = {"op": "put", "ns": "orders", "key": "k", "value": None, "ttlSeconds": 30.0,
           "expect": 7, "required": False, "tenant": "x", "note": "ignored"}  # fmt: skip
    assert ops.operation(0, raw) == {
        "op": "put", "ns": "orders", "key": "k", "value": None, "ttlSeconds": 30, "expect": 7
    }  # fmt: skip
    incr = {"op": "incr", "ns": "q", "key": "k", "delta": 2, "max": None, "forever": True,
            "required": True}  # fmt: skip
    assert ops.operation(0, incr) == {
        "op": "incr", "ns": "q", "key": "k", "delta": 2, "forever": True, "required": True
    }  # fmt: skip


def test_a_prefix_limit_is_clamped_never_refused() -> None:
    page = ops.operation(0, {"op": "getPrefix", "ns": "q", "prefix": "a", "limit": 50_000})
    assert page["limit"] == 1000
    assert (
        ops.operation(0, {"op": "getPrefix", "ns": "q", "prefix": "a", "limit": -3})["limit"] == 1
    )


def test_the_budgets_are_smaller_inside_a_transaction() -> None:
    gets = [{"op": "get", "ns": "q", "key": f"k{i}"} for i in range(65)]
    assert len(ops.operations(gets)) == 65
    with pytest.raises(CodedValidationError) as refused:
        ops.operations(gets, in_transaction=True)
    assert (refused.value.code, refused.value.reason) == ("kv_bad_request", "kv_too_many_ops")
    keys = [{"op": "getMany", "ns": "q", "keys": [f"k{i}" for i in range(200)]}] * 2
    assert ops.operations(keys)
    with pytest.raises(CodedValidationError, match="kv_too_many_keys"):
        ops.operations(keys, in_transaction=True)


def test_reads_of_one_key_may_repeat_writes_may_not() -> None:
    get = {"op": "get", "ns": "q", "key": "k"}
    check = {"op": "check", "ns": "q", "key": "k", "expect": 0}
    put = {"op": "put", "ns": "q", "key": "k", "value": 1, "forever": True}
    assert len(ops.operations([get, get, check, put])) == 4
    with pytest.raises(CodedValidationError, match="kv_duplicate_key_in_call"):
        ops.operations([put, {**put, "op": "delete"}])
    assert len(ops.operations([put, {**put, "ns": "r"}])) == 2, "a key is (namespace, key)"


def test_lock_operations_get_their_defaults() -> None:
    assert lock_ops.operations([
        {"op": "acquire", "name": "täglich/report:1", "ttlSeconds": 30, "owner": None},
        {"op": "renew", "name": "b", "token": 9, "ttlSeconds": 5.0, "owner": "w"},
        {"op": "release", "name": "c", "token": 3, "slot": 2},
        {"op": "get", "name": "d", "limit": 99},
    ]) == [
        {"op": "acquire", "name": "täglich/report:1", "ttlSeconds": 30, "limit": 1},
        {"op": "renew", "name": "b", "token": 9, "slot": 0, "ttlSeconds": 5, "owner": "w"},
        {"op": "release", "name": "c", "token": 3, "slot": 2},
        {"op": "get", "name": "d"},
    ]  # fmt: skip
    wide = [{"op": "acquire", "name": f"s{i}", "ttlSeconds": 1, "limit": 1024} for i in range(5)]
    with pytest.raises(CodedValidationError) as refused:
        lock_ops.operations(wide)
    assert (refused.value.code, refused.value.reason) == (
        "locks_bad_request",
        "locks_too_many_keys",
    )
