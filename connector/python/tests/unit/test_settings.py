"""Load-time validation: a bad parameter or variable stops the proxy, naming it."""

from __future__ import annotations

from typing import Any

import pytest
from standin import make_guardrail

from svc_gateway.settings import pop_settings

ENV = {"SVC_CONNECTOR_URL": "http://127.0.0.1:8081/", "SVC_CONNECTOR_TOKEN": "tok"}


def settings(params: dict[str, Any], env: dict[str, str] | None = None) -> Any:
    return pop_settings(dict(params), ENV if env is None else env)


def test_defaults() -> None:
    s = settings({})
    assert s.route_url == "http://127.0.0.1:8081/v1/gateway/tool-calls"
    assert s.token == "tok"
    assert s.hold_wait == 30
    assert s.session_header == "x-svc-session"
    assert s.static_session is None
    assert s.decision_deadline() == 65


def test_params_are_taken_and_removed() -> None:
    params: dict[str, Any] = {
        "svc_hold_wait": 0,
        "svc_session_header": "X-Agent-Run",
        "additional_provider_specific_params": {"svc_session": "run-1"},
        "verify_ssl": True,
    }
    s = pop_settings(params, ENV)
    assert (s.hold_wait, s.session_header, s.static_session) == (0, "x-agent-run", "run-1")
    assert params == {"additional_provider_specific_params": {"svc_session": "run-1"}, "verify_ssl": True}


def test_token_and_url_variables_can_be_renamed() -> None:
    env = {"GW_URL": "https://svc.internal:8443", "GW_TOKEN": "x"}
    s = settings({"svc_connector_url_env": "GW_URL", "svc_connector_token_env": "GW_TOKEN"}, env)
    assert s.route_url == "https://svc.internal:8443/v1/gateway/tool-calls"
    assert s.token == "x"


@pytest.mark.parametrize(
    ("params", "env", "names"),
    [
        ({"api_key": "sk-literal"}, None, "litellm_params.api_key"),
        ({"svc_connector_token": "literal"}, None, "litellm_params.svc_connector_token"),
        ({"svc_hold_wiat": 3}, None, "svc_hold_wiat"),
        ({"svc_hold_wait": "30"}, None, "svc_hold_wait"),
        ({"svc_hold_wait": True}, None, "svc_hold_wait"),
        ({"svc_hold_wait": -1}, None, "svc_hold_wait"),
        ({"svc_hold_wait": 600}, None, "svc_hold_wait"),
        ({"svc_hold_wait": 2.5}, None, "svc_hold_wait"),
        ({"svc_session_header": "bad header"}, None, "svc_session_header"),
        ({"svc_session_header": "Authorization"}, None, "svc_session_header"),
        ({"svc_session_header": "x-api-key"}, None, "svc_session_header"),
        ({"svc_session": ""}, None, "svc_session"),
        ({"svc_timeout_margin": 0}, None, "svc_timeout_margin"),
        ({"svc_connector_token_env": "1BAD"}, None, "svc_connector_token_env"),
        ({}, {"SVC_CONNECTOR_TOKEN": "t"}, "SVC_CONNECTOR_URL"),
        ({}, {"SVC_CONNECTOR_URL": "http://127.0.0.1:1"}, "SVC_CONNECTOR_TOKEN"),
        ({}, {"SVC_CONNECTOR_URL": "ftp://h", "SVC_CONNECTOR_TOKEN": "t"}, "SVC_CONNECTOR_URL"),
        ({}, {"SVC_CONNECTOR_URL": "http://u:p@h:1", "SVC_CONNECTOR_TOKEN": "t"}, "SVC_CONNECTOR_URL"),
        ({}, {"SVC_CONNECTOR_URL": "http://h:1?x=1", "SVC_CONNECTOR_TOKEN": "t"}, "SVC_CONNECTOR_URL"),
        ({}, {"SVC_CONNECTOR_URL": "http://h:1", "SVC_CONNECTOR_TOKEN": "a b"}, "SVC_CONNECTOR_TOKEN"),
        ({}, {**ENV, "SVC_CONNECTOR_CA_FILE": "/nonexistent/ca.pem"}, "SVC_CONNECTOR_CA_FILE"),
    ],
)
def test_bad_values_are_refused_by_name(params: dict[str, Any], env: dict[str, str] | None, names: str) -> None:
    with pytest.raises(ValueError, match=names):
        settings(params, env)


@pytest.mark.parametrize("mode", ["pre_call", "during_call", ["pre_call", "post_call"], None])
def test_mode_other_than_post_call_is_refused(mode: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from svc_gateway.guardrail import ActionGuardrail

    monkeypatch.setenv("SVC_CONNECTOR_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("SVC_CONNECTOR_TOKEN", "t")
    with pytest.raises(ValueError, match="post_call"):
        ActionGuardrail(guardrail_name="g", event_hook=mode, default_on=True)


def test_the_class_loads_as_the_proxy_builds_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from litellm.types.guardrails import LitellmParams

    monkeypatch.setenv("SVC_CONNECTOR_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("SVC_CONNECTOR_TOKEN", "t")
    params = LitellmParams(
        guardrail="svc_gateway.guardrail.ActionGuardrail", mode="post_call", default_on=True, svc_hold_wait=5
    ).model_dump(exclude_none=True)
    for key in ("guardrail", "mode", "default_on"):
        params.pop(key)
    guardrail = make_guardrail(**params)
    assert guardrail.svc_settings.hold_wait == 5
    assert guardrail.default_on is True
    assert guardrail.event_hook == "post_call"


def test_run_in_parallel_is_refused_at_construction_and_later(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SVC_CONNECTOR_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("SVC_CONNECTOR_TOKEN", "t")
    with pytest.raises(ValueError, match="run_in_parallel"):
        make_guardrail(run_in_parallel=True)
    guardrail = make_guardrail(run_in_parallel=False)
    assert guardrail.run_in_parallel is False
    with pytest.raises(ValueError, match="run_in_parallel"):
        guardrail.run_in_parallel = True
