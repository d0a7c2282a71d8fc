"""The dashboard's files: its page paths and the URL parameters each page keeps its state
in, how a file is found under the folder without ever leaving it, and how each is answered.

The files live in `queen_threads/webapp/` (shipped in the wheel) or in `WEBAPP_ROOT`:
`index.html` and `assets/`. Every page path answers `index.html` (the page's own router
draws the page), so a bookmarked URL loads the right page. `index.html` names its assets
`__ASSETS__/...`; the server writes `/assets/@<version>` there, the version being a hash
of the assets' names, sizes and modification times. A versioned URL is cached for a year
(`immutable`): a changed file changes the version, hence every URL. ES modules import
each other by relative paths, so the whole module graph inherits the version. `index.html`
and unversioned asset URLs are revalidated on every use (`no-cache` + `ETag`).
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

NONE: frozenset[str] = frozenset()
RANGE = frozenset({"from", "to"})

# Page path -> the query parameters its URL may carry (the page's filters and selection).
PAGES: dict[str, frozenset[str]] = {
    "/": frozenset({"range", "queue"}),
    "/queues": frozenset({"q", "sort", "dir", "queue"}),
    "/messages": RANGE | {"queue", "partition", "status", "offset", "partitionId", "transactionId"},
    "/dlq": RANGE | {"queue", "consumerGroup", "error", "offset"},
    "/groups": frozenset({"q", "group"}),
    "/streams": frozenset({"stream"}),
    "/timers": frozenset({"queue"}),
    "/traces": frozenset({"name", "partitionId", "transactionId"}),
    "/system": NONE,
}
ASSETS_ROUTE = "/assets/{path:path}"

PACKAGED_ROOT = Path(__file__).resolve().parent.parent / "webapp"
ASSETS_PLACEHOLDER = b"__ASSETS__"
VERSION_MARK = "@"

IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".json": "application/json",
    ".txt": "text/plain; charset=utf-8",
    ".woff2": "font/woff2",
}

# The page loads only its own files and talks only to its own server.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
        "base-uri 'none'; form-action 'none'; object-src 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}

VERSION_TTL_S = 1.0  # a page load asks for many assets at once: walk the folder once


@dataclass(frozen=True)
class StaticFile:
    body: bytes
    content_type: str
    etag: str
    cache_control: str


class Webapp:
    """The files of one dashboard folder (`root`: index.html and assets/)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.assets = self.root / "assets"
        self._version: tuple[float, str] = (-VERSION_TTL_S, "")

    def version(self) -> str:
        """12 hex characters that change whenever a file under assets/ changes."""
        checked, version = self._version
        now = time.monotonic()
        if now - checked < VERSION_TTL_S:
            return version
        digest = hashlib.sha256()
        for folder, dirs, files in os.walk(self.assets):
            dirs.sort()
            for name in sorted(files):
                stat = os.stat(os.path.join(folder, name))
                relative = os.path.relpath(os.path.join(folder, name), self.assets)
                digest.update(f"{relative}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
        version = digest.hexdigest()[:12]
        self._version = (now, version)
        return version

    def index(self) -> StaticFile:
        version = self.version()
        prefix = f"/assets/{VERSION_MARK}{version}".encode()
        body = (self.root / "index.html").read_bytes().replace(ASSETS_PLACEHOLDER, prefix)
        etag = hashlib.sha256(body).hexdigest()[:16]
        return StaticFile(body, CONTENT_TYPES[".html"], etag, REVALIDATE)

    def asset(self, path: str) -> StaticFile | None:
        """The file at `path` under assets/ (`@<version>/` in front is allowed), or None
        when there is none, or when the path would lead out of the folder."""
        parts = path.split("/")
        versioned = parts[0].startswith(VERSION_MARK)
        wanted = parts[0][len(VERSION_MARK) :] if versioned else None
        file = self._resolve(parts[1:] if versioned else parts)
        if file is None:
            return None
        stat = file.stat()
        etag = f"{stat.st_size:x}-{stat.st_mtime_ns:x}"
        current = wanted is not None and wanted == self.version()
        return StaticFile(
            file.read_bytes(),
            CONTENT_TYPES[file.suffix.lower()],
            etag,
            IMMUTABLE if current else REVALIDATE,
        )

    def _resolve(self, parts: list[str]) -> Path | None:
        if not parts or any(_unsafe(part) for part in parts):
            return None
        if Path(parts[-1]).suffix.lower() not in CONTENT_TYPES:
            return None
        try:
            real = self.assets.joinpath(*parts).resolve(strict=True)
        except (OSError, RuntimeError, ValueError):
            return None
        if not real.is_relative_to(self.assets) or not real.is_file():
            return None  # a symbolic link that leads out of the folder, or a folder
        return real


def _unsafe(part: str) -> bool:
    """A path segment that is empty, hidden, a parent reference or not a plain name."""
    return not part or part.startswith(".") or any(c in part for c in "\\\0:")
