"""`svc connector` (the same binary as the engine) with the test tenancy map and tool map, and what tests
read from it: health with counters, the ledger through `svc connector ledger -o json`."""

from __future__ import annotations

import json
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import httpx

from .engine import ENGINE_TOKEN, start_on_free_port
from .procs import LOOPBACK, ManagedProcess, base_env

CONNECTOR_TOKEN = "e2e-connector-token"
TESTDATA = Path(__file__).resolve().parent.parent / "testdata"
TENANCY_MAP = TESTDATA / "tenancy.json"
TOOL_MAP = TESTDATA / "tools.json"


@dataclass
class Connector:
    """A running `svc connector`."""

    process: ManagedProcess
    port: int
    svc_bin: Path
    ledger_path: Path
    env: dict[str, str]

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def stop(self) -> None:
        self.process.stop()

    def health(self) -> dict[str, Any]:
        """GET /healthz with the token (counters included)."""
        resp = httpx.get(f"{self.url}/healthz", headers={"x-api-key": CONNECTOR_TOKEN}, timeout=10)
        resp.raise_for_status()
        return resp.json()

    def counters(self) -> dict[str, int]:
        """The health document's counters."""
        return self.health()["counters"]

    def ledger(self, limit: int = 1000) -> list[dict[str, Any]]:
        """`svc connector ledger -o json` on this connector's ledger, newest first."""
        done = subprocess.run([str(self.svc_bin), "connector", "ledger", "-o", "json", "--limit", str(limit)],
                              env=self.env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"svc connector ledger: exit {done.returncode}: {done.stderr}"
        rows = json.loads(done.stdout)
        assert isinstance(rows, list), done.stdout
        return rows


def start_connector(workdir: Path, svc_bin: Path, core_url: str, hold_wait: float,
                    extra_env: Mapping[str, str] | None = None) -> Connector:
    """Start `svc connector` on a free loopback port in front of the engine at core_url."""
    workdir.mkdir(parents=True, exist_ok=True)
    ledger = workdir / "gateway-ledger.db"
    env = base_env({
        "SVC_CONNECTOR_HOST": LOOPBACK,
        "SVC_CONNECTOR_TOKEN": CONNECTOR_TOKEN,
        "SVC_CORE_URL": core_url,
        "SVC_CORE_TOKEN": ENGINE_TOKEN,
        "SVC_GATEWAY_TENANCY_MAP_FILE": str(TENANCY_MAP),
        "SVC_GATEWAY_TOOL_MAP_FILE": str(TOOL_MAP),
        "SVC_GATEWAY_HOLD_WAIT": str(hold_wait),
        "SVC_GATEWAY_LEDGER_PATH": str(ledger),
        "SVC_LOG_LEVEL": "info",
    })
    env.update(extra_env or {})
    proc, port = start_on_free_port("svc connector", [str(svc_bin), "connector"], env, "SVC_CONNECTOR_PORT",
                                    workdir / "connector.log", "/healthz")
    return Connector(proc, port, svc_bin, ledger, env)


class DeadPort:
    """A loopback port that is bound but never listens: a connect is refused at once, and no other process
    can take the port while the test holds it."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((LOOPBACK, 0))

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.sock.getsockname()[1]}"

    def close(self) -> None:
        self.sock.close()
