"""A loopback HTTP server with byte ranges, for the tests that read published forms over HTTP.

Python's ``http.server`` answers ``Range`` with the whole file (200), which fsspec, Icechunk and
GDAL's ``/vsicurl/`` cannot use; this handler answers one range ``bytes=A-B`` / ``bytes=A-`` /
``bytes=-N`` with 206 and ``Content-Range`` (416 past the end), and records every request so a
test can see which files were read by range.
"""

from __future__ import annotations

import contextlib
import http.server
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["RangeServer", "range_server"]


@dataclass
class RangeServer:
    root: Path
    url: str  # http://127.0.0.1:PORT/
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)  # (method, path, Range)

    def ranged(self, prefix: str) -> list[str]:
        """Paths under ``prefix`` (server-relative, e.g. ``/pub/data/``) read with a Range header."""
        return [p for m, p, r in list(self.requests) if m == "GET" and r and p.startswith(prefix)]


def _parse_range(header: str, size: int) -> tuple[int, int] | None:
    """Inclusive (first, last) of one ``bytes=`` range, or None when it is unsatisfiable."""
    spec = header.strip().removeprefix("bytes=")
    first, _, last = spec.partition("-")
    if not first:  # suffix: the last N bytes
        n = int(last)
        return (max(0, size - n), size - 1) if n > 0 and size else None
    a = int(first)
    b = min(int(last), size - 1) if last else size - 1
    return (a, b) if a <= b else None


@contextlib.contextmanager
def range_server(root: Path) -> Iterator[RangeServer]:
    """Serve ``root`` on a free loopback port for the ``with`` block."""
    state: dict[str, Any] = {}

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, directory=str(root), **k)

        def log_message(self, *a: Any) -> None:
            pass

        def do_HEAD(self) -> None:
            state["server"].requests.append(("HEAD", self.path, None))
            super().do_HEAD()

        def do_GET(self) -> None:
            rng = self.headers.get("Range")
            state["server"].requests.append(("GET", self.path, rng))
            path = Path(self.translate_path(self.path))
            if not rng or "," in rng or not path.is_file():  # several ranges: the whole file (RFC 9110 allows it)
                super().do_GET()
                return
            data = path.read_bytes()
            span = _parse_range(rng, len(data))
            if span is None:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = data[span[0] : span[1] + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {span[0]}-{span[1]}/{len(data)}")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()
            self.wfile.write(body)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state["server"] = RangeServer(root, f"http://127.0.0.1:{srv.server_address[1]}/")
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield state["server"]
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=5)
