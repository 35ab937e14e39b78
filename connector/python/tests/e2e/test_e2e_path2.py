"""Path 2 end to end: a real OpenAI client -> the LiteLLM proxy running svc_gateway.guardrail.ActionGuardrail
(loaded by dotted path) -> the connector's batch route -> `svc serve` with the bundled policy and the real opa.

Same tool readings and keys as path 1 (testdata/tools.json, testdata/tenancy.json).
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from svc_e2e.cases import (WAIT_FOR_HOLD, ask, credential_change, mass_delete, pending_hold_for, read_call,
                           void_invoices, wait_for)
from svc_e2e.client import raw_stream, refused, unique
from svc_e2e.proxy import Proxy
from svc_e2e.topology import (P2_DOWN_MODEL, P2_MODEL, P2_NOWAIT_MODEL, P2_OBLIGATIONS_MODEL, PROD_KEY, STAGING_KEY,
                              UNKNOWN_OBLIGATION, Stack)
from svc_e2e.upstream import Scenario

P2_DEPLOYMENT_ID = "e2e-deployment-1"  # model_info.id of P2_MODEL (first in the path-2 model list)


def tool_names(message: Any) -> list[str]:
    return [c.function.name for c in message.tool_calls or []]


def test_two_calls_one_denied_keeps_the_allowed_call(stack: Stack, proxy_path2: Proxy) -> None:
    allowed, denied = read_call(unique("call_read")), mass_delete(call_id=unique("call_del"))
    resp = ask(proxy_path2.url, PROD_KEY.key, P2_MODEL, Scenario((allowed, denied)))
    message = resp.choices[0].message
    assert tool_names(message) == ["crm_get_customer"]
    assert message.tool_calls[0].id == allowed.id
    assert json.loads(message.tool_calls[0].function.arguments) == allowed.arguments
    assert resp.choices[0].finish_reason == "tool_calls"


def test_all_denied_leaves_no_tool_call_and_the_refusal_as_content(stack: Stack, proxy_path2: Proxy) -> None:
    first, second = mass_delete(call_id=unique("call_del")), mass_delete(call_id=unique("call_del"))
    resp = ask(proxy_path2.url, PROD_KEY.key, P2_MODEL, Scenario((first, second)))
    choice = resp.choices[0]
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    entries = refused(choice.message.content)
    assert json.loads(choice.message.content) == {"svc": {"refused": entries, "version": 1}}
    assert [e["tool_call_id"] for e in entries] == [first.id, second.id]
    assert {e["rule"] for e in entries} == {"svc.policy/irreversible_systemic_prod"}
    assert {e["error"] for e in entries} == {"svc_denied"}
    assert {e["stage"] for e in entries} == {"refused_at_gateway"}


def _tool_deltas(events: list[Any]) -> list[dict[str, Any]]:
    return [call for event in events if isinstance(event, dict) for choice in event.get("choices") or []
            for call in (choice.get("delta") or {}).get("tool_calls") or []]


def _delta_tool_names(events: list[Any]) -> list[str]:
    return [name for call in _tool_deltas(events) if (name := (call.get("function") or {}).get("name"))]


def _delta_arguments(events: list[Any]) -> dict[int, str]:
    """Each streamed tool call's arguments, reassembled by index."""
    args: dict[int, str] = {}
    for call in _tool_deltas(events):
        piece = (call.get("function") or {}).get("arguments") or ""
        args[call["index"]] = args.get(call["index"], "") + piece
    return args


def _content(events: list[Any]) -> str:
    return "".join((c.get("delta") or {}).get("content") or "" for e in events if isinstance(e, dict)
                   for c in e.get("choices") or [])


def test_streamed_denied_call_never_reaches_the_client(stack: Stack, proxy_path2: Proxy) -> None:
    allowed, denied = read_call(unique("call_read")), mass_delete(call_id=unique("call_del"))
    stream = raw_stream(proxy_path2.url, PROD_KEY.key, P2_MODEL, Scenario((allowed, denied), content="On it."))
    assert stream.status == 200
    raw = stream.raw
    # The denied call: neither its name as a tool call nor any part of its arguments is on the wire.
    assert not re.search(rb'"name"\s*:\s*"db_delete_records"', raw), raw
    assert denied.arguments["marker"].encode() not in raw  # type: ignore[index]
    assert b'"ids"' not in raw
    # The allowed call arrives whole.
    events = stream.events()
    assert _delta_tool_names(events) == ["crm_get_customer"]
    assert [json.loads(a) for a in _delta_arguments(events).values()] == [allowed.arguments]
    assert _content(events).startswith("On it.")  # the text before the first tool call is delivered
    assert allowed.id.encode() in raw  # type: ignore[union-attr]
    assert events[-1] == "[DONE]"
    assert not [e for e in events if isinstance(e, dict) and "error" in e]


def test_streamed_all_denied_ends_with_stop_and_the_refusal(stack: Stack, proxy_path2: Proxy) -> None:
    denied = mass_delete(call_id=unique("call_del"))
    stream = raw_stream(proxy_path2.url, PROD_KEY.key, P2_MODEL, Scenario((denied,)))
    assert stream.status == 200
    assert denied.arguments["marker"].encode() not in stream.raw  # type: ignore[index]
    events = [e for e in stream.events() if isinstance(e, dict)]
    assert _delta_tool_names(events) == []
    assert [e["tool_call_id"] for e in refused(_content(events))] == [denied.id]
    finishes = [c.get("finish_reason") for e in events for c in e.get("choices") or [] if c.get("finish_reason")]
    assert finishes == ["stop"]


def test_connector_down_refuses(stack: Stack, proxy_path2: Proxy) -> None:
    call = read_call(unique("call_read"))
    resp = ask(proxy_path2.url, PROD_KEY.key, P2_DOWN_MODEL, Scenario((call,)))
    choice = resp.choices[0]
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    entries = refused(choice.message.content)
    assert [(e["tool_call_id"], e["rule"]) for e in entries] == [(call.id, "svc.core/fail_closed")]


def test_hold_approved_during_the_wait_is_delivered(stack: Stack, proxy_path2: Proxy) -> None:
    customer = unique("cus-hold2")
    result: dict[str, Any] = {}

    def request() -> None:
        try:
            result["response"] = ask(proxy_path2.url, PROD_KEY.key, P2_MODEL, Scenario((void_invoices(customer),)))
        except Exception as err:  # noqa: BLE001 - reported by the assertion below
            result["error"] = err

    worker = threading.Thread(target=request)
    worker.start()
    hold = wait_for(pending_hold_for(stack.engine, customer), WAIT_FOR_HOLD, f"a pending hold for {customer}")
    stack.engine.resolve(hold["id"])
    worker.join(timeout=60)
    assert not worker.is_alive()
    assert "error" not in result, result.get("error")
    assert tool_names(result["response"].choices[0].message) == ["billing_void_invoices"]
    assert stack.engine.hold(hold["id"])["status"] == "consumed"


def test_ledger_rows_carry_the_deployment(stack: Stack, proxy_path2: Proxy) -> None:
    allowed, denied = read_call(unique("call_read")), mass_delete(call_id=unique("call_del"))
    ask(proxy_path2.url, PROD_KEY.key, P2_MODEL, Scenario((allowed, denied)))
    rows = {r["tool_call_id"]: r for r in stack.connector.ledger() if r["tool_call_id"] in {allowed.id, denied.id}}
    assert set(rows) == {allowed.id, denied.id}
    for row in rows.values():
        assert row["transport"] == "in_process"
        assert row["api_base_host"] == "127.0.0.1"
        assert row["deployment_id"] == P2_DEPLOYMENT_ID
        assert row["provider"] == "openai"
        assert row["org"] == "acme"
    assert rows[allowed.id]["enforcement_stage"] == "allowed_at_gateway"
    assert rows[denied.id]["enforcement_stage"] == "refused_at_gateway"
    assert rows[denied.id]["rule"] == "svc.policy/irreversible_systemic_prod"


def test_session_header_carries_the_budget(stack: Stack, proxy_path2: Proxy) -> None:
    """The module's session header (default x-svc-session) names the session: the second delete of 15 rows in one
    session exceeds the delete budget (20) and, with svc_hold_wait 0, is refused naming its hold."""
    session = {"x-svc-session": unique("sess2")}
    first = ask(proxy_path2.url, STAGING_KEY.key, P2_NOWAIT_MODEL, Scenario((mass_delete(rows=15),)), session)
    assert tool_names(first.choices[0].message) == ["db_delete_records"]
    second = ask(proxy_path2.url, STAGING_KEY.key, P2_NOWAIT_MODEL, Scenario((mass_delete(rows=15),)), session)
    assert second.choices[0].message.tool_calls is None
    entries = refused(second.choices[0].message.content)
    assert [(e["error"], e["rule"]) for e in entries] == [("svc_hold_timeout", "svc.policy/session_delete_budget")]
    hold = stack.engine.hold(entries[0]["hold_id"])
    assert hold["envelope"]["agent"]["session_id"] == f"gateway:acme-staging:{session['x-svc-session']}"


def test_unknown_obligation_is_refused(stack: Stack, proxy_path2: Proxy) -> None:
    """The engine allows the credential change in staging but attaches an obligation outside the closed set:
    the module's route refuses that call (fail closed) and keeps the allowed read beside it."""
    read, hook = read_call(unique("call_read")), credential_change(unique("call_hook"))
    resp = ask(proxy_path2.url, STAGING_KEY.key, P2_OBLIGATIONS_MODEL, Scenario((read, hook)))
    assert tool_names(resp.choices[0].message) == ["crm_get_customer"]
    rows = {r["tool_call_id"]: r for r in stack.connector_obligations.ledger()}
    assert rows[hook.id]["outcome"] == "fail_closed" and rows[hook.id]["verdict"] == "allow"
    assert rows[hook.id]["transport"] == "in_process"
    assert UNKNOWN_OBLIGATION in rows[hook.id]["reason"]
    assert rows[read.id]["outcome"] == "allow"
