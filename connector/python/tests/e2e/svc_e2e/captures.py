"""Captures of what the real proxy sends to a generic guardrail, kept in connector/testdata/litellm-captured.

A capture file holds one guardrail call body, exactly as it arrived (like the authored fixtures in
../shared/fixtures/litellm/requests); index.json beside them holds, per file, the scenario, the client
request, the guardrail's config and the HTTP method, path and headers of the call. `normalise` blanks the
values that change on every run (ids, ports, lengths) so a fresh capture can be compared with a stored one.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[5]
CAPTURE_DIR = REPO_ROOT / "connector" / "testdata" / "litellm-captured"

_VOLATILE_HEADERS = {"host", "content-length"}


def normalise(body: Any) -> Any:
    """A copy of a captured guardrail body or HTTP header map with per-run values replaced by placeholders."""
    out = copy.deepcopy(body)
    if not isinstance(out, dict):
        return out
    for key in ("litellm_call_id", "litellm_trace_id"):
        if out.get(key) is not None:
            out[key] = "<uuid>"
    for call in out.get("tool_calls") or []:
        if isinstance(call, dict) and call.get("id"):
            call["id"] = "<tool-call-id>"
    headers = out.get("request_headers")
    if isinstance(headers, dict):
        out["request_headers"] = normalise_headers(headers)
    return out


def normalise_headers(headers: dict[str, str]) -> dict[str, str]:
    """Header map with host and content-length values blanked."""
    return {k: (f"<{k}>" if k.lower() in _VOLATILE_HEADERS else v) for k, v in headers.items()}


def load_index() -> dict[str, Any]:
    """The stored captures' index.json."""
    return json.loads((CAPTURE_DIR / "index.json").read_text())


def load_capture(name: str) -> Any:
    """One stored capture body."""
    return json.loads((CAPTURE_DIR / name).read_text())


def write_capture(name: str, body: Any) -> None:
    """Store one capture body (pretty, sorted as received)."""
    CAPTURE_DIR.mkdir(parents=True, exist_ok=True)
    (CAPTURE_DIR / name).write_text(json.dumps(body, indent=2) + "\n")


def write_index(index: dict[str, Any]) -> None:
    """Store index.json."""
    CAPTURE_DIR.mkdir(parents=True, exist_ok=True)
    (CAPTURE_DIR / "index.json").write_text(json.dumps(index, indent=2) + "\n")
