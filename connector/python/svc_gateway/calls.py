"""Reading tool calls out of LiteLLM's objects (or plain dicts): function, custom and legacy calls."""

from __future__ import annotations

import json
from typing import Any

LEGACY_SLOT = -1
LEGACY_CALL_ID = "function_call"


def field(obj: Any, name: str) -> Any:
    """Attribute or mapping member ``name`` of ``obj``, None when absent."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def name_and_arguments(tool_call: Any) -> tuple[str, str]:
    """A call's tool name and argument text; a custom tool's free-form input counts as its arguments."""
    function = field(tool_call, "function")
    custom = field(tool_call, "custom")
    if function is None and custom is not None:
        return _text(field(custom, "name")), _text(field(custom, "input"))
    return _text(field(function, "name")), _text(field(function, "arguments"))


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), default=str)
