"""What the proxy knows about a request, collected for the batch route.

The identity block mirrors how LiteLLM's generic guardrail builds ``request_data``
(``_extract_user_api_key_metadata`` in 1.101.0): the ``user_api_key_*`` fields the
proxy wrote into ``metadata`` / ``litellm_metadata`` (the latter wins), with
``user_api_key_token`` read as the hash, and a key absent when unknown. The proxy
strips caller-sent ``user_api_key_*`` metadata before writing its own, so these
values come from authentication, not from the request body. Fields the metadata
lacks are filled from the authenticated ``UserAPIKeyAuth`` object.
"""

from __future__ import annotations

from typing import Any, Mapping
from urllib.parse import urlsplit

IDENTITY_FIELDS = (
    "user_api_key_hash",
    "user_api_key_alias",
    "user_api_key_user_id",
    "user_api_key_user_email",
    "user_api_key_team_id",
    "user_api_key_team_alias",
    "user_api_key_end_user_id",
    "user_api_key_org_id",
)
# UserAPIKeyAuth attribute for each identity field.
_AUTH_ATTRS = {
    "user_api_key_hash": "api_key",
    "user_api_key_alias": "key_alias",
    "user_api_key_user_id": "user_id",
    "user_api_key_user_email": "user_email",
    "user_api_key_team_id": "team_id",
    "user_api_key_team_alias": "team_alias",
    "user_api_key_end_user_id": "end_user_id",
    "user_api_key_org_id": "org_id",
}


def identity(data: Mapping[str, Any], user_api_key_dict: Any) -> dict[str, str]:
    """The 8-key ``request_data`` block of the generic guardrail, absent keys left out."""
    merged = {**_mapping(data.get("metadata")), **_mapping(data.get("litellm_metadata"))}
    block: dict[str, str] = {}
    for name in IDENTITY_FIELDS:
        value = merged.get(name)
        if name == "user_api_key_hash" and merged.get("user_api_key_token") is not None:
            value = merged.get("user_api_key_token")
        if value is None:
            value = getattr(user_api_key_dict, _AUTH_ATTRS[name], None)
        if isinstance(value, str) and value:
            block[name] = value
    return block


def session_hints(
    data: Mapping[str, Any], *, header: str, static_session: str | None, requested_session: str | None
) -> dict[str, str | None]:
    """The session hints of gateway spec §2.5; the connector resolves them in order."""
    logging_obj = data.get("litellm_logging_obj")
    return {
        "svc_session": requested_session or static_session,
        "header": header_value(data, header),
        "trace_id": _text(data.get("litellm_trace_id")) or _text(getattr(logging_obj, "litellm_trace_id", None)),
        "call_id": _text(data.get("litellm_call_id")) or _text(getattr(logging_obj, "litellm_call_id", None)),
    }


def header_value(data: Mapping[str, Any], name: str) -> str | None:
    """The client's real value of header ``name`` (case-insensitive), as the proxy received it."""
    sources = (
        _mapping(data.get("proxy_server_request")).get("headers"),
        _mapping(data.get("metadata")).get("headers"),
        _mapping(data.get("litellm_metadata")).get("headers"),
    )
    for headers in sources:
        if isinstance(headers, Mapping):
            for key, value in headers.items():
                if isinstance(key, str) and key.lower() == name and isinstance(value, str) and value.strip():
                    return value
    return None


def requested_session(requested_guardrails: Any, guardrail_name: str | None) -> str | None:
    """``svc_session`` from the request's ``guardrails: [{<name>: {extra_body: {svc_session}}}]``."""
    if not isinstance(requested_guardrails, list) or not guardrail_name:
        return None
    for entry in requested_guardrails:
        if isinstance(entry, Mapping) and guardrail_name in entry:
            extra = _mapping(_mapping(entry[guardrail_name]).get("extra_body"))
            value = extra.get("svc_session")
            if isinstance(value, str) and value.strip():
                return value
    return None


def deployment(data: Mapping[str, Any], hidden_params: Any) -> dict[str, str | None]:
    """Which deployment answered: api_base host, deployment (model) id and provider."""
    hidden = _mapping(hidden_params)
    metadata = {**_mapping(data.get("metadata")), **_mapping(data.get("litellm_metadata"))}
    details = _mapping(getattr(data.get("litellm_logging_obj"), "model_call_details", None))
    params = _mapping(details.get("litellm_params"))
    api_base = _text(hidden.get("api_base")) or _text(params.get("api_base"))
    return {
        "api_base_host": _host(api_base),
        "deployment_id": _text(hidden.get("model_id")) or _text(_mapping(metadata.get("model_info")).get("id")),
        "provider": _text(hidden.get("custom_llm_provider")) or _text(details.get("custom_llm_provider")),
    }


def _host(url: str | None) -> str | None:
    if not url:
        return None
    try:
        return urlsplit(url if "//" in url else "//" + url).hostname or None
    except ValueError:
        return None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
