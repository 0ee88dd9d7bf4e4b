"""The Model: one inference API over whichever executor was chosen, with visible, never silent, fallback."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import DeviceUnavailableError, ExecutorError
from .executors.base import Executor, ExecutorInfo
from .modelinfo import ModelInfo, TensorSpec
from .selection.selector import Ranking
from .tensors import InputBinder, Outputs, aliases, check_outputs_finite, dequantize_array

if TYPE_CHECKING:  # concurrent.futures is imported by the asynchronous path only (start-up memory)
    from concurrent.futures import Future

log = logging.getLogger("edgeaccel")


@dataclass(frozen=True)
class FallbackEvent:
    """A candidate that failed and what took over from it."""

    when: float  # time.time()
    # "load", "run", "select" (an artifact passed over), "calibrate" (a measured switch), "guard" (loaded, but its
    # answers disagree with the reference's: never routed to)
    stage: str
    failed: str  # candidate name, e.g. "openvino:CPU"
    error: str
    replaced_by: str | None

    def __str__(self) -> str:
        to = f" -> {self.replaced_by}" if self.replaced_by else ""
        first = self.error.splitlines()[0] if self.error else ""
        first = first if len(first) <= 300 else first[:297] + "..."  # a runtime's message can be 17 KB long
        if self.stage == "calibrate":
            return f"{self.failed} replaced by measurement: {first}{to}"
        if self.stage == "guard":
            return f"{self.failed} not used: {first}{to}"
        if self.stage == "select":  # not tried: the artifact cannot run here, so its twin does
            return f"{self.failed} passed over: {first}{to}"
        return f"{self.failed} failed at {self.stage}: {first}{to}"


class Model:
    """A loaded model. Build one with ``edgeaccel.load``; use it as a context manager or call ``close()``.

    ``run`` takes one array, a list in input order, or a dict by input name, and is safe to call from many
    threads at once. ``load`` returns a Model on the best candidate that loads, with run-time failover down the
    ranking (``RankedModel``, edgeaccel/ranked_model.py); ``schedule`` one over several executors under a
    scheduler (``edgeaccel.ScheduledModel``). Both share this class: binding inputs, building outputs, ``run``,
    ``submit``, ``stream``, ``fallbacks``, ``reselect`` and the lifetime are written once, here.
    """

    _ranking: Ranking
    _fallbacks: list[FallbackEvent]

    def __new__(cls, *args: Any, **kwargs: Any) -> Model:
        if cls is Model:  # the shared API alone runs nothing: one of its kinds is built
            raise TypeError("edgeaccel.Model is the API its kinds share: edgeaccel.load() builds one (a "
                            "RankedModel, edgeaccel.ranked_model), edgeaccel.schedule() a ScheduledModel")
        return super().__new__(cls)

    def _set_io(self, executor: Executor) -> None:
        """Inputs and outputs as the (first) executor declares them, with the model's own name aliases."""
        self._inputs = executor.inputs
        self._outputs = executor.outputs
        details = getattr(getattr(executor, "model", None), "details", None) or {}
        self._binder = InputBinder(self._inputs, aliases=aliases(details, "inputs"))
        self._output_names = tuple(t.name for t in self._outputs)
        self._outputs_cls = Outputs.for_names(self._output_names, aliases(details, "outputs"))

    # -- what the caller inspects -------------------------------------------------------------------
    @property
    def info(self) -> ModelInfo:
        raise NotImplementedError

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self._inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self._outputs

    @property
    def executor(self) -> ExecutorInfo:
        """What runs the requests now, and why it was chosen."""
        raise NotImplementedError

    @property
    def fallbacks(self) -> tuple[FallbackEvent, ...]:
        """Every candidate that failed to load or run, and what took over (never silent)."""
        return tuple(self._fallbacks)

    @property
    def ranking(self) -> Ranking:
        return self._ranking

    @property
    def concurrency(self) -> int:
        """Requests the model can work on at once (submit more to keep it busy)."""
        raise NotImplementedError

    def reselect(self) -> ExecutorInfo:
        """Offer again what failed: see the subclasses. Returns what runs now."""
        raise NotImplementedError

    # -- vision tasks (edgeaccel.vision) -------------------------------------------------------------------
    _task_request: tuple = (None, None, {})  # load(task=, task_options=): bound on first use when not given
    _task_bound = False
    _task = None

    @property
    def task(self):
        """The vision task (an ``edgeaccel.vision.Task``: classify, detect, segment, pose) that ``predict``
        uses: the one given to ``load(task=...)``, else the one recognized from the outputs; None if none fits."""
        if not self._task_bound:
            from .vision import make_task

            task, labels, options = self._task_request
            self._task = make_task(self, task, labels, **options)
            self._task_bound = True
        return self._task

    @task.setter
    def task(self, value) -> None:
        self._task, self._task_bound = value, True

    _bundle = None  # the ArtifactSet it was loaded from (its manifest's pipeline and labels)
    _pipeline = None

    @property
    def pipeline(self):
        """How images feed this model and its outputs are read (an ``edgeaccel.modelfiles.pipeline.ModelPipeline``):
        task, input size, layout, colour order, normalization, letterbox, labels, decoder; from what was given
        to ``load`` (task=, TaskOptions labels/imgsz/letterbox/normalize), a ``<model>.edgeaccel.yaml``, the
        bundle manifest, the model's own metadata and a label file beside it, in that order."""
        if self._pipeline is None:
            from .modelfiles.describe import describe_pipeline
            from .modelfiles.pipeline import TASKS

            task, labels, options = self._task_request
            user = {key: options.get(key) for key in ("imgsz", "letterbox", "normalize")}
            if isinstance(user["normalize"], tuple) and len(user["normalize"]) != 2:
                user["normalize"] = None
            user["task"] = task if task in TASKS else None  # an unknown one is make_task's TaskError
            if labels is not None and not hasattr(labels, "names"):
                user["labels"] = _labels_value(labels)
            self._pipeline = describe_pipeline(self.info, user=user, bundle=self._bundle)
        return self._pipeline

    def predict(self, image: Any, *, inputs: dict | None = None):
        """Run the vision task on an image (a path, a PIL image or an H x W x 3 RGB array, any size): an
        ``edgeaccel.vision`` Result (boxes, classes, mask or keypoints in the image's pixels). ``inputs``
        gives the model's other inputs by name (recurrent state); they are zeros otherwise."""
        from .vision.task import predict

        return predict(self, image, inputs)

    # -- running ---------------------------------------------------------------------------------------
    def run(self, inputs: Any, *, quantize: bool = False, dequantize: bool = False,
            check_finite: bool = False) -> Outputs:
        """Run once.

        quantize: float inputs of a quantized model are quantized with the model's own scale/zero point.
        dequantize: quantized outputs come back as float32 real values.
        check_finite: NaN/Inf in float inputs or outputs is an error instead of an answer.
        """
        arrays = self._binder.bind(inputs, quantize, check_finite)
        results, executor = self._execute(arrays)
        return self._finish(results, dequantize, check_finite, executor)

    def __call__(self, inputs: Any, **options: Any) -> Outputs:
        return self.run(inputs, **options)

    def submit(self, inputs: Any, *, quantize: bool = False, dequantize: bool = False,
               check_finite: bool = False) -> Future:
        """Start a run in the background; the Future gives the Outputs (or the error).

        Inputs are checked now, so a wrong input raises here; what the runtime does happens in the future.
        Load with ``performance_hint="throughput"`` to have several requests run at once.
        """
        from concurrent.futures import Future

        arrays = self._binder.bind(inputs, quantize, check_finite)
        outer: Future = Future()
        self._start(arrays, outer, dequantize, check_finite)
        return outer

    def stream(self, inputs: Iterable[Any], *, ordered: bool = True, max_in_flight: int | None = None,
               **run_options) -> Iterator[Outputs]:
        """Run every item of ``inputs``, keeping up to ``max_in_flight`` requests in the executor while the
        caller's iterable prepares the next ones (pre-processing overlaps inference). Results come back in
        input order when ``ordered``, else as they complete."""
        limit = max_in_flight or 2 * max(1, self.concurrency)
        pending: deque[Future] = deque()
        for item in inputs:
            pending.append(self.submit(item, **run_options))
            if len(pending) >= limit:
                yield from self._drain(pending, ordered, keep=limit - 1)
        yield from self._drain(pending, ordered, keep=0)

    def watch(self, source, *more, **options):
        """Frames of a video file, camera, stream, image folder or iterable through this model, in a pipeline
        that overlaps decoding and pre-processing with inference and never queues without bound: an
        ``edgeaccel.sources.Pipeline`` to iterate for Frames (see ``edgeaccel.sources.watch`` for options)."""
        from .upcalls import watch  # edgeaccel.sources, a layer above Model, registered by edgeaccel/__init__.py

        return watch(self, source, *more, **options)

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

    # -- what a subclass provides ------------------------------------------------------------------------
    def _execute(self, arrays: list) -> tuple[list, str | None]:
        """Run bound inputs; the raw result arrays and the name of the executor that produced them."""
        raise NotImplementedError

    def _start(self, arrays: list, outer: Future, dequantize: bool, check_finite: bool) -> None:
        """Start bound inputs in the background; settle ``outer`` (``_settle`` / ``_fail``) when done."""
        raise NotImplementedError

    # -- shared by both ------------------------------------------------------------------------------------
    def _finish(self, results: list, dequantize: bool, check_finite: bool, executor: str | None = None) -> Outputs:
        """The caller's Outputs; ``executor`` names what produced them (``Outputs.executor``)."""
        if check_finite:
            check_outputs_finite(results, self._output_names)
        if dequantize:
            results = [dequantize_array(r, t.quantization) if t.quantization and r.dtype.kind in "iu" else r
                       for r, t in zip(results, self._outputs, strict=True)]
        return self._outputs_cls.labelled(executor)(results)

    def _settle(self, outer: Future, results: list, dequantize: bool, check_finite: bool,
                executor: str | None = None) -> None:
        """Give ``outer`` the finished Outputs, or the error finishing raised."""
        try:
            outputs = self._finish(results, dequantize, check_finite, executor)
        except Exception as exc:
            _fail(outer, exc)
            return
        _set(outer, outputs)

    def _record(self, stage: str, failed: str, exc: BaseException, replaced_by: str | None) -> None:
        event = FallbackEvent(time.time(), stage, failed, str(exc), replaced_by)
        self._fallbacks.append(event)
        log.warning("fallback: %s", event)

    # -- lifetime ----------------------------------------------------------------------------------------
    def close(self) -> None:
        """Release every runtime object. Idempotent; run() afterwards raises ModelClosedError."""
        raise NotImplementedError

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def fails_over(exc: BaseException) -> bool:
    """Whether another executor may take a request this one failed with: an error of the runtime
    (ExecutorError: it failed, its worker crashed, it timed out) or of the device (DeviceUnavailableError: it
    was unplugged, its driver went away). Not one of the model itself (ModelError: an index computed out of
    range is refused by LiteRT and crashes OpenVINO, tests/test_guards.py), the caller's inputs or a closed
    model: the next executor would fail alike, or worse."""
    return isinstance(exc, (ExecutorError, DeviceUnavailableError))


def _set(future: Future, value: Any) -> None:
    from concurrent.futures import InvalidStateError

    try:
        future.set_result(value)
    except InvalidStateError:  # the caller cancelled it meanwhile
        pass


def _fail(future: Future | None, error: BaseException) -> None:
    from concurrent.futures import InvalidStateError

    if future is None:
        return
    try:
        future.set_exception(error)
    except InvalidStateError:
        pass


def _labels_value(labels):
    """TaskOptions(labels=) as a pipeline field: a file is read (its .pbtxt offset kept), lists and dicts as given."""
    if isinstance(labels, (list, tuple, dict)):
        return labels
    from .modelfiles.labels import read_label_file

    found = read_label_file(labels)
    return {key - found.offset: name for key, name in found.names.items()}
