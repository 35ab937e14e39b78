"""The HTTP client of the connector's batch route; every fault becomes a refusal of every call."""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import Any

import httpx

from .settings import Settings
from .verdicts import ToolCall, Verdict, fail_closed
from .wire import AnswerError, read_answer

CONNECT_TIMEOUT = 5.0
USER_AGENT = "svc-gateway/0.2.0"


class ConnectorClient:
    """Asks the connector for one verdict per tool call over a reused keep-alive client."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def settings(self) -> Settings:
        """The validated settings the client was built with."""
        return self._settings

    async def decide(self, body: dict[str, Any], calls: list[ToolCall]) -> list[Verdict]:
        """Verdicts for ``calls`` (sent as ``body``), in order; never raises except on cancellation."""
        deadline = self._settings.decision_deadline()
        try:
            response = await asyncio.wait_for(self._post(body, deadline), timeout=deadline)
        except (asyncio.TimeoutError, TimeoutError):  # distinct classes before Python 3.11
            return fail_closed(calls, f"the svc connector did not answer within {deadline:g} s")
        except httpx.HTTPError as err:
            return fail_closed(calls, f"the svc connector is unreachable ({type(err).__name__})")
        except Exception as err:  # noqa: BLE001 - any fault refuses, never releases
            return fail_closed(calls, f"svc_gateway could not call the connector ({type(err).__name__})")
        return self._verdicts(response, calls)

    async def aclose(self) -> None:
        """Close the keep-alive client; a later call opens a new one."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    async def _post(self, body: dict[str, Any], deadline: float) -> httpx.Response:
        client = self._client_for_loop()
        return await client.post(
            self._settings.route_url,
            content=json.dumps(body, separators=(",", ":")),
            headers={"content-type": "application/json", "x-api-key": self._settings.token},
            timeout=httpx.Timeout(deadline, connect=CONNECT_TIMEOUT),
        )

    def _client_for_loop(self) -> httpx.AsyncClient:
        # An httpx pool is bound to the event loop that opened its connections.
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop or self._client.is_closed:
            # trust_env off: the proxy's HTTP(S)_PROXY is for model providers, never for the connector.
            self._client = httpx.AsyncClient(
                headers={"user-agent": USER_AGENT}, follow_redirects=False, trust_env=False, verify=self._verify()
            )
            self._loop = loop
        return self._client

    def _verify(self) -> ssl.SSLContext | bool:
        if self._settings.ca_file is None:
            return True
        return ssl.create_default_context(cafile=self._settings.ca_file)

    @staticmethod
    def _verdicts(response: httpx.Response, calls: list[ToolCall]) -> list[Verdict]:
        if response.status_code != 200:
            return fail_closed(calls, f"the svc connector answered HTTP {response.status_code}")
        try:
            return read_answer(json.loads(response.content), calls)
        except (ValueError, AnswerError) as err:
            return fail_closed(calls, f"the svc connector's answer was not understood: {err}")
        except Exception as err:  # noqa: BLE001 - e.g. a nesting too deep to parse
            return fail_closed(calls, f"the svc connector's answer was not understood ({type(err).__name__})")
