"""Streamed answers: reassembly of split and interleaved deltas, several choices, safe release."""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator

import pytest
from standin import Connector, deny_names, make_guardrail, request_data
from streamframes import (
    assembled,
    choice,
    collect,
    content,
    delta_call,
    finish_reasons,
    frame,
    run_stream,
    tool_deltas,
    wire,
    wire_outside_payload,
)


def split_call_frames(call_id: str, name: str, pieces: list[str], index: int = 0, choice_index: int = 0) -> list[Any]:
    first = frame(choice(choice_index, calls=[delta_call(index, call_id, name, pieces[0])], role="assistant"))
    rest = [frame(choice(choice_index, calls=[delta_call(index, args=p)])) for p in pieces[1:]]
    return [first, *rest]


def test_split_arguments_are_reassembled_and_an_allowed_call_released_unchanged(connector: Connector) -> None:
    pieces = ['{"cust', 'omer_id"', ": 4", "2}"]
    frames = [*split_call_frames("c1", "crm_get_customer", pieces), frame(choice(finish="tool_calls"))]
    originals = [f.model_dump_json() for f in frames]
    out = run_stream(make_guardrail(), frames, request_data())
    assert connector.requests[0]["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": "crm_get_customer", "arguments": '{"customer_id": 42}'}}
    ]
    assert [f.model_dump_json() for f in out] == originals


def test_a_denied_split_call_never_reaches_the_client(connector: Connector) -> None:
    connector.reply = deny_names("db_delete_records")
    pieces = ['{"table": "us', 'ers", "where": "1=1', '", "dry_run": false}']
    frames = [*split_call_frames("c1", "db_delete_records", pieces), frame(choice(finish="tool_calls"))]
    out = run_stream(make_guardrail(), frames, request_data())
    text = wire(out)
    assert "db_delete_records" not in wire_outside_payload(out)
    for piece in pieces:
        assert piece not in text
    assert tool_deltas(out) == []
    assert finish_reasons(out) == ["stop"]
    refused = json.loads(content(out))["svc"]["refused"]
    assert [r["tool_call_id"] for r in refused] == ["c1"]


def test_interleaved_indexes_keep_the_allowed_call_renumbered(connector: Connector) -> None:
    connector.reply = deny_names("billing_void_invoices")
    frames = [
        frame(choice(calls=[delta_call(0, "c1", "billing_void_invoices", '{"ids":')], role="assistant")),
        frame(choice(calls=[delta_call(1, "c2", "billing_list_invoices", '{"month":')])),
        frame(choice(calls=[delta_call(0, args=" [1, 2]}")])),
        frame(choice(calls=[delta_call(1, args=' "2026-10"}')])),
        frame(choice(finish="tool_calls")),
    ]
    out = run_stream(make_guardrail(), frames, request_data())
    sent = connector.requests[0]["tool_calls"]
    assert [(c["id"], c["function"]["arguments"]) for c in sent] == [
        ("c1", '{"ids": [1, 2]}'),
        ("c2", '{"month": "2026-10"}'),
    ]
    assert assembled(out) == {0: {"id": "c2", "name": "billing_list_invoices", "arguments": '{"month": "2026-10"}'}}
    assert "billing_void_invoices" not in wire_outside_payload(out)
    assert "[1, 2]" not in wire(out)
    assert finish_reasons(out) == ["tool_calls"]


def test_several_choices_are_decided_and_closed_separately(connector: Connector) -> None:
    connector.reply = deny_names("rm")
    frames = [
        frame(choice(0, calls=[delta_call(0, "a1", "ls", '{"p":')]), choice(1, calls=[delta_call(0, "b1", "rm", '{"p":')])),
        frame(choice(1, calls=[delta_call(0, args=' "/"}')]), choice(0, calls=[delta_call(0, args=' "."}')])),
        frame(choice(0, finish="tool_calls"), choice(1, finish="tool_calls")),
    ]
    out = run_stream(make_guardrail(), frames, request_data())
    assert [c["id"] for c in connector.requests[0]["tool_calls"]] == ["a1", "b1"]
    assert assembled(out, 0) == {0: {"id": "a1", "name": "ls", "arguments": '{"p": "."}'}}
    assert finish_reasons(out, 0) == ["tool_calls"]
    assert tool_deltas(out, 1) == []
    assert finish_reasons(out, 1) == ["stop"]
    assert json.loads(content(out, 1))["svc"]["refused"][0]["tool_call_id"] == "b1"
    assert '"/"' not in wire(out)


def test_a_reused_index_with_a_new_id_is_a_second_call(connector: Connector) -> None:
    connector.reply = deny_names("second")
    frames = [
        frame(choice(calls=[delta_call(0, "c1", "first", "{}")])),
        frame(choice(calls=[delta_call(0, "c2", "second", '{"x":1}')])),
        frame(choice(finish="tool_calls")),
    ]
    out = run_stream(make_guardrail(), frames, request_data())
    assert [c["function"]["name"] for c in connector.requests[0]["tool_calls"]] == ["first", "second"]
    assert "second" not in wire_outside_payload(out)
    assert assembled(out) == {0: {"id": "c1", "name": "first", "arguments": "{}"}}


def test_text_before_the_first_tool_call_is_not_delayed(connector: Connector) -> None:
    async def scenario() -> list[Any]:
        released = asyncio.Event()

        async def source() -> AsyncIterator[Any]:
            yield frame(choice(content="Let me look", role="assistant"))
            yield frame(choice(content=" that up."))
            await asyncio.wait_for(released.wait(), timeout=10)
            yield frame(choice(calls=[delta_call(0, "c1", "crm_get_customer", "{}")]))
            yield frame(choice(finish="tool_calls"))

        out: list[Any] = []
        hook = make_guardrail().async_post_call_streaming_iterator_hook(
            user_api_key_dict=None, response=source(), request_data=request_data()
        )
        async for item in hook:
            out.append(item)
            if len(out) == 2:
                assert connector.requests == []
                released.set()
        return out

    out = asyncio.run(scenario())
    assert content(out) == "Let me look that up."
    assert assembled(out) == {0: {"id": "c1", "name": "crm_get_customer", "arguments": "{}"}}


def test_text_after_a_tool_call_is_held_and_released_in_order(connector: Connector) -> None:
    frames = [
        frame(choice(calls=[delta_call(0, "c1", "ls", "{}")])),
        frame(choice(content="done")),
        frame(choice(finish="tool_calls"), usage={"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}),
    ]
    originals = [f.model_dump_json() for f in frames]
    out = run_stream(make_guardrail(), frames, request_data())
    assert [f.model_dump_json() for f in out] == originals


def test_a_stream_without_tool_calls_passes_untouched_without_asking(connector: Connector) -> None:
    frames = [frame(choice(content="hi", role="assistant")), frame(choice(finish="stop"))]
    out = run_stream(make_guardrail(), frames, request_data())
    assert out == frames
    assert connector.requests == []


def test_usage_frame_after_a_refused_finish_is_kept_after_the_closing_frame(connector: Connector) -> None:
    connector.reply = deny_names("rm")
    usage = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    frames = [
        frame(choice(calls=[delta_call(0, "c1", "rm", "{}")])),
        frame(choice(finish="tool_calls")),
        frame(usage=usage),
    ]
    out = run_stream(make_guardrail(), frames, request_data())
    assert finish_reasons(out) == ["stop"]
    assert out[-1].usage.total_tokens == 3
    assert '"rm"' not in wire_outside_payload(out)
    assert tool_deltas(out) == []


def test_a_stream_that_ends_without_finish_still_closes_refused_choices(connector: Connector) -> None:
    connector.reply = deny_names("rm")
    out = run_stream(make_guardrail(), [frame(choice(calls=[delta_call(0, "c1", "rm", "{}")]))], request_data())
    assert finish_reasons(out) == ["stop"]
    assert tool_deltas(out) == []


def test_an_upstream_error_after_a_tool_call_releases_nothing_held(connector: Connector) -> None:
    async def source() -> AsyncIterator[Any]:
        yield frame(choice(content="x", role="assistant"))
        yield frame(choice(calls=[delta_call(0, "c1", "crm_get_customer", '{"id": 1}')]))
        raise RuntimeError("upstream broke")

    seen: list[Any] = []

    async def scenario() -> None:
        async for item in make_guardrail().async_post_call_streaming_iterator_hook(
            user_api_key_dict=None, response=source(), request_data=request_data()
        ):
            seen.append(item)

    with pytest.raises(RuntimeError, match="upstream broke"):
        asyncio.run(scenario())
    assert tool_deltas(seen) == []
    assert connector.requests == []


def test_the_stream_request_carries_the_deployment_of_the_frames(connector: Connector) -> None:
    run_stream(make_guardrail(), [frame(choice(calls=[delta_call(0, "c1", "ls", "{}")]))], request_data())
    assert connector.requests[0]["deployment"] == {
        "api_base_host": "10.0.0.5",
        "deployment_id": "deploy-s",
        "provider": "openai",
    }
    assert connector.requests[0]["model"] == "gpt-4o-2024-08-06"


def test_collect_helper_accepts_async_sources(connector: Connector) -> None:
    async def source() -> AsyncIterator[Any]:
        yield frame(choice(content="a"))

    assert len(asyncio.run(collect(make_guardrail(), source(), request_data()))) == 1


def test_a_frame_of_another_kind_after_a_tool_call_keeps_its_place(connector: Connector) -> None:
    marker = {"keepalive": True}
    frames = [frame(choice(calls=[delta_call(0, "c1", "ls", "{}")])), marker, frame(choice(finish="tool_calls"))]
    out = run_stream(make_guardrail(), frames, request_data())
    assert out == frames
