"""The Model: one inference API over whichever executor was chosen, with visible, never silent, fallback."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import EdgeAccelError, ExecutorError, ModelClosedError
from .executors.base import Executor, ExecutorInfo
from .modelinfo import ModelInfo, TensorSpec
from .selector import Candidate, Ranking
from .tensors import InputBinder, Outputs, aliases, check_outputs_finite, dequantize_array

if TYPE_CHECKING:  # concurrent.futures is imported by the asynchronous path only (start-up memory)
    from concurrent.futures import Future

log = logging.getLogger("edgeaccel")


@dataclass(frozen=True)
class FallbackEvent:
    """A candidate that failed and what took over from it."""

    when: float  # time.time()
    stage: str  # "load" or "run"
    failed: str  # candidate name, e.g. "openvino:CPU"
    error: str
    replaced_by: str | None

    def __str__(self) -> str:
        to = f" -> {self.replaced_by}" if self.replaced_by else ""
        return f"{self.failed} failed at {self.stage}: {self.error.splitlines()[0]}{to}"


class Model:
    """A loaded model. Build one with ``edgeaccel.load``; use it as a context manager or call ``close()``.

    ``run`` takes one array, a list in input order, or a dict by input name, and is safe to call from many
    threads at once.
    """

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
        self._failed = list(failed or [])  # candidates that failed to load or run: never retried
        self._set_io(executor)

    def _set_io(self, executor: Executor) -> None:
        self._inputs = executor.inputs
        self._outputs = executor.outputs
        details = getattr(getattr(executor, "model", None), "details", None) or {}
        self._binder = InputBinder(self._inputs, aliases=aliases(details, "inputs"))
        self._output_names = tuple(t.name for t in self._outputs)
        self._outputs_cls = Outputs.for_names(self._output_names, aliases(details, "outputs"))

    # -- what the caller inspects -------------------------------------------------------------------
    @property
    def info(self) -> ModelInfo:
        return self._candidate.artifact

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self._inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self._outputs

    @property
    def executor(self) -> ExecutorInfo:
        base = self._executor.info
        return ExecutorInfo(base.runtime, base.version, base.device, base.precision, base.threads,
                            reason=self._candidate.reason, artifact=str(self._candidate.artifact.path),
                            details=base.details)

    @property
    def fallbacks(self) -> tuple[FallbackEvent, ...]:
        return tuple(self._fallbacks)

    @property
    def ranking(self) -> Ranking:
        return self._ranking

    @property
    def concurrency(self) -> int:
        """Requests the executor can work on at once (submit more to keep it busy)."""
        return self._executor.concurrency

    # -- running ---------------------------------------------------------------------------------------
    def run(self, inputs: Any, *, quantize: bool = False, dequantize: bool = False,
            check_finite: bool = False) -> Outputs:
        """Run once.

        quantize: float inputs of a quantized model are quantized with the model's own scale/zero point.
        dequantize: quantized outputs come back as float32 real values.
        check_finite: NaN/Inf in float inputs or outputs is an error instead of an answer.
        """
        arrays = self._binder.bind(inputs, quantize, check_finite)
        executor = self._executor
        try:
            results = executor.run(arrays)
        except ExecutorError as exc:
            results = self._run_fallback(executor, exc, arrays)
        return self._finish(results, dequantize, check_finite)

    __call__ = run

    def _finish(self, results: list, dequantize: bool, check_finite: bool) -> Outputs:
        if check_finite:
            check_outputs_finite(results, self._output_names)
        if dequantize:
            results = [dequantize_array(r, t.quantization) if t.quantization and r.dtype.kind in "iu" else r
                       for r, t in zip(results, self._outputs)]
        return self._outputs_cls(results)

    def submit(self, inputs: Any, *, quantize: bool = False, dequantize: bool = False,
               check_finite: bool = False) -> Future:
        """Start a run in the background; the Future gives the Outputs (or the error).

        Inputs are checked now, so a wrong input raises here; what the runtime does happens in the future.
        Load with ``performance_hint="throughput"`` to have several requests run at once.
        """
        from concurrent.futures import Future

        arrays = self._binder.bind(inputs, quantize, check_finite)
        executor = self._executor
        outer: Future = Future()

        def done(inner: Future) -> None:
            exc = inner.exception()
            if exc is None:
                try:
                    outer.set_result(self._finish(inner.result(), dequantize, check_finite))
                except Exception as finish_exc:
                    outer.set_exception(finish_exc)
            elif isinstance(exc, ExecutorError) and not self._strict and self._open_next is not None:
                # Loading the next candidate must not happen on a runtime's callback thread.
                threading.Thread(target=self._retry, args=(executor, exc, arrays, outer, dequantize, check_finite),
                                 daemon=True).start()
            else:
                outer.set_exception(exc)

        try:
            inner = executor.submit(arrays)
        except ExecutorError as exc:
            inner = Future()
            inner.set_exception(exc)
        inner.add_done_callback(done)
        return outer

    def _retry(self, failed: Executor, exc: ExecutorError, arrays: list, outer: Future, dequantize: bool,
               check_finite: bool) -> None:
        try:
            outer.set_result(self._finish(self._run_fallback(failed, exc, arrays), dequantize, check_finite))
        except BaseException as retry_exc:
            outer.set_exception(retry_exc)

    def stream(self, inputs: Iterable[Any], *, ordered: bool = True, max_in_flight: int | None = None,
               **run_options) -> Iterator[Outputs]:
        """Run every item of ``inputs``, keeping up to ``max_in_flight`` requests in the executor while the
        caller's iterable prepares the next ones (pre-processing overlaps inference). Results come back in
        input order when ``ordered``, else as they complete."""
        limit = max_in_flight or 2 * max(1, self._executor.concurrency)
        pending: deque[Future] = deque()
        for item in inputs:
            pending.append(self.submit(item, **run_options))
            if len(pending) >= limit:
                yield from self._drain(pending, ordered, keep=limit - 1)
        yield from self._drain(pending, ordered, keep=0)

    @staticmethod
    def _drain(pending: deque, ordered: bool, keep: int) -> Iterator[Outputs]:
        from concurrent.futures import FIRST_COMPLETED, wait

        while len(pending) > keep:
            if ordered:
                yield pending.popleft().result()
            else:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in list(done)[: len(pending) - keep]:
                    pending.remove(future)
                    yield future.result()

    def _run_fallback(self, failed: Executor, exc: ExecutorError, arrays: list) -> list:
        """The executor failed at run time: hand the same inputs to the next candidate that loads."""
        if self._strict or self._open_next is None:
            raise exc
        with self._lock:
            if self._executor is failed:  # another thread may have switched already
                self._switch(failed, exc)
            executor = self._executor
        return executor.run(arrays)

    def _switch(self, failed: Executor, exc: ExecutorError) -> None:
        failed_name = self._candidate.name
        for candidate in self._ranking.candidates:
            if candidate is self._candidate or candidate in self._failed:
                continue
            if tuple(t.dtype for t in candidate.artifact.inputs) != tuple(t.dtype for t in self._inputs):
                continue  # a twin with other inputs cannot take these requests
            try:
                executor = self._open_next(candidate)
            except EdgeAccelError as load_exc:
                self._failed.append(candidate)
                self._record("load", candidate.name, load_exc, None)
                continue
            self._failed.append(self._candidate)
            self._record("run", failed_name, exc, candidate.name)
            self._retired.append(failed)
            self._executor, self._candidate = executor, candidate
            return
        self._record("run", failed_name, exc, None)
        raise exc

    def _record(self, stage: str, failed: str, exc: BaseException, replaced_by: str | None) -> None:
        event = FallbackEvent(time.time(), stage, failed, str(exc), replaced_by)
        self._fallbacks.append(event)
        log.warning("fallback: %s", event)

    # -- lifetime ----------------------------------------------------------------------------------------
    def close(self) -> None:
        """Release every runtime object. Idempotent; run() afterwards raises ModelClosedError."""
        with self._lock:
            executors = [self._executor, *self._retired]
            self._executor = _Closed(self._candidate.artifact)
            self._retired = []
        for executor in executors:
            executor.close()

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

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
