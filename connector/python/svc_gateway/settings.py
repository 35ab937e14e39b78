"""Guardrail settings: the proxy-config parameters and the environment, validated once at load.

A bad value raises ``ValueError`` naming the parameter or variable, so the proxy
refuses to start instead of running a guardrail that cannot decide.
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass
from typing import Any, Mapping, MutableMapping
from urllib.parse import urlsplit

ENV_CONNECTOR_URL = "SVC_CONNECTOR_URL"
ENV_CONNECTOR_TOKEN = "SVC_CONNECTOR_TOKEN"
ENV_CONNECTOR_CA_FILE = "SVC_CONNECTOR_CA_FILE"
BATCH_ROUTE = "/v1/gateway/tool-calls"

DEFAULT_HOLD_WAIT = 30
MAX_HOLD_WAIT = 599  # below LiteLLM's 600 s default request timeout
# Above the connector's default engine timeout (SVC_CLIENT_TIMEOUT, 30 s), so the connector's own
# fail-closed answer (and its ledger row) normally arrives before the module gives up.
DEFAULT_TIMEOUT_MARGIN = 35.0
MAX_TIMEOUT_MARGIN = 120.0
DEFAULT_SESSION_HEADER = "x-svc-session"

# Parameters this module reads from the guardrail's litellm_params.
PARAM_HOLD_WAIT = "svc_hold_wait"
PARAM_SESSION_HEADER = "svc_session_header"
PARAM_SESSION = "svc_session"
PARAM_TIMEOUT_MARGIN = "svc_timeout_margin"
PARAM_TOKEN_ENV = "svc_connector_token_env"
PARAM_URL_ENV = "svc_connector_url_env"
KNOWN_PARAMS = frozenset(
    {PARAM_HOLD_WAIT, PARAM_SESSION_HEADER, PARAM_SESSION, PARAM_TIMEOUT_MARGIN, PARAM_TOKEN_ENV, PARAM_URL_ENV}
)
# Config keys that could only carry the token itself: refused whatever their form,
# because LiteLLM resolves `os.environ/...` before the class sees the value.
LITERAL_TOKEN_PARAMS = ("api_key", "svc_connector_token", "svc_token")

# Headers that carry credentials: never a session hint, or a key would reach the ledger.
CREDENTIAL_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key", "x-litellm-api-key",
     "x-goog-api-key", "anthropic-api-key", "x-amz-security-token"}
)
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Settings:
    """Everything the guardrail needs to reach the connector and build a request."""

    route_url: str
    token: str
    hold_wait: int
    session_header: str
    static_session: str | None
    timeout_margin: float
    ca_file: str | None = None

    def decision_deadline(self) -> float:
        """Seconds the whole batch call may take: the connector waits on all of an answer's holds
        within one hold wait, then needs a margin for the engine round trips and the ledger."""
        return self.hold_wait + self.timeout_margin


def pop_settings(params: MutableMapping[str, Any], environ: Mapping[str, str]) -> Settings:
    """Remove this module's parameters from ``params`` and return them validated with the environment."""
    for key in LITERAL_TOKEN_PARAMS:
        if params.get(key) not in (None, ""):
            raise ValueError(
                f"svc_gateway: litellm_params.{key} is refused: a token never goes in the proxy config; "
                f"set it in the environment variable {ENV_CONNECTOR_TOKEN} (or name another variable "
                f"with {PARAM_TOKEN_ENV})"
            )
        params.pop(key, None)
    unknown = sorted(k for k in params if k.startswith("svc_") and k not in KNOWN_PARAMS)
    if unknown:
        raise ValueError(f"svc_gateway: unknown parameter litellm_params.{unknown[0]}")
    token_env = _env_name(params.pop(PARAM_TOKEN_ENV, None), PARAM_TOKEN_ENV, ENV_CONNECTOR_TOKEN)
    url_env = _env_name(params.pop(PARAM_URL_ENV, None), PARAM_URL_ENV, ENV_CONNECTOR_URL)
    return Settings(
        route_url=_route_url(environ.get(url_env), url_env),
        token=_token(environ.get(token_env), token_env),
        hold_wait=_int_in_range(params.pop(PARAM_HOLD_WAIT, None), PARAM_HOLD_WAIT, DEFAULT_HOLD_WAIT, MAX_HOLD_WAIT),
        session_header=_session_header(params.pop(PARAM_SESSION_HEADER, None)),
        static_session=_static_session(params.pop(PARAM_SESSION, None), params.get("additional_provider_specific_params")),
        timeout_margin=_margin(params.pop(PARAM_TIMEOUT_MARGIN, None)),
        ca_file=_ca_file(environ.get(ENV_CONNECTOR_CA_FILE)),
    )


def _env_name(value: Any, param: str, default: str) -> str:
    if value is None:
        return default
    if not isinstance(value, str) or not _ENV_NAME.match(value):
        raise ValueError(f"svc_gateway: litellm_params.{param} must name an environment variable")
    return value


def _route_url(value: str | None, env: str) -> str:
    if not value or not value.strip():
        raise ValueError(f"svc_gateway: environment variable {env} is not set (the connector's base URL)")
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"svc_gateway: {env} must be an http(s) URL with a host")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"svc_gateway: {env} must not carry credentials; the token goes in {ENV_CONNECTOR_TOKEN}")
    if parts.query or parts.fragment:
        raise ValueError(f"svc_gateway: {env} must not carry a query or fragment")
    return value.strip().rstrip("/") + BATCH_ROUTE


def _ca_file(value: str | None) -> str | None:
    if not value:
        return None
    try:
        ssl.create_default_context(cafile=value)
    except (OSError, ssl.SSLError) as err:
        raise ValueError(f"svc_gateway: {ENV_CONNECTOR_CA_FILE} is not a readable PEM CA bundle ({type(err).__name__})") from None
    return value


def _token(value: str | None, env: str) -> str:
    if not value:
        raise ValueError(f"svc_gateway: environment variable {env} is not set (the connector token)")
    if any(ch.isspace() or not ch.isprintable() for ch in value):
        raise ValueError(f"svc_gateway: {env} holds whitespace or control characters")
    return value


def _int_in_range(value: Any, param: str, default: int, maximum: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"svc_gateway: litellm_params.{param} must be a whole number of seconds")
    if not 0 <= value <= maximum:
        raise ValueError(f"svc_gateway: litellm_params.{param} must be between 0 and {maximum}")
    return value


def _margin(value: Any) -> float:
    if value is None:
        return DEFAULT_TIMEOUT_MARGIN
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"svc_gateway: litellm_params.{PARAM_TIMEOUT_MARGIN} must be a number of seconds")
    if not 0 < value <= MAX_TIMEOUT_MARGIN:
        raise ValueError(f"svc_gateway: litellm_params.{PARAM_TIMEOUT_MARGIN} must be above 0 and at most {MAX_TIMEOUT_MARGIN:g}")
    return float(value)


def _session_header(value: Any) -> str:
    if value is None:
        return DEFAULT_SESSION_HEADER
    if not isinstance(value, str) or not _HEADER_NAME.match(value):
        raise ValueError(f"svc_gateway: litellm_params.{PARAM_SESSION_HEADER} must be an HTTP header name")
    if value.lower() in CREDENTIAL_HEADERS:
        raise ValueError(f"svc_gateway: litellm_params.{PARAM_SESSION_HEADER} names a credential header")
    return value.lower()


def _static_session(value: Any, provider_params: Any) -> str | None:
    if value is None and isinstance(provider_params, Mapping):
        value = provider_params.get(PARAM_SESSION)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"svc_gateway: litellm_params.{PARAM_SESSION} must be a non-empty string")
    return value
