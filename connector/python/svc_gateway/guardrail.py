"""``ActionGuardrail``: the LiteLLM ``CustomGuardrail`` of svc's gateway path 2.

Load it from the proxy config by dotted path::

    guardrails:
      - guardrail_name: svc-actions
        litellm_params:
          guardrail: svc_gateway.guardrail.ActionGuardrail
          mode: post_call
          default_on: true
          svc_hold_wait: 30
          svc_session_header: x-svc-session

The connector's base URL and token come from ``SVC_CONNECTOR_URL`` and
``SVC_CONNECTOR_TOKEN``. Hooks (LiteLLM 1.101.0): ``async_post_call_success_hook``
for whole answers and ``async_post_call_streaming_iterator_hook`` for streams; both
turn every fault into a refusal of the answer's calls, so neither LiteLLM's error
handling nor a fail-open switch can turn a fault into a release.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from typing import Any, AsyncGenerator

from litellm.exceptions import GuardrailRaisedException
from litellm.integrations.custom_guardrail import CustomGuardrail
from litellm.types.guardrails import GuardrailEventHooks

from . import answer, context
from .client import ConnectorClient
from .foreign import carries_tool_call
from .settings import Settings, pop_settings
from .stream import StreamHold
from .verdicts import FAIL_CLOSED_RULE, STAGE_REFUSED, ToolCall, Verdict, fail_closed, refusal_payload
from .wire import request_body

log = logging.getLogger("svc_gateway")

INTERNAL_FAULT = "svc_gateway failed while deciding ({})"
FOREIGN_SHAPE = "svc_gateway removes tool calls from chat completions only; this answer's shape carries a tool call"


class ActionGuardrail(CustomGuardrail):
    """Asks the svc connector about every tool call of a model answer; removes what it refuses."""

    def __init__(self, **kwargs: Any) -> None:
        settings = pop_settings(kwargs, os.environ)
        _require_post_call(kwargs.get("event_hook"))
        kwargs["supported_event_hooks"] = [GuardrailEventHooks.post_call]
        super().__init__(**kwargs)
        self.svc_client = ConnectorClient(settings)

    @property
    def run_in_parallel(self) -> bool:
        """Always False: LiteLLM runs parallel post-call guardrails as block-only and discards their answer."""
        return False

    @run_in_parallel.setter
    def run_in_parallel(self, value: object) -> None:
        # LiteLLM sets this after construction too (_apply_configured_bool_overrides).
        if value:
            raise ValueError(
                "svc_gateway: run_in_parallel is refused: the guardrail rewrites answers, "
                "and LiteLLM discards what a parallel post-call guardrail returns"
            )

    @property
    def svc_settings(self) -> Settings:
        """The validated settings (connector route, hold wait, session header)."""
        return self.svc_client.settings

    async def async_post_call_success_deployment_hook(self, request_data: dict, response: Any, call_type: Any) -> Any:
        """Do nothing at the deployment level: the proxy-level hook decides each answer exactly once.

        LiteLLM's base class would run the success hook here too whenever the
        request carries model-level guardrails, asking the connector twice (two
        ledger rows, a budget spent twice, an approval consumed by the first ask).
        """
        return None

    async def async_post_call_success_hook(self, data: dict, user_api_key_dict: Any, response: Any) -> Any:
        """Remove the refused tool calls of a non-streamed answer; return the answer."""
        try:
            if not isinstance(getattr(response, "choices", None), list):
                if carries_tool_call(response):
                    raise _refused_whole(self.guardrail_name, FOREIGN_SHAPE)
                return None
            calls = answer.collect(response)
        except GuardrailRaisedException:
            raise
        except Exception as err:  # noqa: BLE001
            raise _refused_whole(self.guardrail_name, INTERNAL_FAULT.format(type(err).__name__)) from None
        if not calls:
            return None
        try:
            verdicts = await self._decide(calls, data, user_api_key_dict, response)
        except Exception as err:  # noqa: BLE001 - _decide is total; this is a last resort
            verdicts = fail_closed(calls, INTERNAL_FAULT.format(type(err).__name__))
        try:
            answer.apply(response, calls, verdicts)
        except Exception as err:  # noqa: BLE001
            raise _refused_whole(self.guardrail_name, INTERNAL_FAULT.format(type(err).__name__)) from None
        return response

    async def async_post_call_streaming_iterator_hook(
        self, user_api_key_dict: Any, response: Any, request_data: dict
    ) -> AsyncGenerator[Any, None]:
        """Pass frames before the first tool call; hold the rest, decide, release what is allowed."""
        hold = StreamHold()
        broken: Exception | None = None
        async for chunk in response:  # an upstream error propagates; nothing held is released
            if broken is not None:
                continue  # drain the upstream; nothing more is emitted
            try:
                emit = hold.feed(chunk)
            except Exception as err:  # noqa: BLE001
                broken = err
                continue
            if emit:
                yield chunk
        if broken is not None:
            for frame in _refuse_held(hold, INTERNAL_FAULT.format(type(broken).__name__)):
                yield frame
            return
        if hold.foreign:
            raise _refused_whole(self.guardrail_name, FOREIGN_SHAPE)
        if not hold.holding:
            return
        for frame in await self._release(hold, request_data, user_api_key_dict):
            yield frame

    async def _release(self, hold: StreamHold, data: dict, user_api_key_dict: Any) -> list[Any]:
        try:
            calls = hold.calls()
            verdicts = await self._decide(calls, data, user_api_key_dict, hold.sample)
            return hold.release(verdicts)
        except Exception as err:  # noqa: BLE001
            return _refuse_held(hold, INTERNAL_FAULT.format(type(err).__name__))

    async def _decide(self, calls: list[ToolCall], data: dict, user_api_key_dict: Any, sample: Any) -> list[Verdict]:
        """One verdict per call from the connector; any fault before the call refuses every call."""
        try:
            settings = self.svc_client.settings
            requested = self.get_guardrail_from_metadata(data)
            body = request_body(
                model=_model(sample, data),
                identity=context.identity(data, user_api_key_dict),
                session_hints=context.session_hints(
                    data,
                    header=settings.session_header,
                    static_session=settings.static_session,
                    requested_session=context.requested_session(requested, self.guardrail_name),
                ),
                deployment=context.deployment(data, getattr(sample, "_hidden_params", None)),
                hold_wait=settings.hold_wait,
                calls=calls,
            )
        except Exception as err:  # noqa: BLE001
            log.error("svc_gateway: could not build the connector request: %s", type(err).__name__)
            return fail_closed(calls, INTERNAL_FAULT.format(type(err).__name__))
        verdicts = await self.svc_client.decide(body, calls)
        _log_outcomes(verdicts)
        return verdicts


def _log_outcomes(verdicts: list[Verdict]) -> None:
    """One line per answer: how many calls got each outcome; a warning naming the reason when one failed closed."""
    counts = Counter(v.outcome for v in verdicts)
    log.debug("svc_gateway: outcomes %s", ", ".join(f"{name}={n}" for name, n in sorted(counts.items())))
    failed = next((v for v in verdicts if v.outcome == "fail_closed"), None)
    if failed is not None and failed.refusal:
        log.warning("svc_gateway: %d tool call(s) refused, failing closed: %s", counts["fail_closed"], failed.refusal.get("reason"))


def _require_post_call(mode: Any) -> None:
    value = getattr(mode, "value", mode)
    if value == "post_call" or (isinstance(value, list) and [getattr(m, "value", m) for m in value] == ["post_call"]):
        return
    raise ValueError(
        "svc_gateway: mode must be post_call: only the post-call hook sees the tool calls a model chose"
    )


def _model(sample: Any, data: dict) -> str | None:
    model = getattr(sample, "model", None)
    if isinstance(model, str) and model:
        return model
    requested = data.get("model")
    return requested if isinstance(requested, str) and requested else None


def _refuse_held(hold: StreamHold, reason: str) -> list[Any]:
    """Closing frames refusing every call seen so far; held frames are dropped, never released."""
    frames = []
    for choice in hold.choices_with_calls() or [0]:
        refused = [c for c in hold.calls() if c.choice == choice]
        frames.append(hold.closing_frame(choice, [v.refusal or {} for v in fail_closed(refused, reason)]))
    return frames


def _refused_whole(name: str | None, reason: str) -> GuardrailRaisedException:
    """Refuse the whole answer (HTTP 400, or an error frame in a stream): nothing of it is released."""
    log.error("svc_gateway: answer refused as a whole: %s", reason)
    payload = refusal_payload(
        [{"error": "svc_fail_closed", "rule": FAIL_CLOSED_RULE, "reason": reason, "stage": STAGE_REFUSED}]
    )
    return GuardrailRaisedException(
        guardrail_name=name,
        message=f"Svc: {reason} [rule={FAIL_CLOSED_RULE}] {payload}",
        should_wrap_with_default_message=False,
    )
