"""The real LiteLLM proxy (the pinned release in the venv), started on a free loopback port with a
config written for the test: one model in front of the fake upstream, the test's guardrails, and the
custom auth of testdata/e2e_auth.py standing in for database-backed virtual keys."""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml  # PyYAML, a dependency of the LiteLLM proxy

from .procs import LOOPBACK, ManagedProcess, base_env, free_port, http_ok

MODEL = "gpt-e2e"
MASTER_KEY = "sk-e2e-master-0000"
TESTDATA = Path(__file__).resolve().parent.parent / "testdata"
PYTHON_ROOT = Path(__file__).resolve().parents[3]  # connector/python
DEPLOY_LITELLM = PYTHON_ROOT.parents[1] / "deploy" / "litellm"  # the compose layout's proxy configs
LITELLM = Path(sys.executable).parent / "litellm"
START_TIMEOUT = 240.0  # the proxy imports for 20-60 s on a loaded 2-core machine


@dataclass(frozen=True)
class VirtualKey:
    """A caller key and the identity LiteLLM attaches to it."""

    key: str
    key_alias: str | None = None
    team_id: str | None = None
    team_alias: str | None = None
    user_id: str | None = None
    org_id: str | None = None

    def auth_fields(self) -> dict[str, str]:
        """The UserAPIKeyAuth fields set for this key."""
        names = ("key_alias", "team_id", "team_alias", "user_id", "org_id")
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}


def generic_guardrail(
    name: str,
    api_base: str,
    *,
    mode: str | list[str] = "post_call",
    api_key_env: str = "SVC_CONNECTOR_TOKEN",
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A path-1 guardrail entry: LiteLLM's stock generic guardrail API pointed at api_base."""
    params: dict[str, Any] = {
        "guardrail": "generic_guardrail_api",
        "mode": mode,
        "api_base": api_base,
        "api_key": f"os.environ/{api_key_env}",
        "default_on": False,
        "unreachable_fallback": "fail_closed",
        "fail_on_error": True,
    }
    params.update(extra or {})
    return {"guardrail_name": name, "litellm_params": params}


def deployed_guardrail(path: int, name: str, **overrides: Any) -> dict[str, Any]:
    """The svc guardrail entry of docker-compose.yml's proxy config for `path` (deploy/litellm/path1.yaml or
    path2.yaml), renamed, with overrides applied: the connector's address on loopback instead of the compose
    service's, and default_on, since the tests scope guardrails per model."""
    config = yaml.safe_load((DEPLOY_LITELLM / f"path{path}.yaml").read_text())
    (entry,) = config["guardrails"]
    params = dict(entry["litellm_params"])
    for key in overrides:
        if key not in params:
            raise KeyError(f"deploy/litellm/path{path}.yaml has no litellm_params.{key} to override")
    params.update(overrides)
    return {"guardrail_name": name, "litellm_params": params}


def action_guardrail(name: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A path-2 guardrail entry: svc_gateway.guardrail.ActionGuardrail loaded by dotted path."""
    params: dict[str, Any] = {
        "guardrail": "svc_gateway.guardrail.ActionGuardrail",
        "mode": "post_call",
        "default_on": False,
    }
    params.update(extra or {})
    return {"guardrail_name": name, "litellm_params": params}


def proxy_config(upstream_api_base: str, guardrails: list[dict[str, Any]],
                 models: Mapping[str, list[str]] | None = None) -> dict[str, Any]:
    """The proxy config: each model (name -> the guardrails attached to it) routed to the fake upstream;
    without `models`, MODEL alone, the guardrails left to their own `default_on`."""
    models = models if models is not None else {MODEL: []}
    model_list = []
    for index, (name, attached) in enumerate(models.items()):
        params: dict[str, Any] = {"model": "openai/fake-model", "api_base": upstream_api_base,
                                  "api_key": "sk-upstream-not-a-secret"}
        if attached:
            params["guardrails"] = list(attached)
        model_list.append({"model_name": name, "litellm_params": params,
                           "model_info": {"id": f"e2e-deployment-{index + 1}"}})
    return {
        "model_list": model_list,
        "guardrails": guardrails,
        "litellm_settings": {"num_retries": 0, "request_timeout": 120},
        "general_settings": {"master_key": MASTER_KEY, "custom_auth": "e2e_auth.user_api_key_auth"},
    }


@dataclass
class Proxy:
    """A running LiteLLM proxy."""

    process: ManagedProcess
    port: int
    keys: tuple[VirtualKey, ...] = field(default=())

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def stop(self) -> None:
        self.process.stop()


def start_proxy(
    workdir: Path,
    upstream_api_base: str,
    guardrails: list[dict[str, Any]],
    keys: tuple[VirtualKey, ...],
    env: Mapping[str, str] | None = None,
    models: Mapping[str, list[str]] | None = None,
) -> Proxy:
    """Write the config into workdir and start the proxy; return once /health/liveliness answers."""
    if not LITELLM.exists():
        raise RuntimeError(f"{LITELLM} missing: run scripts/install-test-deps (it fills the venv with LiteLLM)")
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "litellm-config.yaml"
    config.write_text(json.dumps(proxy_config(upstream_api_base, guardrails, models), indent=2))  # JSON is YAML
    shutil.copy(TESTDATA / "e2e_auth.py", workdir / "e2e_auth.py")
    all_keys = {MASTER_KEY: {"key_alias": "master"}} | {k.key: k.auth_fields() for k in keys}
    port = free_port()
    proc_env = base_env(
        {
            "SVC_E2E_KEYS": json.dumps(all_keys),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_TELEMETRY": "False",
            "PYTHONPATH": str(PYTHON_ROOT),
            "PYTHONUNBUFFERED": "1",
        }
    )
    proc_env.update(env or {})
    argv = [str(LITELLM), "--config", str(config), "--host", LOOPBACK, "--port", str(port), "--telemetry", "False"]
    process = ManagedProcess("litellm", argv, workdir / "litellm.log", proc_env, cwd=workdir).start()
    process.wait_ready(http_ok(f"http://{LOOPBACK}:{port}/health/liveliness"), START_TIMEOUT)
    return Proxy(process, port, keys)
