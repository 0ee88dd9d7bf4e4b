"""Dynamic batching: requests for one model that arrive close together run as one batch.

Only for a model whose every input and output has a dynamic first dimension (``?`` x ...): requests are
joined along that dimension, run once, and the outputs split back by each request's rows. The batcher waits
at most ``window_s`` after the first request of a batch for others, never past the earliest deadline's budget
less the model's measured latency, and never joins more than ``max_rows`` rows. Requests whose other
dimensions differ cannot be joined: they go in separate batches. A model with a fixed batch of 1 (most edge
models: 1x224x224x3) is never batched: each request runs as it came (the model's metadata says so).

One client's request must never fail or change another's answer, so joining is conservative: a request whose
inputs disagree on their first dimension (2 rows of ``a``, 3 of ``b``) runs alone, and its error, if the model
refuses it, is its own; a joined batch the model fails (one request's values may be what it refused: an index
out of range) runs again request by request, so that only that request gets the error; a batch whose outputs
do not have one row per input row (first dimensions that are dynamic but no batch) runs again request by
request, and the model is not batched again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import numpy as np

from ..errors import DeadlineExceededError, InferenceTimeoutError, ModelClosedError, OverloadedError

log = logging.getLogger("edgeaccel.serve")
# a joined batch that failed for one of these failed for every request in it: running each alone would not help
_NOT_RETRIED = (DeadlineExceededError, InferenceTimeoutError, ModelClosedError, OverloadedError)


def batchable(model: Any) -> tuple[bool, str]:
    """Whether requests for ``model`` can be joined, and why (or why not)."""
    tensors = [*model.inputs, *model.outputs]
    fixed = [t.name for t in tensors if t.unranked or not t.shape or t.shape[0] is not None]
    if fixed:
        first = next(t for t in tensors if t.name == fixed[0])
        dim = "no declared shape" if first.unranked or not first.shape else f"a fixed batch of {first.shape[0]}"
        return False, f"not batched: '{first.name}' has {dim}; each request runs as it came"
    return True, "batched dynamically along the first dimension"


class Batcher:
    """Joins requests for one model; ``submit(arrays, deadline_at)`` -> Future of the request's output list."""

    def __init__(self, run_batch: Callable[[list, float | None], Future], max_rows: int, window_s: float,
                 on_batch: Callable[[int], None] | None = None, latency_s: Callable[[], float] | None = None) -> None:
        self._run_batch = run_batch
        self._max_rows = max(1, int(max_rows))
        self._window_s = max(0.0, float(window_s))
        self._on_batch = on_batch
        self._latency_s = latency_s or (lambda: 0.0)
        self._cond = threading.Condition()
        self._queue: deque = deque()  # (arrays, rows, deadline_at, future, arrived)
        self._closed = False
        self._joins = True  # False once a batch's outputs did not split by rows: every request runs alone
        self._thread = threading.Thread(target=self._loop, name="edgeaccel-serve-batcher", daemon=True)
        self._thread.start()

    def submit(self, arrays: list[np.ndarray], deadline_at: float | None) -> Future:
        future: Future = Future()
        with self._cond:
            if self._closed:  # unloaded between the request's lookup and here: as a queued request of a closed model
                raise ModelClosedError("the model was unloaded", hint="load it again")
            self._queue.append((arrays, _rows(arrays), deadline_at, future, time.monotonic()))
            self._cond.notify()
        return future

    def close(self) -> None:
        """Run what is queued, then stop."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue and self._closed:
                    return
                first = self._queue[0]
                until = first[4] + self._window_s
                deadlines = [item[2] for item in self._queue if item[2] is not None]
                if deadlines:  # leave the batch time to run before its earliest deadline
                    until = min(until, min(deadlines) - self._latency_s())
                alone = first[1] is None or not self._joins  # nothing will join it: no wait
                while not alone and not self._closed and sum(item[1] or 0 for item in self._queue) < self._max_rows:
                    left = until - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                batch = self._take()
            self._start(batch)

    def _take(self) -> list:
        """The oldest request and those after it with the same inner shapes, up to max_rows rows."""
        first = self._queue.popleft()
        batch, rows = [first], first[1]
        if rows is None or not self._joins:
            return batch
        inner = [a.shape[1:] for a in first[0]]
        keep = deque()
        while self._queue:
            item = self._queue.popleft()
            if item[1] is not None and rows + item[1] <= self._max_rows and [a.shape[1:] for a in item[0]] == inner:
                batch.append(item)
                rows += item[1]
            else:
                keep.append(item)
        self._queue.extendleft(reversed(keep))
        return batch

    def _start(self, batch: list) -> None:
        if self._on_batch is not None:
            self._on_batch(sum(item[1] or 1 for item in batch))
        if len(batch) == 1:
            arrays = batch[0][0]
        else:
            arrays = [np.concatenate([item[0][i] for item in batch]) for i in range(len(batch[0][0]))]
        deadlines = [item[2] for item in batch if item[2] is not None]
        try:
            outer = self._run_batch(arrays, min(deadlines) if deadlines else None)
        except BaseException as exc:
            for item in batch:
                item[3].set_exception(exc)
            return

        def split(done: Future) -> None:
            exc = done.exception()
            if exc is not None and len(batch) > 1 and not isinstance(exc, _NOT_RETRIED):
                for item in batch:  # one request's values may be what the model refused: each runs alone,
                    self._start([item])  # and only that one gets the error
                return
            if exc is not None:
                for item in batch:
                    item[3].set_exception(exc)
                return
            result = done.result()
            outputs, executor = list(result), getattr(result, "executor", None)
            if len(batch) == 1:  # as it came (its rows may be None: inputs that disagree on the first dimension)
                batch[0][3].set_result(Rows(outputs, executor))
                return
            if any(np.ndim(o) == 0 or len(o) != sum(item[1] for item in batch) for o in outputs):
                self._unjoin(batch, outputs)
                return
            offset = 0
            for item in batch:
                rows = item[1]
                item[3].set_result(Rows((o[offset:offset + rows] for o in outputs), executor))
                offset += rows

        outer.add_done_callback(split)

    def _unjoin(self, batch: list, outputs: list) -> None:
        """The joined run's outputs do not have one row per input row: splitting them would hand each client
        rows of another's answer. Run each request alone instead, and join nothing from now on."""
        if self._joins:
            self._joins = False
            log.warning("outputs of shapes %s do not split into the %d rows of a batch: requests for this model "
                        "now run one by one", [np.shape(o) for o in outputs], sum(item[1] for item in batch))
        for item in batch:
            self._start([item])


class Rows(list):
    """One request's share of a batch's outputs, and the executor that ran the batch."""

    def __init__(self, outputs, executor: str | None = None) -> None:
        super().__init__(outputs)
        self.executor = executor


def _rows(arrays: list[np.ndarray]) -> int | None:
    """The rows a request adds to a batch, or None when its inputs disagree on the first dimension (or have
    none): such a request is no batch of rows and runs alone."""
    firsts = {a.shape[0] if a.ndim else None for a in arrays}
    return firsts.pop() if len(firsts) == 1 and None not in firsts else None
