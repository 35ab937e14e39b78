"""Fixtures: a real HTTP server on 127.0.0.1 standing in for the connector (see standin.py)."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from standin import TOKEN, Answer, Connector, deny_names  # noqa: E402 - after the cost-map switch


@pytest.fixture
def connector(monkeypatch: pytest.MonkeyPatch) -> Iterator[Connector]:
    """A stand-in connector on 127.0.0.1 (port 0); its URL and token are set in the environment."""
    state = Connector(url="", reply=deny_names())

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server naming
            raw = self.rfile.read(int(self.headers.get("content-length", "0")))
            body = json.loads(raw)
            state.requests.append(body)
            state.headers.append({k.lower(): v for k, v in self.headers.items()})
            if self.path != "/v1/gateway/tool-calls" or self.headers.get("x-api-key") != TOKEN:
                answer = Answer(status=404 if self.path != "/v1/gateway/tool-calls" else 401, body=b"{}")
            else:
                answer = state.reply(body)
            time.sleep(answer.delay)
            if answer.reset:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                self.connection.close()
                return
            self.send_response(answer.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("SVC_CONNECTOR_URL", state.url)
    monkeypatch.setenv("SVC_CONNECTOR_TOKEN", TOKEN)
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def dead_url() -> str:
    """A loopback URL where nothing listens."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


