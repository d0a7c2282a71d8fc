"""scripts/bench HTTP client: request rendering and response parsing (no network)."""

from __future__ import annotations

import asyncio

import pytest

from bench.httpclient import (
    Endpoint,
    HttpError,
    parse_head,
    read_response,
    render_request,
)


def _read(data: bytes, method: str = "GET", eof: bool = True) -> object:
    async def go() -> object:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        if eof:
            reader.feed_eof()
        return await read_response(reader, method)

    return asyncio.run(go())


def test_render_request_with_and_without_body() -> None:
    assert render_request("GET", "/health", "h:1") == b"GET /health HTTP/1.1\r\nHost: h:1\r\n\r\n"
    raw = render_request("POST", "/api/v1/push", "h", b'{"a":1}')
    assert raw == (
        b"POST /api/v1/push HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
        b'Content-Length: 7\r\n\r\n{"a":1}'
    )


def test_extra_headers_of_an_endpoint_go_into_every_request() -> None:
    from bench.httpclient import Connection

    endpoint = Endpoint.parse("http://h:7/", "Authorization: Bearer t\r\n")
    raw = Connection(endpoint).render("GET", "/x")
    assert raw == b"GET /x HTTP/1.1\r\nHost: h:7\r\nAuthorization: Bearer t\r\n\r\n"


def test_parse_head_lowercases_headers() -> None:
    status, headers = parse_head(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\nX-Thing:  a:b ")
    assert status == 201
    assert headers == {"content-length": "2", "x-thing": "a:b"}


@pytest.mark.parametrize("head", [b"garbage", b"HTTP/1.1 abc OK", b"HTTP/1.1 200 OK\r\nnocolon"])
def test_parse_head_rejects_garbage(head: bytes) -> None:
    with pytest.raises(HttpError):
        parse_head(head)


def test_content_length_body_and_keep_alive_leftover() -> None:
    async def go() -> tuple[object, object]:
        reader = asyncio.StreamReader()
        reader.feed_data(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
        reader.feed_data(b"HTTP/1.1 204 No Content\r\n\r\n")
        return await read_response(reader), await read_response(reader)

    first, second = asyncio.run(go())
    assert first.status == 200 and first.body == b"hello"  # type: ignore[attr-defined]
    assert second.status == 204 and second.body == b""  # type: ignore[attr-defined]


def test_chunked_body() -> None:
    data = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n"
    )
    response = _read(data, eof=False)
    assert response.body == b"abcde"  # type: ignore[attr-defined]


def test_body_until_close_without_length() -> None:
    response = _read(b"HTTP/1.0 200 OK\r\n\r\n[1,2]")
    assert response.json() == [1, 2]  # type: ignore[attr-defined]


def test_head_request_has_no_body() -> None:
    response = _read(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", method="HEAD", eof=False)
    assert response.body == b""  # type: ignore[attr-defined]


def test_connection_closed_mid_response() -> None:
    with pytest.raises(HttpError):
        _read(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
    with pytest.raises(HttpError):
        _read(b"HTTP/1.1 200 O")


def test_endpoint_parse() -> None:
    assert Endpoint.parse("http://127.0.0.1:6632") == Endpoint("127.0.0.1", 6632, "")
    e = Endpoint.parse("http://example.org/queen/")
    assert (e.host, e.port, e.base_path, e.host_header) == (
        "example.org",
        80,
        "/queen",
        "example.org",
    )
    with pytest.raises(ValueError):
        Endpoint.parse("https://x")
