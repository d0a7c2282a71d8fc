"""Grouping keys written the short way in tests: ``qk("q:*:g")`` is queue ``q``, any
partition, group ``g``; ``nk("ns:*:g")`` is namespace ``ns``, any task, group ``g``.
(Only test names, which never contain ``:``; the server never parses keys.)"""

from __future__ import annotations

from queen_threads.queue.intention import GroupKey


def _key(kind: str, text: str) -> GroupKey:
    scope, detail, group = text.split(":")
    return GroupKey(kind, None if scope == "*" else scope, None if detail == "*" else detail, group)


def qk(text: str) -> GroupKey:
    return _key("queue", text)


def nk(text: str) -> GroupKey:
    return _key("namespace", text)
