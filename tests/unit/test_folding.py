"""The repeated-header fold (queen_threads/http/folding.py) through gunicorn's own request
parser, on request heads in memory; the real server over raw sockets:
tests/acceptance/test_repeated_headers.py."""

from __future__ import annotations

import pytest
from gunicorn import http
from gunicorn.config import Config
from gunicorn.http import message
from gunicorn.http.errors import InvalidHeader, ParseException
from gunicorn.http.parser import RequestParser
from gunicorn.http.unreader import IterUnreader

from queen_threads.http.folding import FoldingRequest, fold_identical, install


def parse(*headers: str) -> FoldingRequest:
    head = "\r\n".join(["POST /api/v1/push HTTP/1.1", "Host: h", *headers, "Content-Length: 2"])
    return FoldingRequest(Config(), IterUnreader([head.encode() + b"\r\n\r\n{}"]), ("::1", 1))


def test_an_identical_repeat_is_one_content_type_and_the_body_is_framed() -> None:
    request = parse("Content-Type: application/json", "content-type:\tapplication/json  ")
    assert [v for n, v in request.headers if n == "CONTENT-TYPE"] == ["application/json"]
    assert request.body.read() == b"{}"


@pytest.mark.parametrize(
    "second",
    [
        "Content-Type: text/plain",
        "Content-Type: application/json; charset=utf-8",
        "Content-Type: Application/JSON",
        "Content-Type: application/json\r\n\tmore",
    ],
)
def test_a_differing_or_folded_repeat_is_refused(second: str) -> None:
    with pytest.raises(ParseException):  # InvalidHeader, ObsoleteFolding
        parse("Content-Type: application/json", second)


def test_only_content_type_folds() -> None:
    with pytest.raises(InvalidHeader, match="HOST"):
        parse("Host: h")
    with pytest.raises(InvalidHeader, match="CONTENT-LENGTH"):
        parse("Content-Length: 2")


def test_fold_identical_keeps_everything_but_the_repeats() -> None:
    head = b"A: 1\r\nContent-Type: x\r\nB: 2\r\ncontent-type:  x\r\nC: 3"
    assert fold_identical(head) == b"A: 1\r\nContent-Type: x\r\nB: 2\r\nC: 3"
    assert fold_identical(b"A: 1\r\nContent-Type: x") is None  # nothing repeated
    assert fold_identical(b"Content-Type: x\r\nContent-Type: y") is None
    assert fold_identical(b"Content-Type: x\r\n y\r\nContent-Type: x") is None  # obs-fold


def test_install_makes_it_the_request_gunicorn_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails if gunicorn stops building requests through RequestParser.mesg_class, or picks
    its optional C parser (gunicorn-h1c), whose path calls no parse_headers to fold in.
    That the worker installs it: the real server, tests/acceptance/test_repeated_headers.py."""
    monkeypatch.setattr(RequestParser, "mesg_class", RequestParser.mesg_class)  # restored after
    install()
    cfg = Config()
    parser = http.get_parser(cfg, iter([b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"]), None)
    assert isinstance(next(parser), FoldingRequest)
    assert message._check_fast_parser(cfg) is False
