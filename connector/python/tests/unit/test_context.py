"""What the module reads from LiteLLM's request data: identity, session hints, deployment."""

from __future__ import annotations

from types import SimpleNamespace

from svc_gateway import context


def test_identity_mirrors_the_generic_guardrail() -> None:
    data = {
        "metadata": {"user_api_key_alias": "from-metadata", "user_api_key_team_id": "t1", "user_api_key_spend": 3},
        "litellm_metadata": {"user_api_key_alias": "from-litellm-metadata", "user_api_key_token": "h" * 64},
    }
    assert context.identity(data, None) == {
        "user_api_key_hash": "h" * 64,
        "user_api_key_alias": "from-litellm-metadata",
        "user_api_key_team_id": "t1",
    }
    assert context.identity({}, None) == {}


def test_header_is_found_case_insensitively_and_blank_is_none() -> None:
    data = {"proxy_server_request": {"headers": {"X-SVC-SESSION": "  "}}, "metadata": {"headers": {"x-svc-session": "s"}}}
    assert context.header_value(data, "x-svc-session") == "s"
    assert context.header_value({}, "x-svc-session") is None


def test_trace_and_call_ids_fall_back_to_the_logging_object() -> None:
    logging_obj = SimpleNamespace(litellm_trace_id="tr", litellm_call_id="ca")
    hints = context.session_hints(
        {"litellm_logging_obj": logging_obj}, header="x-svc-session", static_session=None, requested_session=None
    )
    assert hints == {"svc_session": None, "header": None, "trace_id": "tr", "call_id": "ca"}


def test_requested_session_reads_only_this_guardrails_extra_body() -> None:
    requested = ["other", {"other": {"extra_body": {"svc_session": "x"}}}, {"mine": {"extra_body": {"svc_session": 5}}}]
    assert context.requested_session(requested, "mine") is None
    assert context.requested_session([{"mine": {"extra_body": {"svc_session": "s1"}}}], "mine") == "s1"
    assert context.requested_session("mine", "mine") is None


def test_deployment_falls_back_to_metadata_and_logging_object() -> None:
    logging_obj = SimpleNamespace(
        model_call_details={"custom_llm_provider": "azure", "litellm_params": {"api_base": "my-res.openai.azure.com"}}
    )
    data = {"metadata": {"model_info": {"id": "d-7"}}, "litellm_logging_obj": logging_obj}
    assert context.deployment(data, None) == {
        "api_base_host": "my-res.openai.azure.com",
        "deployment_id": "d-7",
        "provider": "azure",
    }
    assert context.deployment({}, {}) == {"api_base_host": None, "deployment_id": None, "provider": None}
    assert context.deployment({}, {"api_base": "http://[::1"})["api_base_host"] is None
