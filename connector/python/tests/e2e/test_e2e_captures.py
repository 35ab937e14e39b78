"""What the real LiteLLM proxy sends to a generic guardrail, captured and compared with the stored captures.

One proxy runs two generic guardrails pointed at a capture server (distinguished by their api_base path):
`svc-listed` (pre_call and post_call, `extra_headers: [x-svc-session]`, static additional params) and
`svc-plain` (post_call only, nothing else). Each scenario sends one real OpenAI client request and picks the
call it stores. With SVC_E2E_WRITE_CAPTURES=1 the test (re)writes connector/testdata/litellm-captured;
otherwise it asserts that the proxy still sends what is stored (per-run values blanked).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterator

import openai
import pytest

from svc_e2e.capture import Captured, CaptureServer
from svc_e2e.captures import CAPTURE_DIR, load_capture, load_index, normalise, normalise_headers, write_capture, write_index
from svc_e2e.proxy import MODEL, Proxy, VirtualKey, generic_guardrail, start_proxy
from svc_e2e.upstream import FakeModel, Scenario, ToolCall

WRITE = os.environ.get("SVC_E2E_WRITE_CAPTURES") == "1"
TOKEN = "capture-token-1"
LISTED_PARAMS = {"policy_set": "agents-prod"}

FULL_KEY = VirtualKey("sk-capture-support-1", key_alias="agent-support-prod", team_id="team-support",
                      team_alias="customer-support", user_id="svc-support-agent", org_id="org-1")
HASH_ONLY_KEY = VirtualKey("sk-capture-bare-2")

READ = ToolCall("crm_get_customer", {"customer_id": "cus_88412"})
DELETE = ToolCall("db_delete_records", {"table": "customers", "environment": "production",
                                        "filter": {"created_before": "2026-01-01"}, "dry_run": False})
LIST = ToolCall("billing_list_invoices", {"customer_id": "cus_88412"})
VOID = ToolCall("billing_void_invoices", {"customer_id": "cus_88412", "invoice_ids": ["in_1Q2w3E"]})
SCALE = ToolCall("k8s_scale_deployment", {"namespace": "prod", "deployment": "checkout", "replicas": 0})
TOOLS = [
    {"type": "function", "function": {"name": n, "description": d,
                                      "parameters": {"type": "object", "properties": {"customer_id": {"type": "string"}}}}}
    for n, d in (("billing_list_invoices", "List invoices"), ("billing_void_invoices", "Void invoices"),
                 ("crm_get_customer", "Read a customer"))
]


@dataclass(frozen=True)
class Pick:
    """Which guardrail call of a request is stored under which file name."""

    file: str
    description: str
    guardrail: str = "plain"
    input_type: str = "response"
    first: bool = False  # the first such call (a mid-stream sample) instead of the last


@dataclass(frozen=True)
class Case:
    """One client request and the guardrail calls of it that are stored."""

    picks: tuple[Pick, ...]
    scenario: Scenario
    key: VirtualKey = FULL_KEY
    stream: bool = False
    system: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)


def _one(file: str, description: str, scenario: Scenario, guardrail: str = "plain", **kw: Any) -> Case:
    return Case((Pick(file, description, guardrail),), scenario, **kw)


LONG_TEXT = "I will list the invoices first and then void the duplicate one, as you asked earlier today. " * 3

CASES = [
    _one("01_post_call_single_read_tool_call.json", "one read-only tool call, no text", Scenario((READ,))),
    _one("02_post_call_destructive_delete_production.json",
         "destructive delete in production, with assistant text",
         Scenario((DELETE,), content="Deleting the stale customer rows now.")),
    _one("03_post_call_two_tool_calls.json", "two parallel tool calls", Scenario((LIST, VOID))),
    _one("04_post_call_text_only_no_tool_calls.json", "plain text answer, no tool calls",
         Scenario(content="Your invoice total is 42 EUR.")),
    Case((Pick("05_pre_call_prompt_and_tools.json",
               "pre_call of the svc-listed guardrail: system + user prompt and 3 tool definitions",
               "listed", "request"),
          Pick("05b_post_call_after_pre_call.json",
               "the post_call of the same request as 05 (same litellm_call_id), svc-listed guardrail", "listed")),
         Scenario((LIST, VOID)), system="You are the billing agent.", kwargs={"tools": TOOLS}),
    _one("06_post_call_unmapped_key_hash_only.json",
         "key without alias, team, user or org: request_data is the hash only", Scenario((READ,)), key=HASH_ONLY_KEY),
    _one("07_post_call_svc_session_in_additional_params.json",
         "svc-listed guardrail with static additional params; per-request extra_body svc_session under "
         "guardrails=[{svc-listed: {extra_body: ...}}] and an OpenAI `user`", Scenario((LIST,)), "listed",
         kwargs={"user": "customer-ops-run-1",
                 "extra_body": {"guardrails": [{"svc-listed": {"extra_body": {"svc_session": "sess-extra-body-7"}}}]}}),
    _one("08_post_call_header_svc_session_forwarded.json",
         "x-svc-session header, listed in extra_headers of svc-listed", Scenario((SCALE,)), "listed",
         kwargs={"extra_headers": {"x-svc-session": "sess-header-8"}}),
    _one("09_post_call_header_svc_session_redacted.json",
         "x-svc-session header, not listed (svc-plain): the value arrives as [present]", Scenario((SCALE,)),
         kwargs={"extra_headers": {"x-svc-session": "sess-header-8"}}),
    _one("10_post_call_streamed_end_of_stream_tool_call.json", "stream: true; the last call of the stream",
         Scenario((VOID,)), stream=True),
    _one("11_post_call_litellm_session_header.json",
         "client header x-litellm-session-id (no extra_headers entry needed)", Scenario((READ,)),
         kwargs={"extra_headers": {"x-litellm-session-id": "sess-litellm-11"}}),
    Case((Pick("12a_post_call_streamed_mid_stream_sample.json",
               "stream: true with text and two calls; the first guardrail call of the stream", first=True),
          Pick("12b_post_call_streamed_text_and_two_calls_end.json",
               "the same stream's last guardrail call")),
         Scenario((LIST, VOID), content=LONG_TEXT), stream=True),
]


@pytest.fixture(scope="module")
def capture_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Proxy, CaptureServer]]:
    """A capture server and the real proxy whose two guardrails point at it."""
    capture, model = CaptureServer().start(), FakeModel().start()
    guardrails = [
        generic_guardrail("svc-listed", f"{capture.url}/listed", mode=["pre_call", "post_call"],
                          extra={"default_on": True, "extra_headers": ["x-svc-session"],
                                 "additional_provider_specific_params": LISTED_PARAMS}),
        generic_guardrail("svc-plain", f"{capture.url}/plain", extra={"default_on": True}),
    ]
    proxy = None
    try:
        proxy = start_proxy(tmp_path_factory.mktemp("capture-proxy"), model.api_base, guardrails,
                            (FULL_KEY, HASH_ONLY_KEY), env={"SVC_CONNECTOR_TOKEN": TOKEN})
        yield proxy, capture
    finally:
        if proxy:
            proxy.stop()
        model.stop()
        capture.stop()


def _send(proxy: Proxy, case: Case) -> None:
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=case.key.key, max_retries=0, timeout=60)
    messages: list[dict[str, Any]] = case.scenario.messages()
    if case.system:
        messages.insert(0, {"role": "system", "content": case.system})
    if case.stream:
        for _ in client.chat.completions.create(model=MODEL, messages=messages, stream=True, **case.kwargs):
            pass
        return
    client.chat.completions.create(model=MODEL, messages=messages, **case.kwargs)


def _pick(calls: list[Captured], pick: Pick) -> Captured:
    mine = [c for c in calls if c.path.startswith(f"/{pick.guardrail}/")
            and isinstance(c.body, dict) and c.body.get("input_type") == pick.input_type]
    assert mine, f"{pick.file}: no {pick.input_type} call to guardrail {pick.guardrail}; got {[c.path for c in calls]}"
    return mine[0] if pick.first else mine[-1]


def _meta(case: Case, pick: Pick, call: Captured, calls: list[Captured]) -> dict[str, Any]:
    same = [c for c in calls if c.path == call.path]
    return {
        "file": pick.file,
        "scenario": pick.description,
        "guardrail": f"svc-{pick.guardrail}",
        "input_type": pick.input_type,
        "streamed": case.stream,
        "client": {"key_fields": case.key.auth_fields(), "kwargs": case.kwargs, "system": case.system},
        "http": {"method": call.method, "path": call.path, "headers": normalise_headers(call.headers)},
        "calls_to_this_guardrail_input_types": [c.body.get("input_type") for c in same],
    }


def test_captured_requests_match_the_stored_captures(capture_stack: tuple[Proxy, CaptureServer]) -> None:
    proxy, capture = capture_stack
    index: dict[str, Any] = {"litellm_version": "1.101.0", "guardrails": {
        "svc-listed": {"mode": ["pre_call", "post_call"], "extra_headers": ["x-svc-session"],
                       "additional_provider_specific_params": LISTED_PARAMS, "api_base": "<capture>/listed"},
        "svc-plain": {"mode": "post_call", "api_base": "<capture>/plain"}}, "captures": []}
    stored = {} if WRITE else {c["file"]: c for c in load_index()["captures"]}
    for case in CASES:
        capture.log.take()
        _send(proxy, case)
        calls = capture.log.take()
        for pick in case.picks:
            call = _pick(calls, pick)
            meta = _meta(case, pick, call, calls)
            index["captures"].append(meta)
            assert call.headers.get("x-api-key") == TOKEN
            assert "authorization" not in call.headers
            if WRITE:
                write_capture(pick.file, call.body)
                continue
            assert normalise(call.body) == normalise(load_capture(pick.file)), pick.file
            assert meta == stored[pick.file], pick.file
    if WRITE:
        write_index(index)


def test_capture_files_are_all_indexed() -> None:
    names = {c["file"] for c in load_index()["captures"]}
    on_disk = {p.name for p in CAPTURE_DIR.glob("*.json")} - {"index.json"}
    assert names == on_disk == {p.file for c in CASES for p in c.picks}
    for name in names:
        assert load_capture(name)["litellm_version"] == "1.101.0"
