"""Jetson's ``tegrastats`` run as a child process: it prints one line per ``--interval`` milliseconds (GR3D_FREQ
is the GPU load, RAM, per-core CPU, rails, temperatures), read on a thread and parsed by ``parse_tegrastats``.

The tool is looked for below the root (``/usr/bin/tegrastats`` on JetPack), so that a test's fake tree can hold
a stand-in script that prints recorded lines; a tree without it is a machine that is not a Jetson.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

from .tegrastats import TegraStats, parse_tegrastats

TEGRASTATS = "/usr/bin/tegrastats"
STOP_WAIT_S = 2.0


class TegrastatsProcess:
    """``start()`` runs tegrastats below ``root`` (or says why not); ``stats`` holds every line parsed so far."""

    def __init__(self, root: str | os.PathLike = "/", interval_s: float = 1.0) -> None:
        self.path = Path(root) / TEGRASTATS.lstrip("/")
        self.interval_ms = max(100, int(round(interval_s * 1000)))  # tegrastats' unit; shorter is noise
        self.stats: list[TegraStats] = []
        self._process: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> str | None:
        """None once it runs, else why it does not."""
        if not self.path.is_file():
            return f"{TEGRASTATS} is not there (not a Jetson, or JetPack's tools are not installed)"
        if not os.access(self.path, os.X_OK):
            return f"{TEGRASTATS} is not executable by this user"
        try:
            self._process = subprocess.Popen([str(self.path), "--interval", str(self.interval_ms)],
                                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                             stdin=subprocess.DEVNULL, text=True, errors="replace")
        except OSError as exc:
            return f"{TEGRASTATS} could not be started: {exc.strerror or exc}"
        self._reader = threading.Thread(target=self._read, name="edgeaccel-tegrastats", daemon=True)
        self._reader.start()
        return None

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            if line.strip():
                self.stats.append(parse_tegrastats(line))  # list.append is atomic under the GIL

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if self._reader is not None:
            self._reader.join(STOP_WAIT_S)
        if process.stdout is not None:
            process.stdout.close()
