"""Stable, even assignment of grouping keys to poll workers."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import zlib
from collections import Counter
from pathlib import Path

import pytest

from queen_threads.polling import shard_of
from queen_threads.polling.sharding import key_bytes
from queen_threads.queue.intention import GroupKey

REPO_ROOT = Path(__file__).resolve().parents[2]
KNOWN_KEY = GroupKey("queue", "orders", None, "__QUEUE_MODE__")


def test_known_key_uses_crc32_of_length_prefixed_parts() -> None:
    assert key_bytes(KNOWN_KEY) == b"5:queue;6:orders;-;14:__QUEUE_MODE__;"
    assert shard_of(KNOWN_KEY, 8) == zlib.crc32(key_bytes(KNOWN_KEY)) % 8
    assert shard_of(KNOWN_KEY, 1) == 0


def test_the_encoding_is_unambiguous() -> None:
    assert key_bytes(["a:b", "c"]) != key_bytes(["a", "b:c"])
    assert key_bytes(["a;", "b"]) != key_bytes(["a", ";b"])
    assert key_bytes([None, "x"]) != key_bytes(["-", "x"])
    assert key_bytes(["1:x"]) != key_bytes(["x", "1"])


@pytest.mark.parametrize("seed", ["1", "4242"])
def test_known_key_maps_to_the_same_shard_in_another_process(seed: str) -> None:
    code = (
        "from queen_threads.polling import shard_of; "
        "from queen_threads.queue.intention import GroupKey; "
        f"k = {KNOWN_KEY!r}; print(shard_of(k, 8), shard_of(k, 3), hash(k))"
    )
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO_ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert [int(out[0]), int(out[1])] == [shard_of(KNOWN_KEY, 8), shard_of(KNOWN_KEY, 3)]


@pytest.mark.parametrize("workers", [2, 8])
def test_even_within_twenty_percent_over_random_keys(workers: int) -> None:
    rng = random.Random(7)
    partitions = [None, "p1", "Default"]
    keys = [
        GroupKey(
            "queue",
            f"queue-{rng.randrange(10**9)}",
            rng.choice(partitions),
            f"g-{rng.randrange(100)}",
        )
        for _ in range(10_000)
    ]
    counts = Counter(shard_of(key, workers) for key in keys)
    expected = len(keys) / workers
    assert set(counts) == set(range(workers))
    for shard in range(workers):
        assert abs(counts[shard] - expected) <= 0.2 * expected, counts


def test_invalid_count() -> None:
    with pytest.raises(ValueError):
        shard_of(KNOWN_KEY, 0)
