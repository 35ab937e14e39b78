"""A tiny OpenAI-compatible model upstream answering /v1/chat/completions with chosen tool calls.

The test chooses the answer in the request itself: the last user message is `svc-e2e <scenario JSON>`
(see `Scenario.prompt`). Being stateless, the upstream answers concurrent clients (benchmarks) and
retries alike. Tool call ids are fresh per answer, as a real model's are, unless the scenario pins them.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator

from .httpserve import JSONHandler, LoopbackServer

PROMPT_PREFIX = "svc-e2e "
UPSTREAM_MODEL = "fake-model-2026-01-01"


@dataclass(frozen=True)
class ToolCall:
    """One tool call the fake model proposes."""

    name: str
    arguments: dict[str, Any] | str
    id: str | None = None

    def wire_arguments(self) -> str:
        """The arguments as the JSON string a model sends (a str is sent verbatim)."""
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass(frozen=True)
class Scenario:
    """What the fake model answers: optional text and tool calls, in order."""

    tool_calls: tuple[ToolCall, ...] = ()
    content: str | None = None

    def prompt(self) -> str:
        """The user message that makes the upstream answer this scenario."""
        return PROMPT_PREFIX + json.dumps(asdict(self))

    def messages(self) -> list[dict[str, str]]:
        """A chat `messages` list asking for this scenario."""
        return [{"role": "user", "content": self.prompt()}]

    @staticmethod
    def from_prompt(text: str) -> "Scenario":
        """Parse a prompt made by prompt()."""
        raw = json.loads(text[len(PROMPT_PREFIX) :])
        calls = tuple(ToolCall(**c) for c in raw.get("tool_calls") or [])
        return Scenario(tool_calls=calls, content=raw.get("content"))


def scenario_of(body: dict[str, Any]) -> Scenario:
    """The scenario named by the last user message of a chat request (text only when there is none)."""
    for msg in reversed(body.get("messages") or []):
        content = msg.get("content")
        if msg.get("role") == "user" and isinstance(content, str) and content.startswith(PROMPT_PREFIX):
            return Scenario.from_prompt(content)
    return Scenario(content="hello from the fake model")


def _wire_calls(scenario: Scenario) -> list[dict[str, Any]]:
    return [
        {
            "id": call.id or f"call_{uuid.uuid4().hex[:20]}",
            "type": "function",
            "function": {"name": call.name, "arguments": call.wire_arguments()},
        }
        for call in scenario.tool_calls
    ]


def completion(scenario: Scenario) -> dict[str, Any]:
    """A non-streamed chat.completion for scenario."""
    calls = _wire_calls(scenario)
    message: dict[str, Any] = {"role": "assistant", "content": scenario.content}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": UPSTREAM_MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 20, "total_tokens": 32},
    }


def _pieces(text: str, parts: int = 3) -> list[str]:
    step = max(1, -(-len(text) // parts))
    return [text[i : i + step] for i in range(0, len(text), step)] or [""]


def stream_chunks(scenario: Scenario) -> Iterator[dict[str, Any]]:
    """The chat.completion.chunk objects of a streamed answer: text deltas, then each tool call's
    name and its arguments split over several deltas, then the finish chunk."""
    cid, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": UPSTREAM_MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    yield chunk({"role": "assistant", "content": ""})
    if scenario.content:
        for piece in _pieces(scenario.content):
            yield chunk({"content": piece})
    calls = _wire_calls(scenario)
    for index, call in enumerate(calls):
        head = {"index": index, "id": call["id"], "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""}}
        yield chunk({"tool_calls": [head]})
        for piece in _pieces(call["function"]["arguments"]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if calls else "stop")


@dataclass
class UpstreamLog:
    """Requests the upstream received (thread-safe append)."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, body: dict[str, Any]) -> None:
        with self.lock:
            self.requests.append(body)

    def count(self) -> int:
        with self.lock:
            return len(self.requests)


class _Handler(JSONHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        if self.path.rstrip("/") in {"/v1/models", "/models"}:
            self.send_json(200, {"object": "list", "data": [{"id": UPSTREAM_MODEL, "object": "model"}]})
            return
        self.send_json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        if self.path.rstrip("/") not in {"/v1/chat/completions", "/chat/completions"}:
            self.send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        body = self.read_json() or {}
        owner: FakeModel = self.server.owner  # type: ignore[attr-defined]
        owner.log.add(body)
        scenario = scenario_of(body)
        if not body.get("stream"):
            self.send_json(200, completion(scenario))
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for piece in stream_chunks(scenario):
            self.wfile.write(b"data: " + json.dumps(piece).encode() + b"\n\n")
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


class FakeModel(LoopbackServer):
    """The OpenAI-compatible upstream; `log` holds every chat request it answered."""

    def __init__(self) -> None:
        self.log = UpstreamLog()
        super().__init__(_Handler)

    @property
    def api_base(self) -> str:
        """The OpenAI api_base LiteLLM should use (…/v1)."""
        return f"{self.url}/v1"
