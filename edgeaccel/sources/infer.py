"""The pipeline's infer stage (``pipeline.Pipeline`` runs it in its own thread): each prepared frame into the
model with its source's carried state, at most ``max_in_flight`` requests in the model, a slot given back the
moment a result is ready (not when the finish stage gets to it), so that no request waits inside the executor
behind another. A model that runs one request at a time is run in this thread itself (no hand-off to the
executor's thread and back); a scheduled model is always submitted, so that a stop never waits on it."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from ..errors import EdgeAccelError, ModelClosedError
from .frame import Frame
from .queues import Closed
from .state import StateCarry, with_state

END = object()  # the end of every source, through the stages


@dataclass
class Job:
    frame: Frame
    source: int
    segment: int
    inputs: Any = None
    meta: Any = None
    submitted: float = 0.0  # monotonic: into the model
    done: float = 0.0  # monotonic: its outputs ready (the future's callback)


class InferStage:
    """Mixed into Pipeline: the infer thread's loop and what it needs (the Pipeline's queues, slots and
    state carries)."""

    # set by Pipeline.__init__
    model: Any
    sources: list
    _slots: threading.Semaphore
    _stop: threading.Event
    _prepared: Any  # DropQueue of prepared Jobs
    _inflight: Any  # DropQueue of (Job, Future)
    _carry: list
    _carries_state: bool
    _inline: bool
    _infer_s: float
    _busy_until: float

    def _infer_loop(self) -> None:
        segments = [0] * len(self.sources)
        pending: list[Any] = [None] * len(self.sources)  # the source's last request: its outputs are the state
        while True:
            self._take_slot()
            # the next request starts as soon as its job is ready: the prepare stage times the next frame by
            # this (set before the job leaves the prepared queue, which is what wakes that stage)
            self._busy_until = time.monotonic() + self._infer_s
            job = self._prepared.get()
            if job is END:
                self._slots.release()
                self._inflight.put_end(END)
                return
            future = None
            if job.frame.error is None:
                carry = self._carry[job.source]
                if carry is not None:
                    carry_in = self._state_for(job, carry, pending, segments)
                    inputs = with_state(job.inputs, carry_in, len(self.model.inputs))
                else:
                    inputs = job.inputs
                try:
                    submitted = job.submitted = time.monotonic()
                    self._busy_until = submitted + self._infer_s
                    future = self._run_inline(inputs) if self._inline else self.model.submit(inputs)
                    future.add_done_callback(lambda _, t=submitted, j=job: self._served(t, j))
                except ModelClosedError:
                    self._slots.release()
                    raise
                except EdgeAccelError as exc:
                    job.frame.error = exc
                if carry is not None:
                    pending[job.source] = future
            if future is None:  # nothing went into the model
                self._slots.release()
            self._inflight.put((job, future))

    def _run_inline(self, inputs) -> Any:
        """``model.run`` in this thread, as a finished Future (the finish stage takes both kinds alike)."""
        from concurrent.futures import Future

        future: Future = Future()
        try:
            future.set_result(self.model.run(inputs))
        except ModelClosedError:
            raise
        except Exception as exc:  # what submit's future would hold: the frame fails, the pipeline goes on
            future.set_exception(exc)
        return future

    def _take_slot(self) -> None:
        """Wait until fewer than ``max_in_flight`` requests are in the model; raises Closed on a stop."""
        while not self._slots.acquire(timeout=0.1):
            if self._stop.is_set():
                raise Closed

    def _state_for(self, job: Job, carry: StateCarry, pending: list, segments: list) -> dict:
        previous = pending[job.source]
        if previous is not None and self._carries_state:
            pending[job.source] = None
            try:
                carry.update(self._wait(previous))
            except Closed:
                raise
            except Exception:
                carry.reset()  # a failed frame: start again from zeros rather than from a stale state
        if job.segment != segments[job.source]:  # the stream was cut and came back: a new scene
            segments[job.source] = job.segment
            carry.reset()
        return carry.values

    def _served(self, submitted: float, job: Job) -> None:
        job.done = time.monotonic()
        self._infer_s = average(self._infer_s, job.done - submitted)
        self._slots.release()

    def _wait(self, future):
        """The future's result; raises Closed when the pipeline stops meanwhile (a scheduler may hold a request
        for up to its max_wait_s: a stop does not wait for it)."""
        from concurrent.futures import TimeoutError as FutureTimeout

        while True:
            try:
                return future.result(timeout=0.2)
            except FutureTimeout:
                if self._stop.is_set():
                    raise Closed from None


def average(previous: float, sample: float, weight: float = 0.2) -> float:
    """Exponential moving average; the first sample sets it."""
    return sample if previous == 0.0 else previous + weight * (sample - previous)
