"""Non-streamed answers: collect each choice's tool calls and remove the refused ones in place.

When no call of a choice remains, its ``tool_calls`` becomes null, its ``content``
the refusal payload JSON and its ``finish_reason`` ``stop`` (gateway spec §7).
"""

from __future__ import annotations

from typing import Any

from .calls import LEGACY_CALL_ID, LEGACY_SLOT, field, name_and_arguments
from .verdicts import ToolCall, Verdict, refusal_payload


def collect(response: Any) -> list[ToolCall]:
    """Every tool call of every choice, in choice order then call order."""
    calls: list[ToolCall] = []
    for pos, choice in enumerate(field(response, "choices") or []):
        message = field(choice, "message")
        for slot, tool_call in enumerate(field(message, "tool_calls") or []):
            name, arguments = name_and_arguments(tool_call)
            call_id = field(tool_call, "id")
            calls.append(ToolCall(call_id if isinstance(call_id, str) else "", name, arguments, pos, slot))
        legacy = field(message, "function_call")
        if legacy is not None:
            name, arguments = name_and_arguments({"function": legacy})
            calls.append(ToolCall(LEGACY_CALL_ID, name, arguments, pos, LEGACY_SLOT))
    return calls


def apply(response: Any, calls: list[ToolCall], verdicts: list[Verdict]) -> None:
    """Remove every refused call from ``response``; a choice left without calls carries the refusal payload."""
    choices = list(field(response, "choices") or [])
    for pos, choice in enumerate(choices):
        mine = [(c, v) for c, v in zip(calls, verdicts) if c.choice == pos]
        refused = [(c, v) for c, v in mine if not v.release]
        if refused:
            _apply_choice(choice, mine, [v.refusal or {} for _, v in refused])


def _apply_choice(choice: Any, mine: list[tuple[ToolCall, Verdict]], refusals: list[dict[str, Any]]) -> None:
    message = field(choice, "message")
    released = {c.slot for c, v in mine if v.release}
    kept = [tc for slot, tc in enumerate(field(message, "tool_calls") or []) if slot in released]
    legacy_kept = LEGACY_SLOT in released
    _set(message, "tool_calls", kept or None)
    if not legacy_kept:
        _set(message, "function_call", None)
    if not kept and not legacy_kept:
        _set(message, "content", refusal_payload(refusals))
        _set(choice, "finish_reason", "stop")


def _set(obj: Any, name: str, value: Any) -> None:
    if isinstance(obj, dict):
        obj[name] = value
    else:
        setattr(obj, name, value)
