"""Start ``edgeaccel serve`` in a subprocess and find where it listens: for the tests and tools/bench_serve.py,
which must talk to a real server as a client would, and bound it in time.

    with ServerProcess(["models/", "--port", "0", "--grpc-port", "0"]) as server:
        server.http   # "127.0.0.1:PORT"
        server.grpc   # "127.0.0.1:PORT" or None
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

READY = re.compile(r"edgeaccel serve: ready http://(?P<http>\S+)(?: grpc (?P<grpc>\S+))?")


class ServerProcess:
    def __init__(self, args: list[str], env: dict | None = None, start_timeout_s: float = 90.0,
                 pythonpath: str | None = None, cwd: str | None = None) -> None:
        """``pythonpath``: a folder searched first (a plug-in's); to serve from another checkout of edgeaccel,
        give it as ``cwd`` too (``python -m`` looks in its working folder before the path)."""
        self.args = [str(a) for a in args]
        self.cwd = cwd
        self.env = dict(os.environ if env is None else env)
        root = str(Path(__file__).resolve().parents[2])
        self.env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, root, self.env.get("PYTHONPATH")) if p)
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen | None = None
        self.http: str | None = None
        self.grpc: str | None = None
        self.stdout_lines: list[str] = []
        self.stderr_lines: list[str] = []
        self._ready = threading.Event()

    def start(self) -> ServerProcess:
        self.proc = subprocess.Popen([sys.executable, "-m", "edgeaccel", "serve", *self.args], env=self.env,
                                     cwd=self.cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     bufsize=1)
        threading.Thread(target=self._read, args=(self.proc.stdout, self.stdout_lines, True), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, self.stderr_lines, False), daemon=True).start()
        deadline = time.monotonic() + self.start_timeout_s
        while not self._ready.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"edgeaccel serve did not start (exit {self.proc.returncode}):\n"
                                   + "".join(self.stderr_lines[-30:]))
        return self

    def _read(self, stream, lines: list[str], watch: bool) -> None:
        for line in stream:
            lines.append(line)
            if watch and not self._ready.is_set():
                m = READY.search(line)
                if m:
                    self.http, self.grpc = m["http"], m["grpc"]
                    self._ready.set()

    @property
    def url(self) -> str:
        return f"http://{self.http}"

    def terminate(self, timeout_s: float = 60.0) -> int:
        """SIGTERM, then wait for the graceful exit (killed if it takes longer); the exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.kill()
