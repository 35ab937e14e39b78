"""Every fault on the way to a decision refuses the call under svc.core/fail_closed; nothing is released."""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator, Callable

import pytest
from standin import Answer, Connector, chat_answer, make_guardrail, outcomes_reply, request_data, tool_call
from streamframes import choice, content, delta_call, finish_reasons, frame, run_stream, tool_deltas, wire_outside_payload


def answer_json(obj: Any) -> Callable[[dict[str, Any]], Answer]:
    return lambda body: Answer(body=json.dumps(obj).encode())


def allow_all_but(mutate: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], Answer]:
    """A contract answer allowing every call, then broken by ``mutate``."""
    allow = outcomes_reply(lambda call: {"outcome": "allow"})

    def reply(body: dict[str, Any]) -> Answer:
        parsed = json.loads(allow(body).body)
        mutate(parsed)
        return Answer(body=json.dumps(parsed).encode())

    return reply


FAULTS: dict[str, Callable[[dict[str, Any]], Answer]] = {
    "http_500": lambda body: Answer(status=500, body=b'{"error":"boom"}'),
    "http_502": lambda body: Answer(status=502, body=b""),
    "http_400": lambda body: Answer(status=400, body=b'{"error":"invalid_request","field":"model"}'),
    "not_json": lambda body: Answer(body=b"<html>proxy error</html>"),
    "empty_body": lambda body: Answer(body=b""),
    "json_array": answer_json([]),
    "no_outcomes": answer_json({"refusal_payload": None}),
    "outcomes_not_list": answer_json({"outcomes": {"c1": "allow"}}),
    "too_few_outcomes": allow_all_but(lambda a: a["outcomes"].pop()),
    "too_many_outcomes": allow_all_but(lambda a: a["outcomes"].append(dict(a["outcomes"][0]))),
    "unknown_outcome": allow_all_but(lambda a: a["outcomes"][0].update(outcome="ALLOW")),
    "missing_outcome": allow_all_but(lambda a: a["outcomes"][0].pop("outcome")),
    "wrong_call_id": allow_all_but(lambda a: a["outcomes"][0].update(tool_call_id="other")),
    "swapped_order": allow_all_but(lambda a: a["outcomes"].reverse()),
    "enforced_not_bool": allow_all_but(lambda a: a["outcomes"][0].update(enforced="false")),
    "outcome_not_object": allow_all_but(lambda a: a["outcomes"].__setitem__(0, "allow")),
    "reset": lambda body: Answer(reset=True),
    "slow": lambda body: Answer(delay=3.0, body=b'{"outcomes":[]}'),
}

CALLS = [tool_call("c1", "crm_get_customer", '{"id":1}'), tool_call("c2", "crm_get_orders", '{"id":1}')]


def judge_whole(**params: Any) -> Any:
    """Run the non-streamed hook on an answer with CALLS and return the answer."""
    return asyncio.run(
        make_guardrail(**params).async_post_call_success_hook(
            data=request_data(), user_api_key_dict=None, response=chat_answer(list(CALLS))
        )
    )


def assert_fail_closed(refused: list[dict[str, Any]]) -> None:
    assert [r["tool_call_id"] for r in refused] == ["c1", "c2"]
    for r in refused:
        assert r["rule"] == "svc.core/fail_closed"
        assert r["error"] == "svc_fail_closed"
        assert r["stage"] == "refused_at_gateway"
        assert r["reason"]
        assert "unit-test-connector-token" not in r["reason"]


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_non_streamed_fault_refuses_every_call(connector: Connector, fault: str) -> None:
    connector.reply = FAULTS[fault]
    out = judge_whole(svc_timeout_margin=0.5)
    message = out.choices[0].message
    assert message.tool_calls is None
    assert out.choices[0].finish_reason == "stop"
    assert_fail_closed(json.loads(message.content)["svc"]["refused"])


def stream_frames() -> list[Any]:
    return [
        frame(choice(content="checking", role="assistant")),
        frame(choice(calls=[delta_call(0, "c1", "crm_get_customer", '{"id":'), delta_call(1, "c2", "crm_get_orders", '{"id":')])),
        frame(choice(calls=[delta_call(0, args="1}"), delta_call(1, args="1}")])),
        frame(choice(finish="tool_calls")),
    ]


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_streamed_fault_refuses_every_call(connector: Connector, fault: str) -> None:
    connector.reply = FAULTS[fault]
    out = run_stream(make_guardrail(svc_timeout_margin=0.5), stream_frames(), request_data())
    assert tool_deltas(out) == []
    assert "crm_get" not in wire_outside_payload(out)
    assert finish_reasons(out) == ["stop"]
    assert content(out).startswith("checking")
    assert_fail_closed(json.loads(content(out)[len("checking"):])["svc"]["refused"])


def test_connector_down_refuses(dead_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SVC_CONNECTOR_URL", dead_url)
    monkeypatch.setenv("SVC_CONNECTOR_TOKEN", "t")
    out = judge_whole()
    refused = json.loads(out.choices[0].message.content)["svc"]["refused"]
    assert_fail_closed(refused)
    assert "unreachable" in refused[0]["reason"]
    streamed = run_stream(make_guardrail(), stream_frames(), request_data())
    assert tool_deltas(streamed) == []
    assert finish_reasons(streamed) == ["stop"]


def test_wrong_token_refuses(connector: Connector, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SVC_CONNECTOR_TOKEN", "not-the-token")
    out = judge_whole()
    refused = json.loads(out.choices[0].message.content)["svc"]["refused"]
    assert_fail_closed(refused)
    assert "HTTP 401" in refused[0]["reason"]


def test_slow_connector_is_cut_at_the_deadline(connector: Connector) -> None:
    connector.reply = lambda body: Answer(delay=5.0, body=b"{}")
    guardrail = make_guardrail(svc_timeout_margin=0.5)

    async def timed() -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        await guardrail.async_post_call_success_hook(
            data=request_data(), user_api_key_dict=None, response=chat_answer(list(CALLS))
        )
        return loop.time() - start

    # A bound, not a performance figure: the call must not wait for the 5 s answer.
    assert asyncio.run(timed()) < 4.0


def test_a_fault_while_building_the_request_refuses(connector: Connector, monkeypatch: pytest.MonkeyPatch) -> None:
    from svc_gateway import context

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("boom")

    monkeypatch.setattr(context, "identity", broken)
    out = judge_whole()
    assert_fail_closed(json.loads(out.choices[0].message.content)["svc"]["refused"])
    assert connector.requests == []
    streamed = run_stream(make_guardrail(), stream_frames(), request_data())
    assert tool_deltas(streamed) == []
    assert_fail_closed(json.loads(content(streamed)[len("checking"):])["svc"]["refused"])


def test_an_answer_that_cannot_be_rewritten_is_refused_whole(connector: Connector, monkeypatch: pytest.MonkeyPatch) -> None:
    from litellm.exceptions import GuardrailRaisedException
    from svc_gateway import answer

    def broken(*args: Any, **kwargs: Any) -> None:
        raise AttributeError("read-only")

    monkeypatch.setattr(answer, "apply", broken)
    with pytest.raises(GuardrailRaisedException) as raised:
        judge_whole()
    assert raised.value.status_code == 400
    assert "svc.core/fail_closed" in raised.value.message


def test_a_fault_while_reading_a_stream_releases_nothing_held(connector: Connector, monkeypatch: pytest.MonkeyPatch) -> None:
    from svc_gateway.stream import StreamHold

    real = StreamHold._slot_for
    seen = {"n": 0}

    def flaky(self: StreamHold, choice_index: int, tc: Any) -> Any:
        seen["n"] += 1
        if seen["n"] == 3:
            raise TypeError("bad delta")
        return real(self, choice_index, tc)

    monkeypatch.setattr(StreamHold, "_slot_for", flaky)
    out = run_stream(make_guardrail(), stream_frames(), request_data())
    assert tool_deltas(out) == []
    assert finish_reasons(out) == ["stop"]
    refused = json.loads(content(out)[len("checking"):])["svc"]["refused"]
    assert {r["rule"] for r in refused} == {"svc.core/fail_closed"}
    assert connector.requests == []


def test_a_fault_while_releasing_refuses(connector: Connector, monkeypatch: pytest.MonkeyPatch) -> None:
    from svc_gateway.stream import StreamHold

    def broken(self: StreamHold, verdicts: Any) -> Any:
        raise IndexError("release bug")

    monkeypatch.setattr(StreamHold, "release", broken)
    out = run_stream(make_guardrail(), stream_frames(), request_data())
    assert tool_deltas(out) == []
    assert_fail_closed(json.loads(content(out)[len("checking"):])["svc"]["refused"])


def test_an_answer_of_another_shape_with_a_tool_call_is_refused_whole(connector: Connector) -> None:
    from litellm.exceptions import GuardrailRaisedException

    anthropic = {"type": "message", "content": [{"type": "tool_use", "id": "t1", "name": "rm", "input": {}}]}
    with pytest.raises(GuardrailRaisedException):
        asyncio.run(make_guardrail().async_post_call_success_hook(data=request_data(), user_api_key_dict=None, response=anthropic))
    plain = {"type": "message", "content": [{"type": "text", "text": "hello"}]}
    assert asyncio.run(make_guardrail().async_post_call_success_hook(data=request_data(), user_api_key_dict=None, response=plain)) is None


def test_a_stream_of_another_shape_with_a_tool_call_is_refused_and_not_released(connector: Connector) -> None:
    from litellm.exceptions import GuardrailRaisedException

    events = [
        {"type": "response.output_text.delta", "delta": "hi"},
        {"type": "response.output_item.added", "item": {"type": "function_call", "name": "rm", "arguments": ""}},
        {"type": "response.function_call_arguments.delta", "delta": '{"path": "/"}'},
    ]
    seen: list[Any] = []

    async def source() -> AsyncIterator[Any]:
        for event in events:
            yield event

    async def scenario() -> None:
        async for item in make_guardrail().async_post_call_streaming_iterator_hook(
            user_api_key_dict=None, response=source(), request_data=request_data()
        ):
            seen.append(item)

    with pytest.raises(GuardrailRaisedException):
        asyncio.run(scenario())
    assert seen == [events[0]]


def test_the_environment_proxy_is_never_used_for_the_connector(connector: Connector, monkeypatch: pytest.MonkeyPatch, dead_url: str) -> None:
    monkeypatch.setenv("HTTP_PROXY", dead_url)
    monkeypatch.setenv("http_proxy", dead_url)
    monkeypatch.setenv("NO_PROXY", "")
    out = judge_whole()
    assert [tc.id for tc in out.choices[0].message.tool_calls] == ["c1", "c2"]
    assert len(connector.requests) == 1


def test_an_https_connector_with_an_unknown_certificate_refuses(monkeypatch: pytest.MonkeyPatch, connector: Connector) -> None:
    # The stand-in speaks plain HTTP: the TLS handshake fails, which must refuse, never fall back.
    monkeypatch.setenv("SVC_CONNECTOR_URL", connector.url.replace("http://", "https://"))
    out = judge_whole()
    assert_fail_closed(json.loads(out.choices[0].message.content)["svc"]["refused"])


def test_a_fail_closed_refusal_is_logged_with_its_reason(connector: Connector, caplog: pytest.LogCaptureFixture) -> None:
    connector.reply = FAULTS["http_500"]
    with caplog.at_level("WARNING", logger="svc_gateway"):
        judge_whole()
    assert any("answered HTTP 500" in r.getMessage() for r in caplog.records)
    assert all("unit-test-connector-token" not in r.getMessage() for r in caplog.records)
