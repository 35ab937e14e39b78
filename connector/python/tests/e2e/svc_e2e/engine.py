"""The svc engine (`svc serve`, built from this tree) with the real opa, and the calls tests make to it:
approve a hold as a verified human, read the audit log."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from .procs import LOOPBACK, ManagedProcess, base_env, http_ok

REPO_ROOT = Path(__file__).resolve().parents[5]
ENGINE_TOKEN = "e2e-engine-operator-token"
APPROVER_TOKEN = "e2e-approver-alice-token"
APPROVER = {"type": "human", "id": "alice"}
START_TIMEOUT = 60.0


def build_svc(out_dir: Path) -> Path:
    """`go build` the svc binary of this tree into out_dir (SVC_BIN overrides, for a prebuilt binary)."""
    prebuilt = os.environ.get("SVC_BIN")
    if prebuilt:
        return Path(prebuilt)
    out = out_dir / "svc"
    done = subprocess.run(["go", "build", "-o", str(out), "."], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"go build failed:\n{done.stderr}")
    return out


def find_opa() -> Path:
    """The pinned opa that scripts/install-opa installs (SVC_OPA_BIN overrides)."""
    explicit = os.environ.get("SVC_OPA_BIN")
    if explicit:
        return Path(explicit)
    found = shutil.which("opa")
    if found:
        return Path(found)
    gopath = subprocess.run(["go", "env", "GOPATH"], capture_output=True, text=True).stdout.strip().split(":")[0]
    candidate = Path(gopath) / "bin" / "opa"
    if candidate.exists():
        return candidate
    raise RuntimeError("opa not found: run scripts/install-opa (scripts/test does)")


def listen_addr(log: Path) -> int | None:
    """The port of the first JSON log line that carries `addr` (svc logs the address it bound)."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        if '"addr"' not in line:
            continue
        try:
            addr = json.loads(line).get("addr")
        except ValueError:
            continue
        if isinstance(addr, str) and ":" in addr:
            return int(addr.rsplit(":", 1)[1])
    return None


def start_on_free_port(name: str, argv: list[str], env: dict[str, str], port_var: str, log: Path,
                       health_path: str) -> tuple[ManagedProcess, int]:
    """Start an svc process with env[port_var]=0 (the kernel picks a free port), read the port it bound from
    its log, and return once health_path answers 200 there."""
    env[port_var] = "0"
    proc = ManagedProcess(name, argv, log, env).start()
    found: list[int] = []

    def ready() -> bool:
        if not found:
            port = listen_addr(log)
            if port is None:
                return False
            found.append(port)
        return http_ok(f"http://{LOOPBACK}:{found[0]}{health_path}")()

    proc.wait_ready(ready, START_TIMEOUT)
    return proc, found[0]


@dataclass
class Engine:
    """A running `svc serve`."""

    process: ManagedProcess
    port: int
    audit_log: Path
    workdir: Path

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def stop(self) -> None:
        self.process.stop()

    def _get(self, path: str, token: str = ENGINE_TOKEN) -> Any:
        resp = httpx.get(self.url + path, headers={"Authorization": f"Bearer {token}"}, timeout=10)
        resp.raise_for_status()
        return resp.json()

    def hold(self, hold_id: str) -> dict[str, Any]:
        """GET /v1/holds/{id}."""
        return self._get(f"/v1/holds/{hold_id}")

    def holds(self, status: str = "all") -> list[dict[str, Any]]:
        """GET /v1/holds (first page of 1000)."""
        return self._get(f"/v1/holds?status={status}&limit=1000")["items"]

    def resolve(self, hold_id: str, decision: str = "approve") -> dict[str, Any]:
        """Resolve a hold as the verified human alice (resolver token)."""
        resp = httpx.post(f"{self.url}/v1/holds/{hold_id}/resolve",
                          headers={"Authorization": f"Bearer {APPROVER_TOKEN}"},
                          json={"decision": decision, "reason": "e2e test"}, timeout=10)
        assert resp.status_code == 200, f"resolve {hold_id}: {resp.status_code} {resp.text}"
        return resp.json()

    def audit(self) -> list[dict[str, Any]]:
        """Every line of the audit log, parsed."""
        if not self.audit_log.exists():
            return []
        return [json.loads(line) for line in self.audit_log.read_text().splitlines() if line.strip()]

    def decisions(self) -> list[dict[str, Any]]:
        """The audit log's decision lines."""
        return [a for a in self.audit() if a.get("event") == "decision"]


def pack_with(workdir: Path, edits: dict[str, Any]) -> Path:
    """A copy of the bundled pack whose data.svc has edits merged in (objects merged member by member)."""

    def merge(base: dict[str, Any], patch: dict[str, Any]) -> None:
        for key, value in patch.items():
            if isinstance(value, dict) and isinstance(base.get(key), dict):
                merge(base[key], value)
            else:
                base[key] = value

    pack = workdir / "policy"
    shutil.copytree(REPO_ROOT / "rego" / "policy", pack)
    data = json.loads((pack / "data.json").read_text())
    merge(data["svc"], edits)
    (pack / "data.json").write_text(json.dumps(data))
    return pack


def start_engine(workdir: Path, svc_bin: Path, opa_mode: str = "server", policy_dir: Path | None = None) -> Engine:
    """Start `svc serve` on a free loopback port with the bundled policy (or policy_dir), the real opa, an
    operator token and the resolver token of alice; return once /healthz answers."""
    workdir.mkdir(parents=True, exist_ok=True)
    audit = workdir / "audit.jsonl"
    env = base_env({
        "SVC_HOST": LOOPBACK,
        "SVC_OPA_MODE": opa_mode,
        "SVC_OPA_BIN": str(find_opa()),
        "SVC_HOLDS_PATH": str(workdir / "svc.db"),
        "SVC_AUDIT_LOG": str(audit),
        "SVC_AUTH_TOKEN": ENGINE_TOKEN,
        "SVC_RESOLVER_TOKENS": json.dumps({APPROVER_TOKEN: APPROVER}),
        "SVC_LOG_LEVEL": "info",
    })
    if policy_dir is not None:
        env["SVC_POLICY_DIR"] = str(policy_dir)
    proc, port = start_on_free_port("svc serve", [str(svc_bin), "serve"], env, "SVC_PORT",
                                    workdir / "engine.log", "/healthz")
    return Engine(proc, port, audit, workdir)
