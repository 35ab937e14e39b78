"""A capture server standing where the connector would: it records every generic-guardrail call the
real proxy makes (path, headers, body) and answers `{"action": "NONE"}`."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from .httpserve import JSONHandler, LoopbackServer


@dataclass(frozen=True)
class Captured:
    """One guardrail call as it arrived."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class CaptureLog:
    calls: list[Captured] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, call: Captured) -> None:
        with self.lock:
            self.calls.append(call)

    def take(self) -> list[Captured]:
        """Every call recorded so far, clearing the log."""
        with self.lock:
            calls, self.calls = self.calls, []
            return calls


class _Handler(JSONHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        owner: CaptureServer = self.server.owner  # type: ignore[attr-defined]
        body = self.read_json()
        owner.log.add(Captured("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        self.send_json(200, {"action": "NONE"})


class CaptureServer(LoopbackServer):
    """Records guardrail calls in `log`."""

    def __init__(self) -> None:
        self.log = CaptureLog()
        super().__init__(_Handler)
