"""Repeated request headers that are safe to fold: an identical repeated ``Content-Type``.

gunicorn refuses a request head that repeats a singleton field (RFC 9110 5.3: ``Host``,
``Content-Type``) with ``400 Invalid HTTP Header: 'CONTENT-TYPE'``. Queen's official C++
client sends ``Content-Type: application/json`` twice on every request with a body (its own
header map plus cpp-httplib's), always with the same value. Such a repeat is unambiguous:
every reader of the message sees one media type. So this module folds it, and nothing else:

- ``Content-Type`` repeated with the identical value (after the optional whitespace around
  it) is read as one ``Content-Type``;
- differing ``Content-Type`` values, a repeated ``Host``, two ``Content-Length`` fields
  (equal or not), ``Content-Length`` beside ``Transfer-Encoding``: gunicorn's refusals,
  unchanged.

Cost: none on a request gunicorn accepts. The fold runs only after gunicorn has refused
a head for ``CONTENT-TYPE``, and then gunicorn parses the folded head again with every one
of its own checks. Where: ``FoldingRequest`` is gunicorn's ``Request`` with this one
override; ``install()``, called by the worker (``QueenGeventWorker.init_process``, in each
worker process), makes it the message class of gunicorn's ``RequestParser`` (its
``mesg_class``, the parser's own extension point).
It covers gunicorn's Python parser, the one that runs here (gunicorn-h1c, its optional
C parser, is not installed: tests/unit/test_folding.py fails if it ever is, as its path
would refuse the repeat again). tests/acceptance/test_repeated_headers.py sends raw heads
to the real server, over TLS too.
"""

from __future__ import annotations

from typing import Any

from gunicorn.http.errors import InvalidHeader
from gunicorn.http.message import Request
from gunicorn.http.parser import RequestParser

FOLDABLE = b"CONTENT-TYPE"


def fold_identical(head: bytes, name: bytes = FOLDABLE) -> bytes | None:
    """``head`` (header lines joined by CRLF) with the repeats of field ``name`` removed,
    if it occurs more than once, always with one value and never continued on a folded
    line (obs-fold); otherwise None (the refusal stands)."""
    lines = head.split(b"\r\n")
    kept: list[bytes] = []
    value: bytes | None = None
    repeats = 0
    previous_matched = False
    for line in lines:
        if line[:1] in (b" ", b"\t"):  # a continuation line (obs-fold)
            if previous_matched:
                return None
            kept.append(line)
            continue
        field, colon, rest = line.partition(b":")
        previous_matched = bool(colon) and field.upper() == name
        if not previous_matched:
            kept.append(line)
            continue
        this = rest.strip(b" \t")
        if value is None:
            value = this
            kept.append(line)
        elif this == value:
            repeats += 1
        else:
            return None
    return b"\r\n".join(kept) if repeats else None


class FoldingRequest(Request):
    """gunicorn's request, reading an identical repeated ``Content-Type`` as one."""

    def parse_headers(self, data: bytes, from_trailer: bool = False) -> Any:
        try:
            return super().parse_headers(data, from_trailer)
        except InvalidHeader as refused:
            if from_trailer or refused.hdr != FOLDABLE.decode():
                raise
            folded = fold_identical(data)
            if folded is None:
                raise
            return super().parse_headers(folded, from_trailer)


def install() -> None:
    """Make gunicorn's HTTP/1 parser build ``FoldingRequest``s (in this process)."""
    RequestParser.mesg_class = FoldingRequest
