"""Non-streamed answers: per-call removal, the refusal payload, and what the batch route is sent."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from standin import Connector, chat_answer, deny_names, make_guardrail, outcomes_reply, request_data, tool_call


def run_hook(response: Any, data: dict[str, Any] | None = None, **params: Any) -> Any:
    guardrail = make_guardrail(**params)
    return asyncio.run(
        guardrail.async_post_call_success_hook(data=data or request_data(), user_api_key_dict=None, response=response)
    )


def payload(choice: Any) -> dict[str, Any]:
    return json.loads(choice.message.content)


def test_one_of_two_calls_denied_keeps_the_other(connector: Connector) -> None:
    connector.reply = deny_names("billing_void_invoices")
    response = chat_answer([tool_call("c1", "billing_list_invoices"), tool_call("c2", "billing_void_invoices")])
    out = run_hook(response)
    choice = out.choices[0]
    assert [tc.id for tc in choice.message.tool_calls] == ["c1"]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None


def test_all_calls_denied_gives_the_refusal_payload(connector: Connector) -> None:
    connector.reply = deny_names("db_delete_records")
    out = run_hook(chat_answer([tool_call("c1", "db_delete_records", '{"ids":[1,2]}')], content="Deleting now."))
    choice = out.choices[0]
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    refused = payload(choice)["svc"]
    assert refused["version"] == 1
    assert refused["refused"][0]["tool_call_id"] == "c1"
    assert refused["refused"][0]["tool"] == "db_delete_records"
    assert refused["refused"][0]["stage"] == "refused_at_gateway"
    assert "ids" not in choice.message.content


def test_all_allowed_leaves_the_answer_alone(connector: Connector) -> None:
    response = chat_answer([tool_call("c1", "crm_get_customer"), tool_call("c2", "crm_get_orders")])
    before = response.model_dump()
    out = run_hook(response)
    assert out.model_dump() == before


def test_no_tool_calls_never_asks_the_connector(connector: Connector) -> None:
    assert run_hook(chat_answer([], content="hello")) is None
    assert connector.requests == []


def test_several_choices_are_judged_in_one_batch_and_emptied_separately(connector: Connector) -> None:
    connector.reply = deny_names("rm")
    response = chat_answer([tool_call("a1", "ls"), tool_call("a2", "rm")], [tool_call("b1", "rm")])
    out = run_hook(response)
    assert [tc.id for tc in out.choices[0].message.tool_calls] == ["a1"]
    assert out.choices[1].message.tool_calls is None
    assert out.choices[1].finish_reason == "stop"
    assert [r["tool_call_id"] for r in payload(out.choices[1])["svc"]["refused"]] == ["b1"]
    assert len(connector.requests) == 1
    assert [c["id"] for c in connector.requests[0]["tool_calls"]] == ["a1", "a2", "b1"]


def test_legacy_function_call_is_judged_too(connector: Connector) -> None:
    from litellm.types.utils import ModelResponse

    connector.reply = deny_names("run_shell")
    response = ModelResponse(
        choices=[
            {
                "index": 0,
                "finish_reason": "function_call",
                "message": {"role": "assistant", "function_call": {"name": "run_shell", "arguments": '{"cmd":"rm"}'}},
            }
        ]
    )
    out = run_hook(response)
    assert out.choices[0].message.function_call is None
    assert out.choices[0].finish_reason == "stop"
    assert payload(out.choices[0])["svc"]["refused"][0]["tool"] == "run_shell"


def test_observe_mode_releases_a_denied_call(connector: Connector) -> None:
    connector.reply = outcomes_reply(lambda call: {"outcome": "deny", "enforced": False})
    out = run_hook(chat_answer([tool_call("c1", "db_delete_records")]))
    assert [tc.id for tc in out.choices[0].message.tool_calls] == ["c1"]


def test_hold_timeout_refusal_names_the_hold(connector: Connector) -> None:
    connector.reply = outcomes_reply(
        lambda call: {
            "outcome": "hold_timeout",
            "hold_id": "hold-9",
            "refusal": {
                "error": "svc_hold_timeout",
                "rule": "svc.policy/approval",
                "reason": "awaiting approval",
                "tool_call_id": call["id"],
                "tool": call["function"]["name"],
                "stage": "refused_at_gateway",
                "hold_id": "hold-9",
            },
        }
    )
    out = run_hook(chat_answer([tool_call("c1", "k8s_scale_deployment")]))
    assert payload(out.choices[0])["svc"]["refused"][0]["hold_id"] == "hold-9"


def test_the_batch_request_carries_identity_session_and_deployment(connector: Connector) -> None:
    run_hook(chat_answer([tool_call("c1", "crm_get_customer", '{"id":7}')]), svc_hold_wait=12)
    body = connector.requests[0]
    assert connector.headers[0]["x-api-key"] == "unit-test-connector-token"
    assert body["model"] == "gpt-4o-2024-08-06"
    assert body["request_data"] == {
        "user_api_key_hash": "a" * 64,
        "user_api_key_alias": "team-a-key",
        "user_api_key_team_id": "team-a",
    }
    assert body["session_hints"] == {
        "svc_session": None,
        "header": "sess-42",
        "trace_id": "trace-1",
        "call_id": "call-uuid-1",
    }
    assert body["deployment"] == {
        "api_base_host": "api.openai.example",
        "deployment_id": "deploy-1",
        "provider": "openai",
    }
    assert body["hold_wait_seconds"] == 12
    assert body["tool_calls"] == [tool_call("c1", "crm_get_customer", '{"id":7}')]


def test_session_from_the_request_overrides_the_configured_one(connector: Connector) -> None:
    data = request_data(guardrails=[{"svc-actions": {"extra_body": {"svc_session": "per-request"}}}])
    run_hook(chat_answer([tool_call("c1", "ls")]), data=data, svc_session="configured")
    assert connector.requests[0]["session_hints"]["svc_session"] == "per-request"
    run_hook(chat_answer([tool_call("c1", "ls")]), svc_session="configured")
    assert connector.requests[1]["session_hints"]["svc_session"] == "configured"


def test_identity_falls_back_to_the_authenticated_key(connector: Connector) -> None:
    from litellm.proxy._types import UserAPIKeyAuth

    data = request_data(metadata={})
    auth = UserAPIKeyAuth(api_key="b" * 64, key_alias="k", team_id="t", end_user_id="u")
    guardrail = make_guardrail()
    asyncio.run(
        guardrail.async_post_call_success_hook(
            data=data, user_api_key_dict=auth, response=chat_answer([tool_call("c1", "ls")])
        )
    )
    assert connector.requests[0]["request_data"] == {
        "user_api_key_hash": "b" * 64,
        "user_api_key_alias": "k",
        "user_api_key_team_id": "t",
        "user_api_key_end_user_id": "u",
    }


def test_deployment_hook_never_asks(connector: Connector) -> None:
    guardrail = make_guardrail()
    data = request_data(guardrails=["svc-actions"])
    result = asyncio.run(
        guardrail.async_post_call_success_deployment_hook(data, chat_answer([tool_call("c1", "rm")]), None)
    )
    assert result is None
    assert connector.requests == []
