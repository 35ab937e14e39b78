"""The caller's side: a real OpenAI client through the proxy, raw SSE reads, and readers of svc's refusals."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
import openai

from .upstream import Scenario

CLIENT_TIMEOUT = 120.0


def openai_client(base_url: str, key: str) -> openai.OpenAI:
    """An OpenAI client for the proxy at base_url, authenticated with a caller key; no retries."""
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key=key, max_retries=0, timeout=CLIENT_TIMEOUT)


def refusal_payload(text: str) -> dict[str, Any]:
    """The refusal payload `{"svc": {"refused": [...], "version": 1}}` embedded in text (an error message
    `Svc: <reason> [rule=<rule>] <payload>` or a message content that is the payload)."""
    start = text.find('{"svc"')
    assert start >= 0, f"no svc refusal payload in {text!r}"
    payload, _ = json.JSONDecoder().raw_decode(text[start:])
    assert payload["svc"]["version"] == 1, payload
    assert isinstance(payload["svc"]["refused"], list) and payload["svc"]["refused"], payload
    return payload


def refused(text: str) -> list[dict[str, Any]]:
    """The refusal entries embedded in text."""
    return refusal_payload(text)["svc"]["refused"]


def error_message(err: openai.APIStatusError) -> str:
    """The `error.message` of a proxy error answer."""
    body = err.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return inner["message"]
    return str(err)


@dataclass(frozen=True)
class RawStream:
    """A streamed answer as the client's socket received it."""

    status: int
    raw: bytes

    def events(self) -> list[Any]:
        """The SSE data payloads, JSON-decoded where they are JSON ([DONE] kept as the string)."""
        out: list[Any] = []
        for line in self.raw.decode(errors="replace").splitlines():
            if not line.startswith("data:"):
                continue
            data = line[len("data:"):].strip()
            try:
                out.append(json.loads(data))
            except ValueError:
                out.append(data)
        return out


def raw_stream(base_url: str, key: str, model: str, scenario: Scenario,
               headers: dict[str, str] | None = None) -> RawStream:
    """POST a `stream: true` chat completion and return the raw bytes received."""
    hdrs = {"Authorization": f"Bearer {key}"} | (headers or {})
    body = {"model": model, "messages": scenario.messages(), "stream": True}
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", headers=hdrs, json=body,
                      timeout=CLIENT_TIMEOUT) as resp:
        return RawStream(resp.status_code, resp.read())


def unique(prefix: str) -> str:
    """A value no other test uses (keeps holds and budgets of tests apart)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"
