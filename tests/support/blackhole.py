"""A TCP peer that accepts connections (the kernel completes the handshake) and never
answers: what a hung or half-dead peer looks like to a sender."""

from __future__ import annotations

import socket


class BlackHole:
    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)  # never accept()ed: requests are taken in, never answered
        self.port: int = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> BlackHole:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
