"""Background calibration: ``load()`` serves at once with the rules' choice, then measures the other feasible
candidates in a background thread and switches when the measurement is conclusive.

Like OpenVINO AUTO's start-up (serve on the CPU while the accelerator compiles), but across runtimes and with
accuracy checked: the thread runs the same calibration as ``calibrate=True`` (the reference first, every output
of every candidate compared with it by the guard, on the decoded results when the vision task is known, with
the load's task and accuracy_tolerance; alternating timed blocks), with a bounded budget and a bounded share of
one core (a pause after each block), and only while the model is idle (``YIELD_S``), beside the requests being
served. It switches only to a candidate that passed the guard (``edgeaccel.selection.guard``: calibration's comparison
with the reference, or a check made before the switch where calibration could not compare it) and is faster
(or, for goal="efficiency", cheaper) than the one serving by more than ``MARGIN`` in the same interleaved
measurement; and away from the one serving when its answers stray. The
switch is visible (``model.executor`` names the measurement, ``model.fallbacks`` records a "calibrate"
event, the log says so), and the measurements go to the cache, where the next load finds them.

Off with ``calibrate=False`` or ``$EDGEACCEL_CALIBRATE=off``; ``calibrate=True`` measures before ``load``
returns.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from typing import TYPE_CHECKING

from ..clock import Clock, MonotonicClock
from ..errors import EdgeAccelError

if TYPE_CHECKING:  # the measuring imports wait for the thread: a load that never measures does not pay for them
    from .calibration import CalibrationPlan
    from .selector import Candidate, Measurement, Ranking

log = logging.getLogger("edgeaccel.calibration")

ENV = "EDGEACCEL_CALIBRATE"  # "off" turns background calibration off for every load that does not ask for it
DELAY_S = 2.0  # serve alone this long first: a short-lived process (a CLI run) never starts measuring
MARGIN = 0.10  # a switch needs the other candidate this much better in the same measurement
CPU_SHARE = 0.5  # of one core, for the measuring thread while it times (its pause after each block)
BUDGET_S = 6.0
# Before opening each candidate and before each timed block the thread waits while the model serves (requests
# in flight, or one ended within Model.busy's gap): measuring beside a saturated model took about a fifth of its
# throughput for the budget's seconds. After this much waiting in all it measures anyway, at its bounded share
# (a model that never idles still gets its measurement). The waits are left out of the budget.
YIELD_S = 30.0
YIELD_POLL_S = 0.05
# What the thread's waits run on: the start delay, the polls while the model serves and the seconds it leaves
# out of the budget (the scheduler takes the same clock). A test sets a simulated one here to drive the waits
# step by step; timed runs stay on the performance counter, since they measure the runtimes themselves.
CLOCK: Clock = MonotonicClock()


def enabled(calibrate) -> bool:
    """calibrate=None (the default) means background unless $EDGEACCEL_CALIBRATE says off."""
    if calibrate == "background":
        return True
    if calibrate is None:
        return os.environ.get(ENV, "").strip().lower() not in ("off", "0", "false", "no")
    return False


@dataclass
class BackgroundStatus:
    """What the background calibration did, for ``model.calibration``."""

    state: str = "waiting"  # waiting, measuring, kept, switched, skipped, failed, stopped
    reason: str = ""
    measurements: dict = field(default_factory=dict)  # key -> Measurement
    started: float | None = None
    finished: float | None = None
    waited_s: float = 0.0  # time it held back while the model served

    def __str__(self) -> str:
        text = f"{self.state}: {self.reason}" if self.reason else self.state
        # "measuring" while it waits for the model to idle: say so, or a saturated model looks measured beside
        return f"{text} (held back {self.waited_s:g} s while the model served)" if self.waited_s else text


_RUNNING: weakref.WeakSet = weakref.WeakSet()


class BackgroundCalibration:
    """Measures the candidates of ``ranking`` for ``model`` in a daemon thread, then switches it if conclusive.

    measure(plan) -> measurements; rerank(measurements) -> Ranking; store(measurements) keeps them."""

    def __init__(self, model, measure: Callable[[CalibrationPlan], dict[str, Measurement]],
                 rerank: Callable[[dict[str, Measurement]], Ranking], store: Callable[[dict], None] | None,
                 open_candidate: Callable[[Candidate], object], delay_s: float | None = None,
                 budget_s: float | None = None, cpu_share: float | None = None, yield_s: float | None = None,
                 guard=None, clock: Clock | None = None) -> None:
        self._model = weakref.ref(model)
        self._measure, self._rerank, self._store, self._open = measure, rerank, store, open_candidate
        self._guard = guard  # edgeaccel.selection.guard.ModelGuard: what the candidate switched to must pass
        # None: the module's figure at construction (read then, so that a test or an app can set it)
        self._delay_s = DELAY_S if delay_s is None else delay_s
        self._budget_s = BUDGET_S if budget_s is None else budget_s
        self._cpu_share = CPU_SHARE if cpu_share is None else cpu_share
        self._stop = threading.Event()
        self._yield_s = YIELD_S if yield_s is None else yield_s
        self._clock = CLOCK if clock is None else clock
        self._waited = 0.0  # seconds spent waiting for the model to idle (left out of the budget's clock)
        self.status = BackgroundStatus()
        self._thread = threading.Thread(target=self._run, name="edgeaccel-calibration", daemon=True)

    def start(self) -> BackgroundCalibration:
        _RUNNING.add(self)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop waiting or measuring (the block under way finishes) and wait for the thread."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def wait(self, timeout: float | None = None) -> BackgroundStatus:
        """Block until the calibration has finished (tests, or an app that wants the measured choice now)."""
        self._thread.join(timeout)
        return self.status

    def _run(self) -> None:
        if self._pause(self._delay_s):
            self._finish("stopped", "the model was closed before measuring began")
            return
        from .calibration import CalibrationPlan

        self.status.state, self.status.started = "measuring", time.time()
        block_s = 0.05
        plan = CalibrationPlan(budget_s=self._budget_s, block_s=block_s,
                               pause_s=block_s * (1 / max(self._cpu_share, 0.05) - 1), stop=self._stop,
                               before_block=self._wait_for_idle, clock=lambda: time.perf_counter() - self._waited)
        try:
            measurements = self._measure(plan)
        except Exception as exc:  # never let measuring hurt the model that serves
            log.warning("background calibration failed: %s: %s", type(exc).__name__, exc)
            self._finish("failed", f"{type(exc).__name__}: {exc}")
            return
        if self._stop.is_set():
            self._finish("stopped", "the model was closed while measuring")
            return
        self.status.measurements = measurements
        if self._store is not None:
            self._store(measurements)
        if self._guard is not None:
            self._guard.know(measurements)
        model = self._model()
        if model is None:
            return
        self._decide(model, self._rerank(measurements))

    def _wait_for_idle(self) -> None:
        """Hold the measurement while the model serves (up to ``yield_s`` in all), so that measuring does not
        take from the requests."""
        while self._waited < self._yield_s and not self._stop.is_set():
            model = self._model()
            if model is None or not model.busy():
                return
            del model  # the wait must not keep a model the app dropped alive
            start = self._clock.now()
            self._pause(YIELD_POLL_S)
            self._waited += self._clock.now() - start
            self.status.waited_s = round(self._waited, 2)

    def _pause(self, seconds: float) -> bool:
        """Wait ``seconds`` on the clock; True when ``stop()`` was called. On the real clock ``stop()`` ends the
        wait at once; a simulated clock's ``sleep`` is its own (it returns when the clock has moved)."""
        if getattr(self._clock, "simulated", False):
            self._clock.sleep(seconds)
            return self._stop.is_set()
        return self._stop.wait(seconds)

    def _decide(self, model, ranking: Ranking) -> None:
        current = model._candidate
        serving = next((c for c in ranking.candidates if c.key == current.key), None)
        best = next((c for c in ranking.candidates if model._takes_same_inputs(c)), None)
        if best is None:
            self._finish("kept", "no measured candidate takes these inputs")
            return
        if serving is not None and best.key == current.key:
            self._finish("kept", f"{current.name} measured best ({serving.reason})")
            return
        if serving is not None and not _conclusive(best, serving):
            self._finish("kept", f"{best.name} measured within {MARGIN:.0%} of {current.name}: not conclusive")
            return
        why = (f"{current.name} was not measured eligible: "
               f"{next((r.reason for r in ranking.rejected if r.name == current.name), 'no measurement')}"
               if serving is None else f"{best.name} measured better than {current.name} by more than "
               f"{MARGIN:.0%} ({best.reason}; serving: {serving.reason})")
        try:
            executor = self._open(best)
        except EdgeAccelError as exc:
            self._finish("kept", f"{best.name} measured better but failed to load: {exc.message}")
            return
        verdict = self._verdict(best, executor)
        if not verdict.ok:
            executor.close()
            log.warning("background calibration keeps %s: %s measured better but %s", current.name, best.name,
                        verdict)
            self._finish("kept", f"{best.name} measured better but {verdict}")
            return
        if not model._adopt(executor, replace(best, reason=f"background calibration: {best.reason}"), why):
            executor.close()
            self._finish("stopped", "the model was closed before the switch")
            return
        self._finish("switched", why)

    def _verdict(self, candidate: Candidate, executor):
        """Whether ``executor`` may serve: calibration's own comparison with the reference where it made one
        (an executor it could not compare, or an adaptive one's twins, are checked now), never unchecked."""
        from .guard import Verdict, from_measurement

        if self._guard is not None:
            return self._guard.verdict(candidate, executor)
        known = from_measurement(self.status.measurements.get(candidate.key))
        return known or Verdict(False, "its answers were not compared with a reference")

    def _finish(self, state: str, reason: str) -> None:
        self.status.state, self.status.reason, self.status.finished = state, reason, time.time()
        log.info("background calibration %s: %s", state, reason)
        _RUNNING.discard(self)


def _conclusive(best: Candidate, serving: Candidate) -> bool:
    """The ranking cost (score[1]) of both is comparable (score[0] == 0: measured, same units) and better by
    more than MARGIN."""
    if not (best.score and serving.score) or best.score[0] != 0 or serving.score[0] != 0:
        return best.score < serving.score
    return best.score[1] * (1 + MARGIN) < serving.score[1]


@atexit.register
def _stop_all() -> None:
    """At interpreter exit, stop every measuring thread before the runtimes are torn down beneath it."""
    for calibration in list(_RUNNING):
        calibration.stop(timeout=5.0)
