"""What a long command is doing now: one transient line on stderr, for `bench`, `tune`, `check` and `convert`.

The project's convention for progress (``evaluation.progress``, `bench`'s bar before this): drawn only when
stderr is a terminal (a log or a pipe gets nothing, so captured output stays the answer alone), off under
``--json`` and ``--no-progress``. The line names the step ("loading openvino:GPU (2/5)"), draws a bar where the
step counts something, and says how long the step has run, redrawn every second by a thread: a step that
takes minutes (a model compiling, calibration measuring every executor) still shows it is alive. It is
erased when the command ends, so the answer printed after it stands alone.
"""

from __future__ import annotations

import sys
import threading
import time

WIDTH = 24  # characters of the bar
TICK_S = 1.0  # the elapsed time is redrawn this often
REDRAW_S = 0.1  # a count is drawn at most this often


def add_progress_argument(p) -> None:
    p.add_argument("--no-progress", action="store_true",
                   help="no status line on stderr (drawn only on a terminal, never with --json)")


def wanted(args, stream=None) -> bool:
    """Whether a command given ``args`` shows progress on ``stream`` (stderr): the project's convention."""
    stream = stream or sys.stderr
    if getattr(args, "no_progress", False) or getattr(args, "json", False):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


class Status:
    """The transient status line of one command (``command``: "bench", "tune"...). A no-op when disabled."""

    def __init__(self, command: str, enabled: bool, stream=None) -> None:
        self.command, self.enabled = command, enabled
        given = stream or sys.stderr
        self.stream = _own_copy(given) if enabled else None
        self._owned = self.stream is not given
        self._lock = threading.Lock()
        self._step = ""
        self._count: tuple[int, int] | None = None
        self._since = self._drawn = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Status:
        if self.enabled:
            self._thread = threading.Thread(target=self._tick, name=f"edgeaccel-{self.command}-status", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def step(self, text: str) -> None:
        """A new step: its name, no count yet, its clock from now."""
        with self._lock:
            self._step, self._count, self._since = text, None, time.monotonic()
        self._draw()

    def count(self, done: int, total: int) -> None:
        """How far the current step is (a ``bench`` progress callback: (done, total)). Called from a timed
        loop: it stores the count and draws at most every REDRAW_S, so the terminal costs the loop little."""
        with self._lock:
            self._count = (done, total)
            due = time.monotonic() - self._drawn >= REDRAW_S or done >= total
        if due:
            self._draw()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
            self._thread = None
        if self.enabled:
            with self._lock:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
                if self._owned:
                    self.stream.close()
            self.enabled = False

    def line(self) -> str:
        """The text drawn now (without the carriage return)."""
        with self._lock:
            step, count, since = self._step, self._count, self._since
        text = f"{self.command}: {step}"
        if count is not None:
            done, total = count
            filled = int(WIDTH * min(done, total) / max(total, 1))
            text += f" [{'#' * filled}{'.' * (WIDTH - filled)}] {done}/{total}"
        return text + f"  {time.monotonic() - since:.0f} s"

    def _draw(self) -> None:
        if not self.enabled or not self._step:
            return
        text = self.line()
        with self._lock:
            if self.enabled:
                self.stream.write("\r\x1b[K" + text)
                self.stream.flush()
                self._drawn = time.monotonic()

    def _tick(self) -> None:
        while not self._stop.wait(TICK_S):
            try:
                self._draw()
            except (OSError, ValueError):  # the terminal went away: the command goes on without its line
                return


def _own_copy(stream):
    """The terminal behind ``stream`` on a descriptor of its own: the commands silence the runtimes' native
    logging by pointing descriptor 2 at a file while they load (``native_log``), and the status line must
    still reach the terminal then, not be replayed as a log line afterwards."""
    import os

    try:
        return os.fdopen(os.dup(stream.fileno()), "w", buffering=1, encoding="utf-8", errors="replace")
    except (AttributeError, OSError, ValueError):  # no descriptor (a StringIO): write to it as it is
        return stream
