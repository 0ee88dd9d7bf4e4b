"""A one-line progress bar on stderr, drawn only on a terminal (a log or a pipe gets nothing)."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int, label: str, stream=None, enabled: bool | None = None) -> None:
        self.total, self.label = total, label
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.done, self._shown = 0, 0.0

    def step(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if self.enabled and (now - self._shown > 0.1 or self.done >= self.total):
            self._shown = now
            width = 24
            filled = int(width * self.done / max(self.total, 1))
            self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total}")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
