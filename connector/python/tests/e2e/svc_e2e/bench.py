"""Benchmark of the whole LiteLLM round trip: no guardrail, path 1 (generic guardrail API -> svc connector ->
svc serve) and path 2 (ActionGuardrail in the proxy -> the connector's batch route -> svc serve), with one and
two allowed tool calls, at 1 and 16 concurrent clients, all measured in one run. Prints figures; asserts none.

Run through scripts/bench-gateway. Every cell is measured in several rounds interleaved with the other cells,
so that drift of the shared machine spreads over all of them; each request's latency is what the client saw,
from sending the request to reading the whole answer.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from .connector import CONNECTOR_TOKEN, start_connector
from .engine import build_svc, pack_with, start_engine
from .proxy import VirtualKey, action_guardrail, generic_guardrail, start_proxy
from .upstream import FakeModel, Scenario, ToolCall

KEY = VirtualKey("sk-bench-prod-agent", key_alias="agent-prod")
MODES = {"none": "bench-plain", "path1": "bench-p1", "path2": "bench-p2"}
# Every request of the run acts as one agent (gateway:<org>/<model>) for one principal, so the bundled pack's
# agent and principal object budgets (1,000 and 2,000 an hour) would hold the run's later calls for approval
# and measure refusals: the engine decides with a copy of the pack whose object budgets no run reaches. The
# evaluation is the same; only the limits differ.
UNREACHED = 10**9
BUDGETS = {scope: {"objects": UNREACHED} for scope in ("thresholds", "agent_thresholds", "principal_thresholds")}
CALLS = {
    1: Scenario((ToolCall("crm_get_customer", {"customer_id": "cus_1"}),)),
    2: Scenario((ToolCall("crm_get_customer", {"customer_id": "cus_1"}),
                 ToolCall("billing_list_invoices", {"customer_id": "cus_1"}))),
}


@dataclass
class Cell:
    """One measured combination and its latencies (seconds)."""

    mode: str
    calls: int
    clients: int
    samples: list[float] = field(default_factory=list)
    errors: int = 0
    busy: float = 0.0  # wall time spent measuring this cell

    def row(self, base: "Cell | None") -> str:
        ms = sorted(s * 1000 for s in self.samples)
        p50, p99 = statistics.median(ms), ms[min(len(ms) - 1, int(len(ms) * 0.99))]
        added = f"{p50 - statistics.median(s * 1000 for s in base.samples):+.1f}" if base else "—"
        rate = len(ms) / self.busy if self.busy else 0.0
        return (f"| {self.mode} | {self.calls} | {self.clients} | {len(ms)} | {p50:.1f} | {p99:.1f} | {added} | "
                f"{rate:.0f} | {self.errors} |")


def one_request(client: httpx.Client, model: str, scenario: Scenario) -> bool:
    body = {"model": model, "messages": scenario.messages()}
    resp = client.post("/v1/chat/completions", json=body)
    if resp.status_code != 200:
        return False
    calls = resp.json()["choices"][0]["message"].get("tool_calls") or []
    return len(calls) == len(scenario.tool_calls)


def run_round(base_url: str, cell: Cell, per_client: int) -> None:
    """cell.clients threads, each sending per_client requests back to back on its own keep-alive client."""
    lock = threading.Lock()
    model, scenario = MODES[cell.mode], CALLS[cell.calls]

    def worker() -> None:
        with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {KEY.key}"}, timeout=120) as c:
            for _ in range(per_client):
                start = time.perf_counter()
                ok = one_request(c, model, scenario)
                took = time.perf_counter() - start
                with lock:
                    if ok:
                        cell.samples.append(took)
                    else:
                        cell.errors += 1

    threads = [threading.Thread(target=worker) for _ in range(cell.clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cell.busy += time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="requests per cell (default 200)")
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds (default 4)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep logs here (default: a temp dir)")
    args = parser.parse_args(argv)
    root = args.workdir or Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    for stale in ("engine", "connector", "proxy", "pack"):  # what a run before this one in --workdir left
        shutil.rmtree(root / stale, ignore_errors=True)
    svc_bin = build_svc(root)
    model = FakeModel().start()
    engine = start_engine(root / "engine", svc_bin, policy_dir=pack_with(root / "pack", BUDGETS))
    connector = start_connector(root / "connector", svc_bin, engine.url, hold_wait=0)
    guardrails = [generic_guardrail("svc-p1", connector.url), action_guardrail("svc-p2", {"svc_hold_wait": 0})]
    models = {MODES["none"]: [], MODES["path1"]: ["svc-p1"], MODES["path2"]: ["svc-p2"]}
    env = {"SVC_CONNECTOR_TOKEN": CONNECTOR_TOKEN, "SVC_CONNECTOR_URL": connector.url}
    proxy = start_proxy(root / "proxy", model.api_base, guardrails, (KEY,), env=env, models=models)
    try:
        cells = [Cell(m, n, c) for c in (1, 16) for n in (1, 2) for m in MODES]
        for cell in cells:  # warm every path: connections, the proxy's caches, opa
            run_round(proxy.url, Cell(cell.mode, cell.calls, cell.clients), 2)
        for _ in range(args.rounds):
            for cell in cells:
                run_round(proxy.url, cell, max(1, args.requests // args.rounds // cell.clients))
        print(f"LiteLLM round trip, {args.requests} requests per cell in {args.rounds} interleaved rounds; "
              f"engine OPA server mode; logs in {root}")
        print("| guardrail | tool calls | clients | n | p50 ms | p99 ms | p50 added vs none | req/s | errors |")
        print("|---|---|---|---|---|---|---|---|---|")
        for cell in cells:
            base = next(b for b in cells if b.mode == "none" and b.calls == cell.calls and b.clients == cell.clients)
            print(cell.row(None if cell is base else base))
        return 1 if any(c.errors for c in cells) else 0
    finally:
        proxy.stop()
        connector.stop()
        engine.stop()
        model.stop()


if __name__ == "__main__":
    sys.exit(main())
