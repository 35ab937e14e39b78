"""Path 1 end to end: a real OpenAI client -> the stock LiteLLM proxy (generic guardrail API, post_call)
-> `svc connector` -> `svc serve` with the bundled policy and the real opa.

Tool readings come from testdata/tools.json: crm_get_customer and billing_list_* read; db_delete_records an
irreversible systemic delete (denied in production); billing_void_* an irreversible broad delete (held in
production). The key `agent-prod` is bound to a production tenant, `team-staging` to a staging tenant.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import openai
import pytest

from svc_e2e.cases import (WAIT_FOR_HOLD, credential_change, mass_delete, pending_hold_for, read_call, void_invoices,
                           wait_for)
from svc_e2e.cases import ask as ask_url
from svc_e2e.client import error_message, raw_stream, refused, unique
from svc_e2e.proxy import Proxy
from svc_e2e.topology import (P1_ENGINE_DOWN_MODEL, P1_MODEL, P1_NOWAIT_MODEL, P1_OBLIGATIONS_MODEL,
                              P1_PRE_CALL_MODEL, PROD_KEY, STAGING_KEY, UNKNOWN_OBLIGATION, UNMAPPED_KEY, Stack)
from svc_e2e.upstream import Scenario


def ask(proxy: Proxy, key: str, model: str, scenario: Scenario, headers: dict[str, str] | None = None) -> Any:
    """One non-streamed chat completion through the proxy."""
    return ask_url(proxy.url, key, model, scenario, headers)


def refused_by_proxy(proxy: Proxy, key: str, model: str, scenario: Scenario,
                     headers: dict[str, str] | None = None) -> tuple[str, list[dict[str, Any]]]:
    """Send scenario and expect the proxy's HTTP 400 carrying svc's refusal: (message, refusal entries)."""
    with pytest.raises(openai.BadRequestError) as info:
        ask(proxy, key, model, scenario, headers)
    assert info.value.status_code == 400
    body = info.value.body
    assert isinstance(body, dict) and body.get("type") == "invalid_request_error" and body.get("code") == "400", body
    message = error_message(info.value)
    assert message.startswith("Svc: "), message
    return message, refused(message)


def test_allowed_read_passes(stack: Stack, proxy_path1: Proxy) -> None:
    call = read_call()
    before = stack.connector.counters()
    resp = ask(proxy_path1, PROD_KEY.key, P1_MODEL, Scenario((call,)))
    calls = resp.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["crm_get_customer"]
    assert json.loads(calls[0].function.arguments) == call.arguments
    assert resp.choices[0].finish_reason == "tool_calls"
    after = stack.connector.counters()
    assert after["allowed"] == before["allowed"] + 1
    assert after["tool_calls_decided"] == before["tool_calls_decided"] + 1


def test_pre_call_is_counted_and_governs_nothing(stack: Stack, proxy_path1: Proxy) -> None:
    before = stack.connector.counters()
    resp = ask(proxy_path1, PROD_KEY.key, P1_PRE_CALL_MODEL, Scenario((read_call(),)))
    assert [c.function.name for c in resp.choices[0].message.tool_calls] == ["crm_get_customer"]
    after = stack.connector.counters()
    assert after["pre_call_requests"] == before["pre_call_requests"] + 1
    assert after["responses_seen"] == before["responses_seen"] + 1
    assert after["allowed"] == before["allowed"] + 1


def test_production_mass_delete_refused_with_the_refusal_payload(stack: Stack, proxy_path1: Proxy) -> None:
    message, entries = refused_by_proxy(proxy_path1, PROD_KEY.key, P1_MODEL, Scenario((mass_delete(),)))
    assert "[rule=svc.policy/irreversible_systemic_prod]" in message
    assert len(entries) == 1
    entry = entries[0]
    assert entry["error"] == "svc_denied"
    assert entry["rule"] == "svc.policy/irreversible_systemic_prod"
    assert entry["tool"] == "db_delete_records"
    assert entry["stage"] == "refused_at_gateway"
    assert entry["tool_call_id"].startswith("call_")


def test_same_delete_in_staging_is_allowed(stack: Stack, proxy_path1: Proxy) -> None:
    # 10 rows: within the bundled pack's session delete budget (20), which would hold a larger delete
    resp = ask(proxy_path1, STAGING_KEY.key, P1_MODEL, Scenario((mass_delete(rows=10),)))
    assert [c.function.name for c in resp.choices[0].message.tool_calls] == ["db_delete_records"]


def test_staging_tenant_naming_production_in_the_arguments_is_refused(stack: Stack, proxy_path1: Proxy) -> None:
    _, entries = refused_by_proxy(proxy_path1, STAGING_KEY.key, P1_MODEL,
                                  Scenario((mass_delete(environment="prod"),)))
    assert [e["rule"] for e in entries] == ["svc.policy/irreversible_systemic_prod"]


def test_session_header_listed_in_extra_headers_carries_the_budget(stack: Stack, proxy_path1: Proxy) -> None:
    """x-svc-session, listed in the guardrail's extra_headers, names the session: two deletes of 15 rows in one
    session exceed the pack's delete budget of 20 and the second is held; the same delete in another session
    passes. Without the header each request would be its own session (its trace id)."""
    session = {"x-svc-session": unique("sess")}
    first = ask(proxy_path1, STAGING_KEY.key, P1_NOWAIT_MODEL, Scenario((mass_delete(rows=15),)), session)
    assert [c.function.name for c in first.choices[0].message.tool_calls] == ["db_delete_records"]
    _, entries = refused_by_proxy(proxy_path1, STAGING_KEY.key, P1_NOWAIT_MODEL, Scenario((mass_delete(rows=15),)),
                                  session)
    assert [(e["error"], e["rule"]) for e in entries] == [("svc_hold_timeout", "svc.policy/session_delete_budget")]
    other = ask(proxy_path1, STAGING_KEY.key, P1_NOWAIT_MODEL, Scenario((mass_delete(rows=15),)),
                {"x-svc-session": unique("sess")})
    assert [c.function.name for c in other.choices[0].message.tool_calls] == ["db_delete_records"]
    hold = stack.engine.hold(entries[0]["hold_id"])
    assert hold["envelope"]["agent"]["session_id"] == f"gateway:acme-staging:{session['x-svc-session']}"


def test_two_calls_one_denied_refuses_the_whole_response(stack: Stack, proxy_path1: Proxy) -> None:
    scenario = Scenario((read_call(), mass_delete()))
    message, entries = refused_by_proxy(proxy_path1, PROD_KEY.key, P1_MODEL, scenario)
    assert [e["tool"] for e in entries] == ["db_delete_records"]  # one refusal per refused call
    assert "[rule=svc.policy/irreversible_systemic_prod]" in message


def test_unmapped_key_is_refused_and_the_engine_untouched(stack: Stack, proxy_path1: Proxy) -> None:
    decisions_before = len(stack.engine.decisions())
    counters_before = stack.connector.counters()
    _, entries = refused_by_proxy(proxy_path1, UNMAPPED_KEY.key, P1_MODEL, Scenario((read_call(),)))
    assert [e["error"] for e in entries] == ["svc_tenant_unmapped"]
    assert len(stack.engine.decisions()) == decisions_before
    counters = stack.connector.counters()
    assert counters["unmapped_tenant"] == counters_before["unmapped_tenant"] + 1
    assert counters["blocked"] == counters_before["blocked"] + 1


def test_engine_down_is_refused_and_never_delivered(stack: Stack, proxy_path1: Proxy) -> None:
    asked_before = stack.model.log.count()
    message, entries = refused_by_proxy(proxy_path1, PROD_KEY.key, P1_ENGINE_DOWN_MODEL, Scenario((read_call(),)))
    assert stack.model.log.count() == asked_before + 1  # the model answered; the answer was withheld
    assert "[rule=svc.core/fail_closed]" in message
    assert [e["rule"] for e in entries] == ["svc.core/fail_closed"]


def test_hold_approved_during_the_wait_is_delivered(stack: Stack, proxy_path1: Proxy) -> None:
    customer = unique("cus-hold")
    result: dict[str, Any] = {}

    def request() -> None:
        try:
            result["response"] = ask(proxy_path1, PROD_KEY.key, P1_MODEL, Scenario((void_invoices(customer),)))
        except Exception as err:  # noqa: BLE001 - reported by the assertion below
            result["error"] = err

    worker = threading.Thread(target=request)
    worker.start()
    hold = wait_for(pending_hold_for(stack.engine, customer), WAIT_FOR_HOLD, f"a pending hold for {customer}")
    assert hold["rule"] == "svc.policy/irreversible_broad_prod"
    stack.engine.resolve(hold["id"])
    worker.join(timeout=60)
    assert not worker.is_alive()
    assert "error" not in result, result.get("error")
    calls = result["response"].choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["billing_void_invoices"]
    assert stack.engine.hold(hold["id"])["status"] == "consumed"
    row = next(r for r in stack.connector.ledger() if r.get("hold_id") == hold["id"])
    assert row["released_after_approval"] is True
    assert row["enforcement_stage"] == "allowed_at_gateway"
    assert row["hold_decision"]["decided_by"] == {"type": "human", "id": "alice"}
    assert row["hold_decision"]["resolution"] == "approved"
    assert row["hold_decision"]["verified"] is True


def test_hold_wait_zero_refuses_naming_the_hold_then_releases_once(stack: Stack, proxy_path1: Proxy) -> None:
    customer = unique("cus-retry")
    scenario = Scenario((void_invoices(customer),))
    message, entries = refused_by_proxy(proxy_path1, PROD_KEY.key, P1_NOWAIT_MODEL, scenario)
    assert [e["error"] for e in entries] == ["svc_hold_timeout"]
    hold_id = entries[0]["hold_id"]
    assert hold_id in message
    assert stack.engine.hold(hold_id)["status"] == "pending"

    stack.engine.resolve(hold_id)
    resp = ask(proxy_path1, PROD_KEY.key, P1_NOWAIT_MODEL, scenario)  # the retry, with fresh tool call ids
    assert [c.function.name for c in resp.choices[0].message.tool_calls] == ["billing_void_invoices"]
    assert stack.engine.hold(hold_id)["status"] == "consumed"

    _, again = refused_by_proxy(proxy_path1, PROD_KEY.key, P1_NOWAIT_MODEL, scenario)
    assert [e["error"] for e in again] == ["svc_hold_timeout"]
    assert again[0]["hold_id"] != hold_id  # a new hold: the approval was spent once


def test_streamed_denied_call_reaches_the_client_before_the_error(stack: Stack, proxy_path1: Proxy) -> None:
    """What a client sees with stream: true on path 1 (docs/gateway-e2e.md): HTTP 200; every frame of the
    model, the denied call's name and complete arguments and the `finish_reason: tool_calls` frame included;
    then, once the guardrail judged the assembled answer, one SSE error frame carrying svc's refusal, last,
    with no `[DONE]` after it."""
    call = mass_delete()
    stream = raw_stream(proxy_path1.url, PROD_KEY.key, P1_MODEL, Scenario((call,)))
    assert stream.status == 200
    assert b"db_delete_records" in stream.raw
    assert call.arguments["marker"].encode() in stream.raw  # type: ignore[index]
    events = stream.events()
    assert "[DONE]" not in events
    errors = [i for i, e in enumerate(events) if isinstance(e, dict) and "error" in e]
    assert errors == [len(events) - 1], events
    finishes = [c.get("finish_reason") for e in events[:-1] for c in e.get("choices") or [] if c.get("finish_reason")]
    assert finishes == ["tool_calls"]
    message = events[-1]["error"]["message"]
    assert "[rule=svc.policy/irreversible_systemic_prod]" in message
    assert [e["tool"] for e in refused(message)] == ["db_delete_records"]


def test_unknown_obligation_is_refused(stack: Stack, proxy_path1: Proxy) -> None:
    """The engine allows the credential change in staging but attaches an obligation outside the closed set:
    the connector cannot honour it and the proxy refuses the answer (fail closed)."""
    call = credential_change(unique("call_hook"))
    _, entries = refused_by_proxy(proxy_path1, STAGING_KEY.key, P1_OBLIGATIONS_MODEL, Scenario((call,)))
    assert [(e["tool_call_id"], e["error"], e["rule"]) for e in entries] == [
        (call.id, "svc_fail_closed", "svc.core/fail_closed")]
    assert f"obligations the connector does not understand: {UNKNOWN_OBLIGATION}" in entries[0]["reason"]
    row = next(r for r in stack.connector_obligations.ledger() if r["tool_call_id"] == call.id)
    assert row["verdict"] == "allow" and row["outcome"] == "fail_closed"
    assert row["obligations"] == [UNKNOWN_OBLIGATION, "notify"]
