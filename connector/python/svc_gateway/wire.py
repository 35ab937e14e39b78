"""The connector's batch route ``POST /v1/gateway/tool-calls``: request body and strict answer reading.

Anything in the answer that does not match the contract raises ``AnswerError``;
the caller turns that into a refusal of every call, never into a release.
"""

from __future__ import annotations

from typing import Any

from .verdicts import STAGE_REFUSED, ToolCall, Verdict

OUTCOME_ERRORS = {
    "deny": "svc_denied",
    "hold_timeout": "svc_hold_timeout",
    "unmapped": "svc_tenant_unmapped",
    "fail_closed": "svc_fail_closed",
}
OUTCOMES = frozenset({"allow", *OUTCOME_ERRORS})


class AnswerError(ValueError):
    """The connector's answer does not follow the batch-route contract."""


def request_body(
    *,
    model: str | None,
    identity: dict[str, str],
    session_hints: dict[str, str | None],
    deployment: dict[str, str | None],
    hold_wait: int,
    calls: list[ToolCall],
) -> dict[str, Any]:
    """The JSON body of one batch call."""
    return {
        "model": model,
        "request_data": identity,
        "session_hints": session_hints,
        "deployment": deployment,
        "hold_wait_seconds": hold_wait,
        "tool_calls": [call.wire() for call in calls],
    }


def read_answer(answer: Any, calls: list[ToolCall]) -> list[Verdict]:
    """One verdict per call, in order, from the parsed JSON answer."""
    if not isinstance(answer, dict):
        raise AnswerError("the answer is not a JSON object")
    outcomes = answer.get("outcomes")
    if not isinstance(outcomes, list):
        raise AnswerError("outcomes is missing or not a list")
    if len(outcomes) != len(calls):
        raise AnswerError(f"{len(outcomes)} outcomes for {len(calls)} tool calls")
    return [_verdict(item, call, pos) for pos, (item, call) in enumerate(zip(outcomes, calls))]


def _verdict(item: Any, call: ToolCall, pos: int) -> Verdict:
    if not isinstance(item, dict):
        raise AnswerError(f"outcomes[{pos}] is not an object")
    outcome = item.get("outcome")
    if outcome not in OUTCOMES:
        raise AnswerError(f"outcomes[{pos}].outcome is not one of {sorted(OUTCOMES)}")
    if item.get("tool_call_id") != call.id:
        raise AnswerError(f"outcomes[{pos}].tool_call_id does not name the call sent in that position")
    enforced = item.get("enforced", True)
    if not isinstance(enforced, bool):
        raise AnswerError(f"outcomes[{pos}].enforced is not a boolean")
    if outcome == "allow":
        return Verdict(release=True, outcome=outcome)
    return Verdict(release=not enforced, outcome=outcome, refusal=_refusal(item, call, outcome, pos))


def _refusal(item: dict[str, Any], call: ToolCall, outcome: str, pos: int) -> dict[str, Any]:
    given = item.get("refusal")
    if given is not None and not isinstance(given, dict):
        raise AnswerError(f"outcomes[{pos}].refusal is not an object")
    if given:
        return given
    rule, reason = item.get("rule"), item.get("reason")
    refusal: dict[str, Any] = {
        "error": OUTCOME_ERRORS[outcome],
        "rule": rule if isinstance(rule, str) else "",
        "reason": reason if isinstance(reason, str) else "",
        "tool_call_id": call.id,
        "tool": call.name,
        "stage": STAGE_REFUSED,
    }
    hold_id = item.get("hold_id")
    if isinstance(hold_id, str) and hold_id:
        refusal["hold_id"] = hold_id
    return refusal
