"""A threaded loopback HTTP server run inside the test process (the fake model upstream, the capture server)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .procs import LOOPBACK


class JSONHandler(BaseHTTPRequestHandler):
    """Base handler: HTTP/1.1 keep-alive, JSON bodies, no request logging on stderr."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature from the base class
        return

    def read_json(self) -> Any:
        """The request body parsed as JSON (None when empty)."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else None

    def send_json(self, status: int, body: Any) -> None:
        """Answer status with body encoded as JSON."""
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class LoopbackServer:
    """A ThreadingHTTPServer on a kernel-chosen loopback port, serving in a daemon thread."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer((LOOPBACK, 0), handler)
        self.httpd.daemon_threads = True
        self.httpd.owner = self  # type: ignore[attr-defined]  # handlers reach their server's state
        self.thread = threading.Thread(target=self.httpd.serve_forever, name=handler.__name__, daemon=True)

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self.httpd.server_address[1])

    @property
    def url(self) -> str:
        """http://127.0.0.1:<port>"""
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> "LoopbackServer":
        """Serve in the background."""
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)
