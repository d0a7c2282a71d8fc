"""conftest.py of the queen-mq 2.6.0 sdist's tests when tests/client26 runs them.

The sdist's tests take a `client` fixture (an async `Queen`) and read the server's URL from
`QUEEN_SERVER_URL`; the client keeps its own defaults (autopilot on, its retries).
`QUEEN_TEST_BEARER_TOKEN` (set for a server with JWT on) is sent as the client's bearer.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest_asyncio
from queen import Queen


@pytest_asyncio.fixture
async def client() -> AsyncIterator[Queen]:
    token = os.environ.get("QUEEN_TEST_BEARER_TOKEN") or None
    queen = Queen(url=os.environ["QUEEN_SERVER_URL"], bearer_token=token)
    try:
        yield queen
    finally:
        await queen.close()
