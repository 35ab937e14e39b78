"""Fixtures of the gateway end-to-end tests: real processes on free loopback ports.

One session stack: the svc engine (built from this tree, OPA in server mode with the real opa, an operator
token and a resolver token of the human alice), three `svc connector`s in front of it (hold wait 20 s, hold
wait 0, and one whose engine is a dead port), a second engine whose pack attaches an obligation outside the
closed set with its own connector, the fake OpenAI-compatible upstream, and a real LiteLLM proxy
per path, started on first use. Models scope the guardrails (`model_list[].litellm_params.guardrails`), so one
proxy serves every path-1 case and another every path-2 case. Teardown stops everything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from svc_e2e.cases import ask
from svc_e2e.connector import CONNECTOR_TOKEN, Connector, DeadPort, start_connector
from svc_e2e.engine import Engine, build_svc, pack_with, start_engine
from svc_e2e.proxy import Proxy, action_guardrail, deployed_guardrail, generic_guardrail, start_proxy
from svc_e2e.topology import (HOLD_WAIT, KEYS, P1_ENGINE_DOWN_MODEL, P1_MODEL, P1_NOWAIT_MODEL,
                              P1_OBLIGATIONS_MODEL, P1_PRE_CALL_MODEL, P2_DOWN_MODEL, P2_MODEL, P2_NOWAIT_MODEL,
                              P2_OBLIGATIONS_MODEL, PLAIN_MODEL, UNKNOWN_OBLIGATION, Stack)
from svc_e2e.upstream import FakeModel, Scenario

def warm_up(proxy: Proxy) -> None:
    """One request through the unguarded model, so that the proxy's first-request costs (imports, client
    set-up) do not fall into a test's timing."""
    ask(proxy.url, KEYS[0].key, PLAIN_MODEL, Scenario(content="warm up"))


@pytest.fixture(scope="session")
def svc_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bin/svc built from this tree."""
    return build_svc(tmp_path_factory.mktemp("bin"))


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory, svc_bin: Path) -> Iterator[Stack]:
    """Engine, connectors and fake upstream, started once, stopped at the end."""
    root = tmp_path_factory.mktemp("stack")
    model, dead = FakeModel().start(), DeadPort()
    started: list[Engine | Connector] = []
    try:
        # The stack's tests share the gateway's agent (gateway:<org>/<model>) and principal, whose delete budgets
        # (pack v2) would carry one test's deletes into the next: raised here, so that each test meets the
        # session budget it is about. The agent and principal budgets: cmd/policy_e2e_test.go.
        engine = start_engine(root / "engine", svc_bin, policy_dir=pack_with(root / "pack", {
            "agent_thresholds": {"deletes": 100000, "external_sends": 100000, "objects": 100000},
            "principal_thresholds": {"deletes": 100000, "external_sends": 100000, "objects": 100000}}))
        started.append(engine)
        conns = []
        for name, wait, core in (("connector", HOLD_WAIT, engine.url), ("connector-nowait", 0, engine.url),
                                 ("connector-engine-down", HOLD_WAIT, dead.url)):
            conns.append(start_connector(root / name, svc_bin, core, wait))
            started.append(conns[-1])
        pack = pack_with(root / "obligations-pack", {"sensitive": {"credential": {"obligations": ["notify", UNKNOWN_OBLIGATION]}}})
        obligations_engine = start_engine(root / "engine-obligations", svc_bin, policy_dir=pack)
        started.append(obligations_engine)
        conns.append(start_connector(root / "connector-obligations", svc_bin, obligations_engine.url, 0))
        started.append(conns[-1])
        yield Stack(engine, conns[0], conns[1], conns[2], model, dead, obligations_engine, conns[3])
    finally:
        for proc in reversed(started):
            proc.stop()
        model.stop()
        dead.close()


@pytest.fixture(scope="session")
def proxy_path1(tmp_path_factory: pytest.TempPathFactory, stack: Stack) -> Iterator[Proxy]:
    """The stock LiteLLM proxy with generic guardrails (path 1), one per model."""
    guardrails = [
        generic_guardrail("svc-p1", stack.connector.url),
        # docker-compose.yml's path-1 guardrail, as deployed (it lists x-svc-session in extra_headers).
        deployed_guardrail(1, "svc-p1-nowait", api_base=stack.connector_nowait.url, default_on=False),
        generic_guardrail("svc-p1-engine-down", stack.connector_engine_down.url),
        generic_guardrail("svc-p1-pre", stack.connector.url, mode=["pre_call", "post_call"]),
        generic_guardrail("svc-p1-obligations", stack.connector_obligations.url),
    ]
    models = {P1_MODEL: ["svc-p1"], P1_NOWAIT_MODEL: ["svc-p1-nowait"],
              P1_ENGINE_DOWN_MODEL: ["svc-p1-engine-down"], P1_PRE_CALL_MODEL: ["svc-p1-pre"],
              P1_OBLIGATIONS_MODEL: ["svc-p1-obligations"], PLAIN_MODEL: []}
    proxy = start_proxy(tmp_path_factory.mktemp("proxy-path1"), stack.model.api_base, guardrails, KEYS,
                        env={"SVC_CONNECTOR_TOKEN": CONNECTOR_TOKEN}, models=models)
    try:
        warm_up(proxy)
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture(scope="session")
def proxy_path2(tmp_path_factory: pytest.TempPathFactory, stack: Stack) -> Iterator[Proxy]:
    """The LiteLLM proxy with svc_gateway.guardrail.ActionGuardrail loaded by dotted path (path 2)."""
    guardrails = [
        action_guardrail("svc-p2", {"svc_hold_wait": HOLD_WAIT}),
        action_guardrail("svc-p2-down", {"svc_hold_wait": HOLD_WAIT, "svc_connector_url_env": "SVC_E2E_DOWN_URL"}),
        # docker-compose.yml's path-2 guardrail, as deployed, without its hold wait.
        deployed_guardrail(2, "svc-p2-nowait", svc_hold_wait=0, default_on=False),
        action_guardrail("svc-p2-obligations", {"svc_hold_wait": 0, "svc_connector_url_env": "SVC_E2E_OBLIGATIONS_URL"}),
    ]
    models = {P2_MODEL: ["svc-p2"], P2_DOWN_MODEL: ["svc-p2-down"], P2_NOWAIT_MODEL: ["svc-p2-nowait"],
              P2_OBLIGATIONS_MODEL: ["svc-p2-obligations"], PLAIN_MODEL: []}
    env = {"SVC_CONNECTOR_TOKEN": CONNECTOR_TOKEN, "SVC_CONNECTOR_URL": stack.connector.url,
           "SVC_E2E_DOWN_URL": stack.dead.url, "SVC_E2E_OBLIGATIONS_URL": stack.connector_obligations.url}
    proxy = start_proxy(tmp_path_factory.mktemp("proxy-path2"), stack.model.api_base, guardrails, KEYS,
                        env=env, models=models)
    try:
        warm_up(proxy)
        yield proxy
    finally:
        proxy.stop()
