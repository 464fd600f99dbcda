"""Running ``stablearena serve`` as a child process (tests, benchmarks, acceptance runs).

:class:`ServerProcess` starts the command on a free port (``--port 0``), reads the admin key
(first start) and the address it prints, waits until ``/healthz`` answers, and can be killed
with SIGKILL (the crash tests) or stopped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

__all__ = ["ServerProcess"]


class ServerProcess:
    """``stablearena serve --db DB --port 0 [args]`` in a child process."""

    def __init__(
        self, db: str, *args: str, env: dict[str, str] | None = None, cwd: str | Path | None = None
    ) -> None:
        self.db = db
        self.args = [str(a) for a in args]
        self.env = {**os.environ, **(env or {})}
        src = str(Path(__file__).resolve().parents[2])
        self.env["PYTHONPATH"] = src + os.pathsep + self.env.get("PYTHONPATH", "")
        self.cwd = cwd
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.admin_key: str | None = None
        self.lines: list[str] = []
        self.stderr: list[str] = []

    def start(self, timeout: float = 120.0) -> ServerProcess:
        cmd = [
            sys.executable,
            "-m",
            "stablearena",
            "serve",
            "--db",
            self.db,
            "--port",
            "0",
            *self.args,
        ]
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            cwd=self.cwd,
        )
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        deadline = time.time() + timeout
        assert self.proc.stdout is not None
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"the server exited with {self.proc.returncode}: {''.join(self.stderr)[-3000:]}"
                    )
                continue
            self.lines.append(line)
            text = line.strip()
            if text.startswith("sa_"):
                self.admin_key = text
            if "listening on http://" in text:
                self.url = text.split("listening on ", 1)[1].split()[0]
                break
        threading.Thread(target=self._drain_stdout, daemon=True).start()
        while time.time() < deadline:
            try:
                if httpx.get(self.url + "/healthz", timeout=5).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited: {''.join(self.stderr)[-3000:]}")
            time.sleep(0.05)
        raise RuntimeError(f"the server did not answer within {timeout} s")

    def _drain_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def _drain_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs (a crash)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
