"""Tool calls, per-call verdicts and the refusal payload (gateway spec §2.2).

A ``Verdict`` is what the guardrail applies to one tool call: release it, or
remove it and report the refusal entry. Only an ``allow`` outcome, or an outcome
the connector marks ``enforced: false`` (observe mode), releases a call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

FAIL_CLOSED_RULE = "svc.core/fail_closed"
FAIL_CLOSED_ERROR = "svc_fail_closed"
STAGE_REFUSED = "refused_at_gateway"
PAYLOAD_VERSION = 1


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a model answer, as the batch route takes it.

    ``choice`` and ``slot`` locate the call in the answer; they never go on the wire.
    """

    id: str
    name: str
    arguments: str
    choice: int = 0
    slot: int = 0

    def wire(self) -> dict[str, Any]:
        """The call in the OpenAI tool-call shape the batch route reads."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class Verdict:
    """The outcome applied to one tool call."""

    release: bool
    outcome: str
    refusal: dict[str, Any] | None = field(default=None)


def fail_closed(calls: list[ToolCall], reason: str) -> list[Verdict]:
    """Refuse every call under ``svc.core/fail_closed``; used for every fault on the way to a decision."""
    return [
        Verdict(
            release=False,
            outcome="fail_closed",
            refusal={
                "error": FAIL_CLOSED_ERROR,
                "rule": FAIL_CLOSED_RULE,
                "reason": reason,
                "tool_call_id": call.id,
                "tool": call.name,
                "stage": STAGE_REFUSED,
            },
        )
        for call in calls
    ]


def refusal_payload(refusals: list[dict[str, Any]]) -> str:
    """The refusal payload JSON placed in a choice's ``content`` when no call of it remains."""
    return json.dumps({"svc": {"refused": refusals, "version": PAYLOAD_VERSION}}, separators=(",", ":"))
