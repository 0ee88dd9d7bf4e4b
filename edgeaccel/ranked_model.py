"""``RankedModel``: the Model ``load()`` returns, on the best candidate of a ranking that loads, failing over
down the ranking at run time, reselecting on request, and adopting what background calibration measured better."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .errors import EdgeAccelError, ModelClosedError
from .executors.base import Executor, ExecutorInfo
from .model import FallbackEvent, Model, _fail, fails_over
from .modelinfo import ModelInfo
from .selection.selector import Candidate, Ranking

if TYPE_CHECKING:
    from concurrent.futures import Future

log = logging.getLogger("edgeaccel")


BUSY_GAP_S = 0.1  # a request ending less than this before the next starts: the caller is still at work


class RankedModel(Model):
    """A Model on the best candidate of a ranking that loads, with run-time failover: a request the executor
    fails (a runtime error, an unplugged device) is handed, with the same inputs, to the next candidate that
    loads, which then serves every later request (``fallbacks`` records it). A failed candidate is not tried
    again until the caller asks with ``reselect()``."""

    def __init__(
        self,
        executor: Executor,
        candidate: Candidate,
        ranking: Ranking,
        fallbacks: list[FallbackEvent],
        open_next: Callable[[Candidate], Executor] | None = None,
        strict: bool = False,
        failed: list[Candidate] | None = None,
    ) -> None:
        self._executor = executor
        self._candidate = candidate
        self._ranking = ranking
        self._fallbacks = fallbacks
        self._open_next = open_next
        self._strict = strict
        self._lock = threading.Lock()
        self._retired: list[Executor] = []
        self._failed = list(failed or [])  # candidates that failed to load or run: not retried until reselect()
        self._background = None  # edgeaccel.background.BackgroundCalibration, started by load()
        self._calls_lock = threading.Lock()
        self._in_flight = 0  # requests running now, and when the last one ended: background calibration waits
        self._last_done = 0.0  # while the model serves (``busy``)
        self._names = {id(executor): candidate.name}  # what each executor it ever served with is called
        self._set_io(executor)

    @property
    def info(self) -> ModelInfo:
        return self._candidate.artifact

    @property
    def executor(self) -> ExecutorInfo:
        base = self._executor.info
        return ExecutorInfo(base.runtime, base.version, base.device, base.precision, base.threads,
                            reason=self._candidate.reason, artifact=str(self._candidate.artifact.path),
                            details=base.details)

    @property
    def concurrency(self) -> int:
        """Requests the executor can work on at once (submit more to keep it busy)."""
        return self._executor.concurrency

    # -- running ---------------------------------------------------------------------------------------
    def busy(self, within_s: float = BUSY_GAP_S) -> bool:
        """Requests in flight, or one ended less than ``within_s`` ago (a caller running one after another)."""
        return self._in_flight > 0 or time.monotonic() - self._last_done < within_s

    def _entered(self) -> None:
        with self._calls_lock:
            self._in_flight += 1

    def _left(self, _=None) -> None:
        with self._calls_lock:
            self._in_flight -= 1
            self._last_done = time.monotonic()

    def _name(self, executor: Executor) -> str:
        return self._names.get(id(executor)) or self._candidate.name

    def _serve_with(self, executor: Executor, candidate: Candidate) -> None:
        """Install ``executor`` as the one serving (called with ``_lock`` held)."""
        self._names[id(executor)] = candidate.name
        self._executor, self._candidate = executor, candidate

    def _execute(self, arrays: list) -> tuple[list, str | None]:
        executor = self._executor
        self._entered()
        try:
            return executor.run(arrays), self._name(executor)
        except EdgeAccelError as exc:
            if not fails_over(exc):
                raise
            return self._run_fallback(executor, exc, arrays)
        finally:
            self._left()

    def _start(self, arrays: list, outer: Future, dequantize: bool, check_finite: bool) -> None:
        from concurrent.futures import Future

        executor = self._executor

        def done(inner: Future) -> None:
            exc = inner.exception()
            if exc is None:
                self._settle(outer, inner.result(), dequantize, check_finite, self._name(executor))
            elif fails_over(exc) and not self._strict and self._open_next is not None:
                # Loading the next candidate must not happen on a runtime's callback thread.
                threading.Thread(target=self._retry, args=(executor, exc, arrays, outer, dequantize, check_finite),
                                 daemon=True).start()
            else:
                _fail(outer, exc)

        self._entered()
        try:
            inner = executor.submit(arrays)
        except EdgeAccelError as exc:
            inner = Future()
            inner.set_exception(exc)
        except BaseException:
            self._left()
            raise
        inner.add_done_callback(self._left)
        inner.add_done_callback(done)

    def _retry(self, failed: Executor, exc: EdgeAccelError, arrays: list, outer: Future, dequantize: bool,
               check_finite: bool) -> None:
        try:
            results, executor = self._run_fallback(failed, exc, arrays)
        except BaseException as retry_exc:
            _fail(outer, retry_exc)
            return
        self._settle(outer, results, dequantize, check_finite, executor)

    def _run_fallback(self, failed: Executor, exc: EdgeAccelError, arrays: list) -> tuple[list, str]:
        """The executor failed at run time: hand the same inputs to the next candidate that loads, and to the
        one after it if that fails too, until one answers or none is left (then the caller gets the error)."""
        while True:
            if self._strict or self._open_next is None:
                raise exc
            with self._lock:
                if self._executor is failed:  # another thread may have switched already
                    self._switch(failed, exc)
                executor = self._executor
            try:
                return executor.run(arrays), self._name(executor)
            except EdgeAccelError as again:
                if not fails_over(again):
                    raise
                failed, exc = executor, again

    def _switch(self, failed: Executor, exc: EdgeAccelError) -> None:
        failed_name = self._candidate.name
        for candidate in self._ranking.candidates:
            if candidate is self._candidate or candidate in self._failed or not self._takes_same_inputs(candidate):
                continue
            try:
                executor = self._open_next(candidate)
            except EdgeAccelError as load_exc:
                self._failed.append(candidate)
                self._record("load", candidate.name, load_exc, None)
                continue
            self._failed.append(self._candidate)
            self._record("run", failed_name, exc, candidate.name)
            self._retired.append(failed)
            self._serve_with(executor, candidate)
            return
        self._record("run", failed_name, exc, None)
        raise exc

    def _takes_same_inputs(self, candidate: Candidate) -> bool:
        # a twin with other inputs (an int8 Edge TPU model beside its float CPU twin) cannot take these requests
        return tuple(t.dtype for t in candidate.artifact.inputs) == tuple(t.dtype for t in self._inputs)

    def reselect(self) -> ExecutorInfo:
        """Offer every candidate again, best-ranked first: a device that failed (unplugged, its driver
        restarted) and is back serves again. edgeaccel never does this by itself: a device that failed once
        is not trusted again until the caller says so. The failed list is cleared; a candidate that still
        fails to load is recorded in ``fallbacks`` and the next one is tried, down to the one running now,
        which is kept. Returns what runs afterwards (``model.executor``)."""
        if self._open_next is None:
            return self.executor
        with self._lock:
            if isinstance(self._executor, _Closed):
                raise ModelClosedError(f"{self.info.path.name} was closed", hint="load it again with edgeaccel.load")
            self._failed.clear()
            unloadable: list[tuple[Candidate, EdgeAccelError]] = []
            for candidate in self._ranking.candidates:
                if candidate is self._candidate:
                    break  # the best that loads is the one running
                if not self._takes_same_inputs(candidate):
                    continue
                try:
                    executor = self._open_next(candidate)
                except EdgeAccelError as exc:
                    self._failed.append(candidate)
                    unloadable.append((candidate, exc))
                    continue
                log.info("reselect: %s replaces %s", candidate.name, self._candidate.name)
                self._retired.append(self._executor)
                self._serve_with(executor, candidate)
                break
            for candidate, exc in unloadable:
                self._record("load", candidate.name, exc, self._candidate.name)
        return self.executor

    @property
    def calibration(self):
        """What background calibration did (``edgeaccel.background.BackgroundStatus``: waiting, measuring,
        kept, switched, ... with the reason), or None when it did not run for this model."""
        background = self._background
        return background.status if background is not None else None

    def wait_calibration(self, timeout: float | None = None):
        """Block until background calibration has finished; its status (None when it did not run)."""
        background = self._background
        return background.wait(timeout) if background is not None else None

    def _adopt(self, executor: Executor, candidate: Candidate, why: str) -> bool:
        """Serve from now on with ``executor`` (background calibration measured it better); False if closed.
        The one it replaces is retired, not closed: requests may still be running on it."""
        with self._lock:
            if isinstance(self._executor, _Closed):
                return False
            previous = self._candidate.name
            self._retired.append(self._executor)
            self._serve_with(executor, candidate)
        event = FallbackEvent(time.time(), "calibrate", previous, why, candidate.name)
        self._fallbacks.append(event)
        log.warning("background calibration: %s now serves %s (%s)", candidate.name, self.info.path.name, why)
        return True

    # -- lifetime ----------------------------------------------------------------------------------------
    def close(self) -> None:
        """Release every runtime object. Idempotent; run() afterwards raises ModelClosedError."""
        if self._background is not None:
            self._background.stop()
        with self._lock:
            executors = [self._executor, *self._retired]
            self._executor = _Closed(self._candidate.artifact)
            self._retired = []
        for executor in executors:
            executor.close()

    def __repr__(self) -> str:
        return f"<edgeaccel.Model {self.info.path.name} on {self._candidate.name}>"


class _Closed(Executor):
    runtime = "closed"
    formats = frozenset()

    def __init__(self, model: ModelInfo) -> None:
        self.model = model

    @classmethod
    def availability(cls, device=None):
        raise NotImplementedError

    @property
    def info(self) -> ExecutorInfo:
        return ExecutorInfo("closed", "", "-", "-")

    def run(self, inputs):
        raise ModelClosedError(f"{self.model.path.name} was closed", hint="load it again with edgeaccel.load")

    def close(self) -> None:
        pass
