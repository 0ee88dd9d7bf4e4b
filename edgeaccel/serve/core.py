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
from . import describe
from .describe import VERSION
from .batching import Batcher, batchable
from .binding import bind, fixed_dims
from .errors import ServeError, from_edgeaccel
from .gate import DeviceGate, gate_model, ran_by
from .opening import open_model
from .repository import Entry, ModelRepository, layout_hint
from .shape_check import onnx_check_for
from .streams import Streams

log = logging.getLogger("edgeaccel.serve")
_NATIVE_LOG_LOCK = threading.Lock()
# The longest measured run that HTTP's event loop may make itself (ServeCore.quick): any server, and a server
# whose every model runs on this model's devices (a request arriving meanwhile would wait for them anyway)
INLINE_MAX_S = 0.003
INLINE_ONE_PLACE_MAX_S = 0.030


@dataclass
class ServeOptions:
    policy: str = "thermal"
    executor: str | None = None  # pin every model to one runtime (as load(executor=...))
    power_budget_w: float | None = None
    performance_hint: str = "adaptive"  # a lone request on every core, concurrent ones on streams
    threads: int | None = None  # threads per run (RuntimeOptions.threads): None, every core for a lone request
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
        self._inline_caps: dict[str, tuple[ServedModel, float]] = {}  # quick()'s, kept by _models_changed
        self._failed: dict[str, str] = {}  # name -> why its last load failed
        self._loading: dict[str, threading.Lock] = {}
        self._pending = 0
        self.accepted = 0  # requests taken (each is answered: with outputs or an error)
        self.answered = 0
        self._idle = threading.Condition(self._lock)
        self._draining = False
        self.last_refusal = 0.0  # when a request was last refused for the shutdown (server.py waits for quiet)
        self.streams = Streams()  # tracked streams of the task endpoints (tasks.py), kept across requests

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
                self._models_changed()
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
            self._models_changed()
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

    def quick(self, name: str) -> float:
        """How long a run of ``name`` may take and still run in the thread that takes the request even where
        that thread serves others (HTTP's event loop), while nothing else is in flight in the server, the model
        is not batched and its devices are free and not duty-cycled (else 0: never).

        Two thread hand-offs (to a worker and back, each waiting for the GIL) were most of what HTTP added over
        an in-process call for mobilenet_v1 (0.3-0.7 ms a run); on mobilenet_v2 (6 ms) HTTP's share above its
        floor was 0.57 ms against gRPC's -0.09 ms, whose handler runs the request itself (tools/bench_serve.py, one
        quiet run), yet running it here took only 0.04-0.05 ms off HTTP's p50 (a paired A/B of the builds, 300
        rounds): the rest is the server waking from idle, not the hand-offs. What a run on the
        loop costs is the other clients' wait while the loop
        cannot read them: nothing more than they would wait anyway where every model of the server runs on this
        model's devices (busy with this run), so up to ``INLINE_ONE_PLACE_MAX_S`` there; ``INLINE_MAX_S``
        where another model could have started elsewhere meanwhile. Any concurrent load takes the queued path."""
        served = self._models.get(name)
        if served is None or served.batcher is not None or self._pending or self._draining:
            return 0.0
        # kept per load; one computed for the model a reload is replacing counts as none
        kept, cap = self._inline_caps.get(name, (None, 0.0))
        if kept is not served or not cap or not all(self.gate.idle(device) for device in served.devices):
            return 0.0
        return cap

    def _models_changed(self) -> None:
        """Each model's cap for ``quick`` where the loop may run it, from the models loaded now (under the lock)."""
        caps = {}
        for name, served in self._models.items():
            if served.shape_check is not None or any(dims is None or None in dims for dims in served.fixed):
                # a dynamic shape's run is not bounded by the runs measured (a batch of 64 is 64 runs)
                caps[name] = (served, 0.0)
                continue
            here = set(served.devices)  # one device: a model over two holds one while its other could run others
            one_place = len(here) == 1 and all(here.issuperset(other.devices) for other in self._models.values())
            caps[name] = (served, INLINE_ONE_PLACE_MAX_S if one_place else INLINE_MAX_S)
        self._inline_caps = caps

    def is_loaded(self, name: str) -> bool:
        return name in self._models  # one dict lookup (atomic under the GIL): per request, no lock, no copy

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

    # -- metadata (describe.py) ------------------------------------------------------------------------------
    def metadata(self, name: str, version: str = "") -> dict:
        return describe.metadata(self.get(name, version), self.options)

    def config(self, name: str, version: str = "") -> dict:
        """The model as Triton's model configuration describes it (what tritonclient's get_model_config reads)."""
        return describe.config(self.get(name, version), self.options)

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
              timeout_s: float | None = None, admitted: bool = False, here: float = 0.0) -> Future:
        """Take one request: its Future gives the model's outputs as a dict by name (an Answer, whose
        ``executor`` names the executor that ran it where known) or a ServeError. ``here``: the caller's
        thread may run the request itself (gRPC's handlers wait for the answer anyway: ``math.inf``; HTTP's
        loop: ``quick``): an unbatched request that an executor measured at most ``here`` seconds a run can
        start at once runs in it, and the Future comes back done (no hand-off to a worker thread and back)."""
        try:
            served = self.get(name, version)
            arrays = bind(served, inputs)
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
            elif hasattr(served.model, "submit_bound"):  # bound above; in this thread if it can start now
                inner = served.model.submit_bound(arrays, timeout, here)
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
            self._models_changed()
        for served in models:
            self._close_model(served)


class Answer(dict):
    """A request's outputs by name, and ``executor``: the name of the executor that produced them (both
    protocols return it in the response's parameters)."""

    def __init__(self, items=(), executor: str | None = None) -> None:
        super().__init__(items)
        self.executor = executor


def _left(at: float | None) -> float | None:
    """Seconds from now to a monotonic deadline (at least 1 ms: the scheduler wants a positive deadline)."""
    return None if at is None else max(0.001, at - time.monotonic())


def _service_s(model: Any) -> float:
    """The model's measured service time (for the batcher not to wait past a deadline); 0 before any run."""
    known = [s.latency_s for s in model.slots if s.latency_s]
    return min(known) if known else 0.0
