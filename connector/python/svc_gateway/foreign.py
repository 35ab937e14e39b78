"""Answers in shapes other than chat completions (Responses API, Anthropic messages, raw frames).

This module cannot remove single calls from those shapes, so it refuses any such
answer or stream that carries a tool call as a whole rather than let it through
unjudged; answers without tool calls pass.
"""

from __future__ import annotations

from typing import Any

# Item types that carry a model-chosen action in the OpenAI Responses API and Anthropic messages.
TOOL_ITEM_TYPES = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "tool_use",
        "server_tool_use",
        "mcp_call",
        "computer_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
        "code_interpreter_call",
        "web_search_call",
        "file_search_call",
        "image_generation_call",
    }
)
TOOL_KEYS = frozenset({"tool_calls", "function_call", "tool_use"})
_RAW_MARKERS = tuple(t.encode() for t in sorted(TOOL_ITEM_TYPES | TOOL_KEYS))
MAX_DEPTH = 64


def carries_tool_call(obj: Any) -> bool:
    """True when ``obj`` (a model, mapping, list or raw frame) holds anything shaped like a tool call."""
    if isinstance(obj, (bytes, bytearray)):
        return any(marker in obj for marker in _RAW_MARKERS)
    if isinstance(obj, str):
        return carries_tool_call(obj.encode("utf-8", "replace"))
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        obj = dump()
    return _scan(obj, 0)


def _scan(obj: Any, depth: int) -> bool:
    if depth > MAX_DEPTH:
        return True  # too deep to read: assume the worst
    if isinstance(obj, dict):
        if obj.get("type") in TOOL_ITEM_TYPES:
            return True
        if any(obj.get(key) for key in TOOL_KEYS):
            return True
        return any(_scan(value, depth + 1) for value in obj.values())
    if isinstance(obj, (list, tuple)):
        return any(_scan(item, depth + 1) for item in obj)
    if isinstance(obj, (bytes, bytearray, str)):
        return False
    return False
