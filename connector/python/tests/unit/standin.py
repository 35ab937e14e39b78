"""The stand-in connector's state and replies, and builders of LiteLLM objects, shared by the unit tests.

The stand-in exists to inject faults the real connector cannot be made to produce
on demand (garbage answers, resets, stalls); the real connector is exercised by
the end-to-end suite. Its server is the ``connector`` fixture of conftest.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

TOKEN = "unit-test-connector-token"

Reply = Callable[[dict[str, Any]], "Answer"]


@dataclass
class Answer:
    """What the stand-in connector does with one request."""

    status: int = 200
    body: bytes = b""
    delay: float = 0.0
    reset: bool = False


@dataclass
class Connector:
    """The stand-in's address, the requests it received and how it answers."""

    url: str
    reply: Reply
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)


def outcomes_reply(decide: Callable[[dict[str, Any]], dict[str, Any]]) -> Reply:
    """A contract-following reply: one outcome per tool call from ``decide(call)``."""

    def reply(body: dict[str, Any]) -> Answer:
        outcomes = []
        for call in body["tool_calls"]:
            item = {"tool_call_id": call["id"], "tool": call["function"]["name"], "enforced": True, **decide(call)}
            if item["outcome"] != "allow" and "refusal" not in item:
                item["refusal"] = {
                    "error": "svc_denied",
                    "rule": item.get("rule", "svc.policy/test"),
                    "reason": item.get("reason", "refused by the test"),
                    "tool_call_id": call["id"],
                    "tool": call["function"]["name"],
                    "stage": "refused_at_gateway",
                }
            outcomes.append(item)
        return Answer(body=json.dumps({"outcomes": outcomes, "refusal_payload": None}).encode())

    return reply


def deny_names(*names: str) -> Reply:
    """Deny the calls to ``names``, allow the rest."""
    return outcomes_reply(lambda call: {"outcome": "deny" if call["function"]["name"] in names else "allow"})


def make_guardrail(**params: Any) -> Any:
    """An ActionGuardrail built the way LiteLLM's registry builds one from the proxy config."""
    from svc_gateway.guardrail import ActionGuardrail

    params.setdefault("svc_hold_wait", 0)
    params.setdefault("svc_timeout_margin", 2)
    return ActionGuardrail(guardrail_name="svc-actions", event_hook="post_call", default_on=True, **params)


def tool_call(call_id: str, name: str, arguments: str = "{}") -> dict[str, Any]:
    """An OpenAI tool call."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def chat_answer(*choices: list[dict[str, Any]], content: str | None = None) -> Any:
    """A non-streamed ModelResponse with one choice per list of tool calls."""
    from litellm.types.utils import ModelResponse

    response = ModelResponse(
        model="gpt-4o-2024-08-06",
        choices=[
            {
                "index": i,
                "finish_reason": "tool_calls" if calls else "stop",
                "message": {"role": "assistant", "content": content, "tool_calls": calls or None},
            }
            for i, calls in enumerate(choices)
        ],
    )
    response._hidden_params = {
        "api_base": "https://api.openai.example/v1",
        "model_id": "deploy-1",
        "custom_llm_provider": "openai",
    }
    return response


def request_data(**extra: Any) -> dict[str, Any]:
    """Proxy request data as LiteLLM's pre-call processing leaves it for the post-call hooks."""
    data: dict[str, Any] = {
        "model": "gpt-4o",
        "litellm_call_id": "call-uuid-1",
        "litellm_trace_id": "trace-1",
        "metadata": {
            "user_api_key_hash": "a" * 64,
            "user_api_key_alias": "team-a-key",
            "user_api_key_team_id": "team-a",
            "user_api_key_spend": 0.0,
            "model_info": {"id": "deploy-1"},
        },
        "proxy_server_request": {"headers": {"X-Svc-Session": "sess-42", "content-type": "application/json"}},
    }
    data.update(extra)
    return data
