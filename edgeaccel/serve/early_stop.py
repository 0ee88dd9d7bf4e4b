"""SIGTERM (or SIGINT) before the server listens: while the models load, and in the moment between the last load
and the event loop taking the signals over.

Without a handler the default action ends the process by the signal (exit -15, no last line): an orchestrator
that stops a pod still starting reads a crash, and no accounting is said. Nothing has been accepted yet, so
nothing can be lost: the load in progress is interrupted (the handler raises ``StoppedEarly``, which no
``except Exception`` around a load swallows), the models already loaded are closed, and the server exits 0
saying it stopped before serving. After the loads, a signal only marks the stop: ``server._serve`` looks at
``signalled`` once its own handlers are in place and stops before binding a port.

The CLI installs the handlers (``watch()``) before it builds its parser, which imports numpy and the runtimes'
names (a quarter of a second): only the interpreter's own start, before any of our code runs, is left to the
default action."""

from __future__ import annotations

import os
import signal
import sys


AGAIN_S = 0.01  # a signal whose exception was swallowed comes again after this long


class StoppedEarly(BaseException):
    """The server was told to stop while its models loaded."""


class EarlyStop:
    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.signalled: str | None = None  # the signal's name once one came
        self.loading = False  # a signal now raises StoppedEarly
        self.inside = False  # within the block (the loads)
        self._hook = sys.unraisablehook

    def install(self) -> EarlyStop:
        for sig in self.SIGNALS:
            signal.signal(sig, self._handle)
        return self

    def __enter__(self) -> EarlyStop:
        """Loading: a signal interrupts it (one that came earlier, at once). The handlers stay installed after
        the block, only marking, until the event loop takes the signals over."""
        self.install()
        self._hook, sys.unraisablehook = sys.unraisablehook, self._unraisable
        self.inside = self.loading = True
        if self.signalled:
            raise StoppedEarly(self.signalled)
        return self

    def __exit__(self, *exc) -> None:
        self.inside = self.loading = False
        sys.unraisablehook = self._hook

    def _unraisable(self, unraisable) -> None:
        """The signal's exception met code that cannot raise (a weakref callback inside importlib, a __del__):
        Python printed "Exception ignored in ..." with a traceback and the load went on. Nothing is printed; the
        signal comes again a moment later, from another thread (any Python code run from here, this hook
        included, would meet it before the hook returns), to interrupt the load at a point that can raise."""
        if not isinstance(unraisable.exc_value, StoppedEarly):
            self._hook(unraisable)
            return
        import threading

        threading.Timer(AGAIN_S, self._again).start()

    def _again(self) -> None:  # in the timer's thread; the handler, in the main thread, checks `inside` itself
        if self.inside:
            self.loading = True
            os.kill(os.getpid(), signal.Signals[self.signalled or "SIGTERM"])

    def _handle(self, signum: int, frame) -> None:
        self.signalled = signal.Signals(signum).name
        if self.loading and self.inside:  # after the loads a signal only marks (server.py looks at it)
            self.loading = False  # a second signal while the first unwinds must not raise inside the cleanup
            raise StoppedEarly(self.signalled)


_WATCHING: list[EarlyStop] = []


def watch() -> EarlyStop:
    """The process's EarlyStop, its handlers installed (one per process: the CLI's and the command's are one)."""
    if not _WATCHING:
        _WATCHING.append(EarlyStop().install())
    return _WATCHING[0]


def exiting() -> None:
    """The server has stopped: further SIGTERMs (an orchestrator's second one) are ignored while the process
    exits. Ignored, not handled: at its finalization Python puts the default action back for every signal with a
    Python handler, and a SIGTERM during the rest of the teardown (unloading the runtimes' libraries takes a
    while) ended a clean exit with -15. SIGKILL still ends it."""
    for sig in EarlyStop.SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
