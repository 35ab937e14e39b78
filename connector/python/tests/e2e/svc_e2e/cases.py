"""Tool calls and request helpers shared by the path-1 and path-2 tests (and the benchmark)."""

from __future__ import annotations

import time
from typing import Any, Callable

from .client import openai_client, unique
from .engine import Engine
from .upstream import Scenario, ToolCall

WAIT_FOR_HOLD = 90.0  # a loaded 2-core machine can take seconds to pass a request through the proxy


def read_call(call_id: str | None = None) -> ToolCall:
    """A read the pack allows (read_only_internal)."""
    return ToolCall("crm_get_customer", {"customer_id": unique("cus")}, call_id)


def mass_delete(rows: int = 2000, call_id: str | None = None, **extra: Any) -> ToolCall:
    """An irreversible systemic delete (tools.json): denied in production."""
    args = {"table": "customers", "ids": list(range(1, rows + 1)), "dry_run": False, "marker": unique("del")}
    return ToolCall("db_delete_records", args | extra, call_id)


def void_invoices(customer: str, call_id: str | None = None) -> ToolCall:
    """An irreversible broad delete (tools.json): held for approval in production."""
    return ToolCall("billing_void_invoices",
                    {"customer_id": customer, "invoice_ids": [f"in_{i}" for i in range(40)]}, call_id)


def credential_change(call_id: str | None = None) -> ToolCall:
    """A webhook endpoint change: the credential table's words (the obligations engine attaches notify and
    UNKNOWN_OBLIGATION to it; allowed in staging, the obligations aside)."""
    return ToolCall("set_webhook_endpoint", {"url": f"https://hooks.example.com/{unique('hook')}"}, call_id)


def ask(base_url: str, key: str, model: str, scenario: Scenario, headers: dict[str, str] | None = None) -> Any:
    """One non-streamed chat completion through the proxy with a real OpenAI client."""
    with openai_client(base_url, key) as client:
        return client.chat.completions.create(model=model, messages=scenario.messages(), extra_headers=headers)


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll check until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def pending_hold_for(engine: Engine, customer: str) -> Callable[[], dict[str, Any] | None]:
    """A check finding the pending hold whose params name customer."""

    def find() -> dict[str, Any] | None:
        for hold in engine.holds("pending"):
            if (hold.get("envelope") or {}).get("params", {}).get("customer_id") == customer:
                return hold
        return None

    return find
