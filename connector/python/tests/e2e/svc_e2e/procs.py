"""Child processes for the end-to-end tests: free loopback ports, start, wait for health, stop.

Every process the harness starts writes its output to a log file under the test's temporary
directory, so a failing start-up names the log and shows its tail instead of hanging.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import httpx

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A TCP port that was free on the loopback interface a moment ago (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def log_tail(path: Path, lines: int = 40) -> str:
    """The last lines of a log file, for failure messages."""
    try:
        text = path.read_text(errors="replace")
    except OSError as err:
        return f"(no log at {path}: {err})"
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class ManagedProcess:
    """A child process in its own process group, stopped (group and all) by stop()."""

    name: str
    argv: Sequence[str]
    log_path: Path
    env: Mapping[str, str]
    cwd: Path | None = None
    popen: subprocess.Popen[bytes] | None = field(default=None, init=False)

    def start(self) -> "ManagedProcess":
        """Start the process, its stdout and stderr going to log_path."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        try:
            self.popen = subprocess.Popen(
                list(self.argv),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(self.env),
                cwd=str(self.cwd) if self.cwd else None,
                start_new_session=True,
            )
        finally:
            log.close()
        return self

    def alive(self) -> bool:
        """Whether the process is still running."""
        return self.popen is not None and self.popen.poll() is None

    def wait_ready(self, probe: Callable[[], bool], timeout: float) -> None:
        """Poll probe until it answers True; fail naming the log if the process dies or time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                code = self.popen.returncode if self.popen else None
                raise RuntimeError(
                    f"{self.name} exited (code {code}) before it was ready; log {self.log_path}:\n"
                    + log_tail(self.log_path)
                )
            try:
                if probe():
                    return
            except (httpx.HTTPError, OSError):
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(
            f"{self.name} not ready after {timeout:.0f}s; log {self.log_path}:\n" + log_tail(self.log_path)
        )

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the process group, then SIGKILL it after grace seconds."""
        if self.popen is None or self.popen.poll() is not None:
            return
        pgid = self.popen.pid
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.popen.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.popen.wait(timeout=grace)


def http_ok(url: str, headers: Mapping[str, str] | None = None) -> Callable[[], bool]:
    """A readiness probe: GET url answers 200."""

    def probe() -> bool:
        return httpx.get(url, headers=dict(headers or {}), timeout=2.0).status_code == 200

    return probe


def base_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without proxies (every call stays on loopback), plus extra."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in {"http_proxy", "https_proxy", "all_proxy"}}
    env["NO_PROXY"] = "127.0.0.1,localhost"
    env.update(extra or {})
    return env
