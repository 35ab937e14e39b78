"""Helpers building LiteLLM stream frames and running the streaming hook over them."""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator, Iterable


def delta_call(index: int, call_id: str | None = None, name: str | None = None, args: str = "") -> dict[str, Any]:
    """One tool-call delta; id and name only on the first delta of a call, as OpenAI sends them."""
    call: dict[str, Any] = {"index": index, "function": {"name": name, "arguments": args}}
    if call_id is not None:
        call["id"] = call_id
        call["type"] = "function"
    return call


def frame(*choices: dict[str, Any], usage: dict[str, int] | None = None) -> Any:
    """A ModelResponseStream frame; each choice is ``{"index", "delta", "finish_reason"}``."""
    from litellm.types.utils import ModelResponseStream

    extra: dict[str, Any] = {"usage": usage} if usage else {}
    chunk = ModelResponseStream(id="chatcmpl-1", created=1, model="gpt-4o-2024-08-06", choices=list(choices), **extra)
    chunk._hidden_params = {"api_base": "http://10.0.0.5:4000/v1", "model_id": "deploy-s", "custom_llm_provider": "openai"}
    return chunk


def choice(index: int = 0, content: str | None = None, calls: list[dict[str, Any]] | None = None,
           finish: str | None = None, role: str | None = None) -> dict[str, Any]:
    """One streaming choice."""
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if calls is not None:
        delta["tool_calls"] = calls
    if role is not None:
        delta["role"] = role
    return {"index": index, "delta": delta, "finish_reason": finish}


async def upstream(frames: Iterable[Any]) -> AsyncIterator[Any]:
    for item in frames:
        yield item


async def collect(guardrail: Any, frames: Iterable[Any] | AsyncIterator[Any], data: dict[str, Any]) -> list[Any]:
    source = frames if hasattr(frames, "__anext__") else upstream(frames)  # type: ignore[arg-type]
    return [
        item
        async for item in guardrail.async_post_call_streaming_iterator_hook(
            user_api_key_dict=None, response=source, request_data=data
        )
    ]


def run_stream(guardrail: Any, frames: Iterable[Any], data: dict[str, Any]) -> list[Any]:
    return asyncio.run(collect(guardrail, frames, data))


def wire(frames: list[Any]) -> str:
    """The frames as the proxy would serialise them, joined: what a client could ever see."""
    return "\n".join(f.model_dump_json(exclude_none=True) for f in frames)


def wire_outside_payload(frames: list[Any]) -> str:
    """The frames serialised with every content delta taken out (the refusal payload names the tool by design)."""
    dumped = []
    for f in frames:
        d = json.loads(f.model_dump_json(exclude_none=True))
        for c in d.get("choices", []):
            (c.get("delta") or {}).pop("content", None)
        dumped.append(json.dumps(d))
    return "\n".join(dumped)


def tool_deltas(frames: list[Any], choice_index: int = 0) -> list[dict[str, Any]]:
    """Every tool-call delta the client receives for one choice, as plain dicts."""
    found = []
    for f in frames:
        for c in f.choices:
            if c.index == choice_index and c.delta.tool_calls:
                found.extend(json.loads(tc.model_dump_json()) for tc in c.delta.tool_calls)
    return found


def assembled(frames: list[Any], choice_index: int = 0) -> dict[int, dict[str, str]]:
    """What a client reassembles per tool-call index: id, name, arguments."""
    calls: dict[int, dict[str, str]] = {}
    for d in tool_deltas(frames, choice_index):
        call = calls.setdefault(d["index"], {"id": "", "name": "", "arguments": ""})
        call["id"] = d.get("id") or call["id"]
        call["name"] += (d.get("function") or {}).get("name") or ""
        call["arguments"] += (d.get("function") or {}).get("arguments") or ""
    return calls


def finish_reasons(frames: list[Any], choice_index: int = 0) -> list[str]:
    return [c.finish_reason for f in frames for c in f.choices if c.index == choice_index and c.finish_reason]


def content(frames: list[Any], choice_index: int = 0) -> str:
    return "".join(c.delta.content or "" for f in frames for c in f.choices if c.index == choice_index)
