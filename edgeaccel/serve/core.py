"""The server's core, shared by HTTP and gRPC: every loaded model, and the path a request takes to one.

Each model is loaded as ``edgeaccel.schedule(path, policy)`` does for one app (validated first, isolated in a
worker process with ``isolate``), so it is a ScheduledModel: its requests queue in deadline order and run on
the executors its policy picks from the devices' telemetry (thermal, power, latency, efficiency). What the core
adds for many models at once:

- one DeviceGate: every executor of every model takes a place on its device before it runs, so two models on
  one Edge TPU never run at once on it, and a model with a higher priority goes first;
- one bounded queue: at most ``max_queue`` requests accepted and unanswered in the whole server; the next is
  refused at once (503 + Retry-After, gRPC UNAVAILABLE) instead of waiting without bound;
- a timeout per request (the scheduler's deadline: a request that cannot finish in time is failed, 504);
- dynamic batching for models whose batch dimension is dynamic (``batching``);
- draining: ``drain()`` refuses new requests and waits until every accepted one is answered.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..model import _fail, _set
from ..tensors import InputBinder
from .batching import Batcher, batchable
from .errors import ServeError, from_edgeaccel
from .gate import DeviceGate, gate_model, ran_by
from .opening import open_model
from .repository import Entry, ModelRepository, layout_hint
from .shape_check import onnx_check_for
from .tensors import datatype_of

log = logging.getLogger("edgeaccel.serve")
VERSION = "1"  # one version per model: the repository holds one artifact set per name
_NATIVE_LOG_LOCK = threading.Lock()


@dataclass
class ServeOptions:
    policy: str = "thermal"
    executor: str | None = None  # pin every model to one runtime (as load(executor=...))
    power_budget_w: float | None = None
    performance_hint: str = "adaptive"  # a lone request on every core, concurrent ones a core each
    isolate: bool = False
    telemetry_root: str = "/"
    max_queue: int = 64
    timeout_s: float = 30.0
    max_batch: int = 8
    batch_window_ms: float = 2.0
    priorities: dict[str, int] = field(default_factory=dict)
    device_limits: dict[str, int] = field(default_factory=dict)
    tasks: dict[str, str] = field(default_factory=dict)  # model name -> vision task (load(task=...))
    labels: dict[str, str] = field(default_factory=dict)  # model name -> label file (load(labels=...))


@dataclass
class ServedModel:
    name: str
    entry: Entry
    model: Any  # a ScheduledModel
    binder: InputBinder
    priority: int
    devices: list[str]
    batching: str  # what batching does for this model, said in its metadata
    batcher: Batcher | None = None
    # per input, every dimension that any of the model's executors fixes (None: dynamic in all of them)
    fixed: tuple[tuple[int | None, ...] | None, ...] = ()
    shape_check: Any = None  # shape_check.OnnxShapeCheck for an ONNX model with dynamic inputs

    @property
    def platform(self) -> str:
        return f"edgeaccel_{self.model.info.format.value}"


class ServeCore:
    def __init__(self, repository: ModelRepository, options: ServeOptions | None = None,
                 metrics: Any | None = None) -> None:
        self.repository = repository
        self.options = options or ServeOptions()
        if self.options.max_queue < 1 or self.options.timeout_s <= 0:
            raise ValueError("max_queue must be at least 1 and timeout_s positive")
        self.metrics = metrics
        self.gate = DeviceGate(self.options.device_limits)
        self._lock = threading.Lock()
        self._models: dict[str, ServedModel] = {}
        self._failed: dict[str, str] = {}  # name -> why its last load failed
        self._loading: dict[str, threading.Lock] = {}
        self._pending = 0
        self.accepted = 0  # requests taken (each is answered: with outputs or an error)
        self.answered = 0
        self._idle = threading.Condition(self._lock)
        self._draining = False
        self.last_refusal = 0.0  # when a request was last refused for the shutdown (server.py waits for quiet)

    # -- the repository --------------------------------------------------------------------------------------
    def load(self, name: str) -> ServedModel:
        """Load (or reload) ``name`` from the repository. A failure is kept as the model's reason in the index."""
        entry = self.repository.resolve(name)
        if entry.problem:
            self._failed[name] = entry.problem
            raise ServeError(400, entry.problem)
        with self._lock:
            loading = self._loading.setdefault(name, threading.Lock())
        with loading:  # one load of a name at a time; other models load and serve meanwhile
            try:
                served = self._open(entry)
            except ServeError as exc:
                self._failed[name] = exc.message
                raise
            with self._lock:
                old = self._models.get(name)
                self._models[name] = served
                self._failed.pop(name, None)
            log.info("loaded %s: %s (%s)", name, ", ".join(served.model.executors), served.batching)
            if old is not None:
                self._close_model(old)
            return served

    def _open(self, entry: Entry) -> ServedModel:
        from ..native_log import quiet_native_stderr

        opts = self.options
        try:
            # the runtimes' native log lines are filtered by swapping fd 2 for the process: one load at a time
            # swaps it (two at once would restore each other's capture file), others serve meanwhile
            with _NATIVE_LOG_LOCK, quiet_native_stderr():
                model = open_model(entry.source, entry.name, opts)
        except Exception as exc:  # a model that does not load is a reason in the index, never a crash
            error = from_edgeaccel(exc, entry.name)
            raise ServeError(409 if error.status == 500 else error.status,
                             f"model '{entry.name}' did not load: {error.message.split(': ', 1)[-1]}"
                             + layout_hint(entry)) from None
        try:
            return self._serve(entry, model)
        except BaseException:
            model.close()
            raise

    def _serve(self, entry: Entry, model: Any) -> ServedModel:
        opts = self.options
        priority = int(opts.priorities.get(entry.name, 0))
        devices = gate_model(model, self.gate, priority)
        can_batch, why = batchable(model)
        fixed = fixed_dims(model)
        served = ServedModel(entry.name, entry, model, InputBinder(model.inputs), priority, devices, why,
                             fixed=fixed, shape_check=onnx_check_for(model, fixed))
        if can_batch and opts.max_batch > 1:
            served.batcher = Batcher(lambda arrays, at: model.submit(arrays, deadline=_left(at)), opts.max_batch,
                                     opts.batch_window_ms / 1000.0, self._batch_observer(entry.name),
                                     lambda: _service_s(model))
            served.batching = f"{why}, up to {opts.max_batch} rows, waiting at most {opts.batch_window_ms:g} ms"
        elif can_batch:
            served.batching = "not batched: --max-batch 1"
        return served

    def _batch_observer(self, name: str) -> Callable[[int], None] | None:
        if self.metrics is None:
            return None
        return lambda rows: self.metrics.batch(name, rows)

    def unload(self, name: str) -> None:
        self.repository.resolve(name)
        with self._lock:
            served = self._models.pop(name, None)
        if served is None:
            raise ServeError(400, f"model '{name}' is not loaded")
        self._close_model(served)
        log.info("unloaded %s", name)

    def _close_model(self, served: ServedModel) -> None:
        if served.batcher is not None:
            served.batcher.close()
        served.model.close()  # requests already running finish; queued ones fail with ModelClosedError (503)

    def index(self, ready_only: bool = False) -> list[dict]:
        out = []
        with self._lock:
            loaded = dict(self._models)
        entries = self.repository.entries()
        for name in sorted(set(entries) | set(loaded)):  # a loaded model whose files were removed still serves
            entry = entries.get(name)
            if name in loaded:
                out.append({"name": name, "version": VERSION, "state": "READY"})
            elif ready_only:
                continue
            elif name in self._failed or entry.problem:
                out.append({"name": name, "version": VERSION, "state": "UNAVAILABLE",
                            "reason": self._failed.get(name) or entry.problem})
            else:
                out.append({"name": name})
        return out

    def get(self, name: str, version: str = "") -> ServedModel:
        if version not in ("", VERSION):
            raise ServeError(404, f"model '{name}' has only version {VERSION}, not {version!r}")
        with self._lock:
            served = self._models.get(name)
        if served is None:
            self.repository.resolve(name)  # 404 for a name the repository does not hold
            why = self._failed.get(name)
            raise ServeError(404 if why is None else 409,
                             f"model '{name}' is not loaded" + (f": {why}" if why else
                                                                 f"; POST /v2/repository/models/{name}/load"))
        return served

    def loaded(self) -> dict[str, ServedModel]:
        with self._lock:
            return dict(self._models)

    @property
    def ready(self) -> bool:
        return not self._draining

    @property
    def pending(self) -> int:
        return self._pending

    def check_room(self) -> None:
        """The 503 ``infer`` would give now (shutting down, queue full), before the caller reads a request's body:
        a flood of large bodies is refused without buffering them. ``infer`` checks again under its lock."""
        if self._draining:
            self.last_refusal = time.monotonic()
            error = ServeError(503, "the server is shutting down; send the request to another instance", retry_after=5)
            error.close_connection = True  # HTTP: no keep-alive reuse of a connection that is about to close
            raise error
        if self._pending >= self.options.max_queue:
            raise ServeError(503, f"{self._pending} requests are already waiting (--max-queue "
                                  f"{self.options.max_queue}); retry later", retry_after=1)

    # -- metadata ------------------------------------------------------------------------------------------
    def metadata(self, name: str, version: str = "") -> dict:
        served = self.get(name, version)

        def tensor(t) -> dict:
            shape = [-1] * 1 if t.unranked else [-1 if d is None else int(d) for d in t.shape]
            return {"name": t.name, "datatype": datatype_of(t.dtype), "shape": shape}

        model = served.model
        return {"name": name, "versions": [VERSION], "platform": served.platform,
                "inputs": [tensor(t) for t in model.inputs], "outputs": [tensor(t) for t in model.outputs],
                "parameters": {"executors": ", ".join(model.executors), "policy": str(model.policy),
                               "priority": served.priority, "devices": ", ".join(dict.fromkeys(served.devices)),
                               "isolated": any("isolated" in (info.details or {}) for info in model.executors.values()),
                               "performance_hint": self.options.performance_hint,
                               "batching": served.batching, **_refused(model)}}

    def config(self, name: str, version: str = "") -> dict:
        """The model as Triton's model configuration describes it (what tritonclient's get_model_config reads):
        ``max_batch_size`` > 0 only for a batched model, whose ``dims`` then leave out the batch dimension."""
        meta = self.metadata(name, version)
        served = self.get(name, version)
        batched = served.batcher is not None

        def tensor(t: dict) -> dict:
            return {"name": t["name"], "data_type": f"TYPE_{'STRING' if t['datatype'] == 'BYTES' else t['datatype']}",
                    "dims": t["shape"][1:] if batched else t["shape"]}

        config = {"name": name, "platform": meta["platform"],
                  "max_batch_size": self.options.max_batch if batched else 0,
                  "input": [tensor(t) for t in meta["inputs"]], "output": [tensor(t) for t in meta["outputs"]]}
        described = _pipeline_json(served.model)
        if described:  # Triton's ModelConfig.parameters: how a client turns an image into the input tensor
            config["parameters"] = {"edgeaccel.pipeline": {"string_value": described}}
        return config

    # -- inference ----------------------------------------------------------------------------------------
    def admit(self) -> None:
        """Count one request as accepted before its inputs exist (an image still to decode): refused now when
        the server is shutting down or the queue is full. ``infer(..., admitted=True)`` takes it over; a
        request that fails before that gives its place back with ``release``."""
        with self._lock:
            self.check_room()
            self._pending += 1
            self.accepted += 1

    def release(self) -> None:
        """An admitted request answered without reaching ``infer`` (its image did not decode)."""
        self._done()

    def infer(self, name: str, inputs: dict[str, np.ndarray], version: str = "",
              timeout_s: float | None = None, admitted: bool = False) -> Future:
        """Take one request: its Future gives the model's outputs as a dict by name (an Answer, whose
        ``executor`` names the executor that ran it where known) or a ServeError."""
        try:
            served = self.get(name, version)
            arrays = self._bind(served, inputs)
            timeout = self.options.timeout_s if timeout_s is None else min(float(timeout_s), self.options.timeout_s)
            if timeout <= 0:
                raise ServeError(400, f"timeout must be a positive number of seconds, not {timeout_s!r}")
        except BaseException:
            if admitted:
                self._done()
            raise
        if not admitted:
            self.admit()
        try:
            if served.batcher is not None:
                inner = served.batcher.submit(arrays, time.monotonic() + timeout)
            else:
                inner = served.model.submit(arrays, deadline=timeout)
        except BaseException as exc:
            self._done()
            raise from_edgeaccel(exc, name) from None
        outer: Future = Future()
        names = [t.name for t in served.model.outputs]
        first = arrays[0] if arrays else None

        def finish(done: Future) -> None:  # outer may be cancelled (the client went away): _set/_fail allow it
            try:
                exc = done.exception()
                if exc is not None:
                    _fail(outer, from_edgeaccel(exc, name))
                else:
                    result = done.result()
                    _set(outer, Answer(zip(names, result, strict=True), getattr(result, "executor", None) or ran_by(first)))
            finally:
                self._done()

        inner.add_done_callback(finish)
        return outer

    def _bind(self, served: ServedModel, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        specs = {t.name: t for t in served.model.inputs}
        unknown = [k for k in inputs if k not in specs]
        if unknown:
            raise ServeError(400, f"model '{served.name}' has no input '{unknown[0]}'; its inputs are "
                                  f"{list(specs)} (GET /v2/models/{served.name} for their shapes)")
        for key, array in inputs.items():
            want = specs[key].dtype
            if array.dtype != want:
                raise ServeError(400, f"input '{key}' of model '{served.name}' is {datatype_of(want)}, the request "
                                      f"sent {datatype_of(array.dtype)}")
        try:
            arrays = served.binder.bind(inputs)
        except Exception as exc:
            raise from_edgeaccel(exc, served.name) from None
        for spec, array, fixed in zip(served.model.inputs, arrays, served.fixed, strict=True):
            _check_fixed(served, spec.name, array.shape, fixed)
        if served.shape_check is not None:
            why = served.shape_check.problem({s.name: a.shape for s, a in zip(served.model.inputs, arrays, strict=True)})
            if why:
                shapes = ", ".join(f"{spec.name} {'x'.join(map(str, array.shape))}"
                                   for spec, array in zip(served.model.inputs, arrays, strict=True))
                raise ServeError(400, f"model '{served.name}' cannot take inputs of these shapes ({shapes}): {why} "
                                      f"(GET /v2/models/{served.name} for its inputs)")
        return arrays

    def _done(self) -> None:
        with self._lock:
            self._pending -= 1
            self.answered += 1
            if self._pending == 0:
                self._idle.notify_all()

    # -- lifetime ------------------------------------------------------------------------------------------
    def refuse(self) -> None:
        """Refuse every new request from now on (503 / UNAVAILABLE, not ready); accepted ones still run."""
        with self._lock:
            self._draining = True
            self.last_refusal = time.monotonic()

    def drain(self, timeout_s: float | None = None) -> bool:
        """Refuse new requests and wait until every accepted one has its answer; False on timeout."""
        with self._lock:
            self._draining = True
            return self._idle.wait_for(lambda: self._pending == 0, timeout_s)

    def close(self) -> None:
        self.drain(timeout_s=self.options.timeout_s)
        with self._lock:
            models, self._models = list(self._models.values()), {}
        for served in models:
            self._close_model(served)


def _refused(model: Any) -> dict:
    """The executors the accuracy guard kept out of this model, and why (absent when none was)."""
    refused = [str(event) for event in getattr(model, "fallbacks", ()) if event.stage == "guard"]
    return {"refused": "; ".join(refused)} if refused else {}


class Answer(dict):
    """A request's outputs by name, and ``executor``: the name of the executor that produced them (both
    protocols return it in the response's parameters)."""

    def __init__(self, items=(), executor: str | None = None) -> None:
        super().__init__(items)
        self.executor = executor


def fixed_dims(model: Any) -> tuple[tuple[int | None, ...] | None, ...]:
    """Per input, the dimensions any executor of the model fixes. The model's own inputs are its first
    executor's: an ONNX twin may leave H and W dynamic where the .tflite fixes them, and a request of the wrong
    size would then pass the binder and fail inside a runtime (a 500, or fallbacks) instead of a 400 here."""
    shapes: list[list[int | None] | None] = [None if t.unranked else list(t.shape) for t in model.inputs]
    for slot in getattr(model, "slots", ()):
        for i, spec in enumerate(getattr(slot.executor, "inputs", ())[:len(shapes)]):
            if spec.unranked:
                continue
            if shapes[i] is None:
                shapes[i] = list(spec.shape)
            elif len(shapes[i]) == len(spec.shape):
                shapes[i] = [d if d is not None else o for d, o in zip(shapes[i], spec.shape, strict=True)]
    return tuple(None if s is None else tuple(s) for s in shapes)


def _check_fixed(served: ServedModel, name: str, shape: tuple, fixed: tuple | None) -> None:
    if fixed is None or len(fixed) != len(shape):
        return  # the binder checked the rank against the model's inputs
    first = 1 if served.batcher is not None else 0  # rows of a batched model: the batcher's to count
    for axis in range(first, len(shape)):
        if fixed[axis] is not None and shape[axis] != fixed[axis]:
            want = "x".join("?" if d is None else str(d) for d in fixed)
            raise ServeError(400, f"input '{name}' of model '{served.name}' has shape "
                                  f"{'x'.join(map(str, shape))}; the model takes {want} (dimension {axis} must be "
                                  f"{fixed[axis]}: GET /v2/models/{served.name} for its inputs)")


def _left(at: float | None) -> float | None:
    """Seconds from now to a monotonic deadline (at least 1 ms: the scheduler wants a positive deadline)."""
    return None if at is None else max(0.001, at - time.monotonic())


def _service_s(model: Any) -> float:
    """The model's measured service time (for the batcher not to wait past a deadline); 0 before any run."""
    known = [s.latency_s for s in model.slots if s.latency_s]
    return min(known) if known else 0.0


def _pipeline_json(model) -> str | None:
    """The model's pipeline (size, layout, normalization, letterbox, labels...) as JSON, or None."""
    import json

    try:
        described = model.pipeline.to_dict()
    except Exception as exc:  # a broken sidecar must not take the config endpoint down: say it in the log
        log.warning("no pipeline description for %s: %s", getattr(model.info, "path", "?"), exc)
        return None
    return json.dumps(described, sort_keys=True) if described else None
