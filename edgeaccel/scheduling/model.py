"""ScheduledModel: the Model API over several executors (say an accelerator and the CPU, or LiteRT and
OpenVINO on one CPU), with a scheduler choosing, request by request, which executor runs it and how fast
requests are admitted, from telemetry sampled at a bounded rate under the caller's policy.

A request is routed (deadline first) by the thread that submits it, to an executor that can start it now,
which runs it on its own worker threads (or in the submitting thread: ``submit_bound``); the telemetry is
sampled and the policy decides when due, before routing. A dispatcher thread does the rest: it routes what had
to wait (a full executor, a duty budget) once it can start, fails what waited too long, and re-measures idle
executors. Every decision is
recorded in ``trace``; ``stats`` has per-executor counts, latency percentiles, energy per inference where the
device measures energy, and time spent limited or throttled. A failing executor is retried elsewhere and, after
repeated failures that another executor then answered, taken out of rotation: visible in ``fallbacks``, never
silent, and back only when the caller asks (``reselect()``). A request without a deadline waits at most
``max_wait_s`` to be started.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..errors import (DeadlineExceededError, EdgeAccelError, ExecutorError, InferenceTimeoutError, ModelClosedError,
                      OverloadedError)
from ..executors.base import Executor, ExecutorInfo
from ..model import FallbackEvent, Model, _fail, fails_over
from ..selection.selector import Ranking
from ..telemetry.sampler import DeviceLimits, DeviceSample, TelemetrySampler
from ..telemetry.sensors import SensorSpec
from ..tensors import Outputs
from .clock import Clock, MonotonicClock
from .assembly import build_slots, check_same_inputs, sensor_specs
from .core import ExecutorSlot, Request, Scheduler
from .energy import PowerFigure
from .failover import FailureLedger
from .policies import Policy, make_policy
from .stats import SchedulerStats
from .trace import Trace

log = logging.getLogger("edgeaccel")

DEFAULT_MAX_WAIT_S = 60.0  # a request without a deadline that no executor starts within this fails, saying why


class ScheduledModel(Model):
    """A model served by several executors under a scheduling policy. Use as a context manager or ``close()``.

    It is a Model (``edgeaccel.schedule(model, policy)`` returns one): the same ``run``, ``submit``,
    ``stream``, ``inputs``, ``outputs``, ``executor``, ``fallbacks`` and ``reselect``, plus ``deadline=``
    on requests and ``executors``, ``stats``, ``trace`` and ``telemetry``.

    executors: loaded Executors of one model (same inputs). The first one's inputs/outputs are the model's.
    policy: "latency", "efficiency", "thermal", "power" (with ``power_budget_w``), or a Policy object.
    sensors: device name -> SensorSpec; by default found below ``root`` for each executor's device kind.
    limits: device name -> trip points to assume where the sensors give none (a device profile's limits).
    max_concurrency: requests in flight per executor (an int for all, or a dict by executor name); by default
        each executor's own ``concurrency`` (several for one loaded with ``performance_hint="throughput"``).
    max_wait_s: a request without a deadline that no executor has started after this long fails with
        InferenceTimeoutError saying what holds the executors back (never a future that waits forever).
    power: executor name -> PowerFigure, the power its device draws busy where no energy counter measures
        it (a profile's typical power, an estimate for the CPU): what the efficiency and power policies
        rank unmeasured executors by. By default from ``profile`` and the CPU's package power limit.
    """

    def __init__(self, executors: Sequence[Executor], policy: str | Policy = "thermal", *,
                 power_budget_w: float | None = None, sensors: dict[str, SensorSpec] | None = None,
                 root: str | Path = "/", nvml: Any | None = None, limits: dict[str, DeviceLimits] | None = None,
                 clock: Clock | None = None, sample_interval_s: float = 0.5,
                 max_concurrency: int | dict | None = None, max_queue: int = 10_000,
                 before_sample: Callable[[float], None] | None = None, fallbacks: Sequence[FallbackEvent] = (),
                 reasons: dict[str, str] | None = None, ranking: Ranking | None = None,
                 max_wait_s: float | None = DEFAULT_MAX_WAIT_S, profile: Any | None = None,
                 power: dict[str, PowerFigure] | None = None, probe_inputs: Sequence | None = None) -> None:
        if not executors:
            raise ValueError("a ScheduledModel needs at least one executor")
        self._executors = list(executors)
        check_same_inputs(self._executors)
        self._policy = policy if isinstance(policy, Policy) else make_policy(policy, power_budget_w)
        self._clock = clock or MonotonicClock()
        self._reasons = dict(reasons or {})
        self._fallbacks = list(fallbacks)
        self._ranking = ranking if ranking is not None else Ranking([])
        slots, placed = build_slots(self._executors, max_concurrency, power, profile, Path(root))
        devices = list(dict.fromkeys(s.device for s in slots))
        specs = sensor_specs(devices, sensors, Path(root), nvml, placed)
        self._sampler = TelemetrySampler({d: specs[d] for d in devices}, Path(root), nvml,
                                         min_interval_s=sample_interval_s, limits=limits)
        self._scheduler = Scheduler(slots, self._policy, self._sampler, interval_s=sample_interval_s,
                                    simulated=bool(getattr(self._clock, "simulated", False)),
                                    before_sample=before_sample, max_queue=max_queue, max_wait_s=max_wait_s,
                                    remeasure_with_requests=False)
        # what a stale executor is re-measured on while its device is idle (the guard's samples; by default
        # calibration's, made on the first probe): a caller's request is never sent anywhere to measure it
        self._probe_inputs = list(probe_inputs) if probe_inputs else None
        self._probes = 0
        self._set_io(self._executors[0])
        self._cond = threading.Condition()
        self._dirty = False
        self._closed = False
        self._ledger = FailureLedger(slots)
        self._pools = {s.name: ThreadPoolExecutor(s.max_concurrency, thread_name_prefix=f"edgeaccel-{s.name}")
                       for s in slots}
        with self._cond:
            self._scheduler.maybe_decide(self._clock.now(), force=True)
        self._dispatcher = threading.Thread(target=self._dispatch_loop, name="edgeaccel-scheduler", daemon=True)
        self._dispatcher.start()

    # -- what the caller inspects ----------------------------------------------------------------------------
    @property
    def info(self):
        return self._executors[0].model

    @property
    def executors(self) -> dict[str, ExecutorInfo]:
        out = {}
        for slot in self._scheduler.slots:
            base = slot.executor.info
            reason = self._reasons.get(slot.name, "")
            if slot.failed_permanently:
                reason = f"out of rotation: {slot.failed_permanently}"
            out[slot.name] = ExecutorInfo(base.runtime, base.version, base.device, base.precision, base.threads,
                                          reason=reason, artifact=str(slot.executor.model.path), details=base.details)
        return out

    @property
    def executor(self) -> ExecutorInfo:
        """The executor the latest decision prefers (the Model API has one; see ``executors`` for all)."""
        decision = self._scheduler.decision
        for name in decision.order or ():
            if decision.enabled.get(name):
                return self.executors[name]
        return next(iter(self.executors.values()))

    @property
    def concurrency(self) -> int:
        """Requests the executors in rotation can work on at once, together."""
        return sum(s.max_concurrency for s in self._scheduler.slots if not s.failed_permanently) or 1

    @property
    def policy(self) -> Policy:
        return self._policy

    @property
    def stats(self) -> SchedulerStats:
        with self._cond:
            return self._scheduler.stats(self._clock.now())

    @property
    def trace(self) -> Trace:
        """Every decision so far (a snapshot: later decisions do not change it)."""
        with self._cond:
            return self._scheduler.trace.snapshot()

    @property
    def telemetry(self) -> dict[str, DeviceSample]:
        """The latest sample of each device, with what the policy makes of it: its plant model, and while a
        sensor is lost the fallback it serves on and the estimated temperature (scheduling/modelled.py)."""
        from dataclasses import replace as _replace

        from .modelled import telemetry_fields

        with self._cond:
            controls = dict(self._scheduler.state.controls)
        return {name: _replace(sample, **telemetry_fields(controls.get(name)))
                for name, sample in self._sampler.latest.items()}

    @property
    def slots(self) -> list[ExecutorSlot]:
        """The scheduler's executor slots. A host sharing devices across models (``edgeaccel serve``) wraps each
        ``slot.executor`` before the first request; ``slot.latency_s`` is the slot's measured service time."""
        return self._scheduler.slots

    def duty(self, device: str) -> float | None:
        """The share of time the latest policy decision allows on ``device`` (1.0 unthrottled); None once closed."""
        return None if self._closed else self._scheduler.decision.duty.get(device, 1.0)

    def reselect(self) -> ExecutorInfo:
        """Put every executor taken out of rotation (after repeated failures) back: a device that came back
        serves again. The scheduler never does this by itself. Returns what the policy prefers now."""
        with self._cond:
            if self._closed:
                raise ModelClosedError(f"{self.info.path.name} was closed", hint="load it again with edgeaccel.load")
            for slot in self._scheduler.slots:
                if slot.failed_permanently:
                    log.info("reselect: %s back in rotation (was %s)", slot.name, slot.failed_permanently)
                slot.failed_permanently = None
                self._ledger.reset(slot.name)
            self._scheduler.maybe_decide(self._clock.now(), force=True)  # the policy sees them at once
            self._dirty = True
            self._cond.notify_all()
        return self.executor

    # -- running -------------------------------------------------------------------------------------------
    def submit(self, inputs: Any, *, deadline: float | None = None, quantize: bool = False,
               dequantize: bool = False, check_finite: bool = False) -> Future:
        """Queue one request; the Future's result is its Outputs. ``deadline``: seconds from now by which it
        must finish; a request no executor can finish in time fails with DeadlineExceededError at once, and one
        that finishes late fails with it too (its answer came too late to use; ``stats`` counts it as late).
        Without a deadline it waits at most ``max_wait_s`` for an executor to start it."""
        if deadline is not None and deadline <= 0:
            raise ValueError(f"deadline must be a positive number of seconds from now, not {deadline!r}")
        arrays = self._binder.bind(inputs, quantize, check_finite)
        future: Future = Future()
        self._start(arrays, future, dequantize, check_finite, deadline)
        return future

    def submit_bound(self, arrays: list, deadline: float | None = None, here_up_to_s: float = 0.0) -> Future:
        """``submit`` for a host that bound and checked the inputs itself (``edgeaccel serve``). A host thread
        that waits for the answer anyway (a gRPC handler: ``math.inf``) may run the request itself: when an
        executor can start it at once and was measured at most ``here_up_to_s`` a run, it runs in this thread,
        through the same scheduler (place, duty budget, stats, fail-over), instead of being handed to a worker
        thread and waited for; otherwise it goes to the worker as ``submit`` sends it."""
        if deadline is not None and deadline <= 0:
            raise ValueError(f"deadline must be a positive number of seconds from now, not {deadline!r}")
        future: Future = Future()
        self._start(list(arrays), future, False, False, deadline, here_up_to_s)
        return future

    def run(self, inputs: Any, *, deadline: float | None = None, quantize: bool = False, dequantize: bool = False,
            check_finite: bool = False, timeout: float | None = None) -> Outputs:
        """Run once, on whichever executor the policy picks; blocks until done."""
        return self.submit(inputs, deadline=deadline, quantize=quantize, dequantize=dequantize,
                           check_finite=check_finite).result(timeout)

    def _execute(self, arrays: list) -> tuple[list, str | None]:
        future: Future = Future()
        self._start(arrays, future, False, False)
        outputs = future.result()
        return list(outputs), outputs.executor

    def _start(self, arrays: list, outer: Future, dequantize: bool, check_finite: bool,
               deadline: float | None = None, here_up_to_s: float = 0.0) -> None:
        with self._cond:
            if self._closed:
                raise ModelClosedError(f"{self.info.path.name} was closed", hint="load it again with edgeaccel.load")
            now = self._clock.now()
            request = self._scheduler.new_request(now, now + deadline if deadline is not None else None,
                                                  (arrays, dequantize, check_finite), outer)
            if not self._scheduler.submit(request):
                raise OverloadedError(
                    f"{self._scheduler.queued} requests are already queued (max_queue={self._scheduler.max_queue})",
                    hint="submit more slowly, wait for futures, or raise max_queue")
            # Dispatched from the caller's thread (after the decision, where one is due, as the dispatcher would
            # make it first): waking the dispatcher thread for each request cost a thread switch (~80 us on a
            # busy 2-core CPU, the GIL handed back and forth) before the request reached its executor.
            self._scheduler.maybe_decide(now)
            assigned, shed = self._scheduler.dispatch(now)
            if self._scheduler.queued or not assigned:  # something waits: the dispatcher times it (max_wait_s,
                self._dirty = True  # the duty budget's refill, the next decision)
                self._cond.notify_all()
        self._hand_out(assigned, shed, request if here_up_to_s > 0 else None, here_up_to_s)

    def _hand_out(self, assigned: list, shed: list, here: Request | None = None, up_to_s: float = 0.0) -> None:
        """Fail the shed requests, send the assigned ones to their executors' worker threads (``here`` runs in
        this thread instead, after the others are on their way, where its executor's measured run takes at
        most ``up_to_s``)."""
        for request in shed:
            _fail(request.future, DeadlineExceededError(
                "no executor could finish this request by its deadline",
                hint="give it a later deadline, or lower the request rate (see model.stats)"))
        inline = None
        for i, (request, slot) in enumerate(assigned):
            if request is here and (up_to_s == math.inf or (slot.latency_s or math.inf) <= up_to_s):
                inline = slot
                continue
            try:
                self._pools[slot.name].submit(self._run_probe if request.probe else self._run_one, request, slot)
            except RuntimeError:  # the interpreter is exiting with requests in flight: nothing runs any more
                self._exiting([r for r, _ in assigned[i:]] + ([here] if inline is not None else []))
                return
        if inline is not None:
            self._run_one(here, inline)

    def _dispatch_loop(self) -> None:
        while True:
            with self._cond:
                if self._closed:
                    return
                now = self._clock.now()
                self._scheduler.maybe_decide(now)
                assigned, shed = self._scheduler.dispatch(now)
                expired = self._scheduler.expire(now)
                probe = self._scheduler.due_probe(now) if not assigned else None
                if probe is not None:
                    assigned = [(self._scheduler.start_probe(probe, now), probe)]
                wake = self._scheduler.next_wakeup(now)
            for request, why in expired:
                _fail(request.future, InferenceTimeoutError(
                    why, hint="see model.trace for what the policy is doing; pass a deadline, or raise max_wait_s"))
            self._hand_out(assigned, shed)
            if self._closed:  # the interpreter is exiting (_hand_out could not start a worker)
                return
            with self._cond:
                if not self._dirty and not self._closed:
                    timeout = 0.5 if wake is None else min(0.5, max(0.0, wake - self._clock.now()))
                    if timeout > 0:
                        self._cond.wait(timeout)
                self._dirty = False

    def _exiting(self, requests: list[Request]) -> None:
        with self._cond:
            self._closed = True
            requests += self._scheduler.drain()
        for request in requests:
            _fail(request.future, ModelClosedError("the program exited before this request ran",
                                                   hint="wait for the futures (or close the model) before exit"))

    def _run_one(self, request: Request, slot: ExecutorSlot) -> None:
        arrays, dequantize, check_finite = request.payload
        request.started = self._clock.now()
        error: BaseException | None = None
        try:
            results = slot.executor.run(arrays)
        except EdgeAccelError as exc:  # the runtime's own error, or an unplugged device's
            error = exc
        except Exception as exc:  # an executor that breaks the contract: same treatment, never lost
            error = ExecutorError(f"{slot.name} raised {type(exc).__name__}: {exc}", runtime=slot.name)
        end = self._clock.now()
        with self._cond:
            self._scheduler.finished(request, slot, end, ok=error is None)
            retry = False
            if error is not None:
                retry = fails_over(error) and self._after_failure(request, slot, error)
            elif self._ledger.answered(request, slot, self._scheduler.slots):
                self._scheduler.apply(self._scheduler.decision, end)
            # a place freed for a waiting request, a decision due, or a stale executor to probe now that its
            # device is idle: the dispatcher's. Otherwise it sleeps on: waking it here delays this answer (the
            # thread switch, the GIL)
            if self._scheduler.queued or self._scheduler.decision_due(end) or self._scheduler.due_probe(end):
                self._dirty = True
                self._cond.notify_all()
        if error is not None:
            if not retry:
                _fail(request.future, error)
            return
        if request.deadline is not None and end > request.deadline:
            _fail(request.future, DeadlineExceededError(
                f"finished {1000 * (end - request.deadline):.1f} ms after its deadline on {slot.name}",
                hint="give it a later deadline, or lower the request rate (see model.stats)"))
            return
        self._settle(request.future, results, dequantize, check_finite, slot.name)

    def _run_probe(self, request: Request, slot: ExecutorSlot) -> None:
        """Re-measure ``slot`` on the model's own sample inputs (the device is idle); the answer goes nowhere."""
        ok = True
        try:
            if self._probe_inputs is None:
                from ..selection.calibration import sample_inputs

                self._probe_inputs = sample_inputs(self._inputs, 2, 0)
            inputs = self._probe_inputs[self._probes % len(self._probe_inputs)]
            self._probes += 1
            request.started = self._clock.now()
            slot.executor.run(inputs)
        except Exception as exc:  # a probe's failure is logged; a caller's request would count it against it
            ok = False
            log.info("re-measuring %s failed: %s: %s", slot.name, type(exc).__name__, exc)
        end = self._clock.now()
        with self._cond:
            self._scheduler.finished(request, slot, end, ok=ok)
            self._dirty = True
            self._cond.notify_all()

    def _after_failure(self, request: Request, slot: ExecutorSlot, error: BaseException) -> bool:
        """Record the failure (failover.py says when it counts); requeue the request elsewhere if any executor
        has not failed it yet. Called with the lock held."""
        others = self._ledger.failed(request, slot, error, self._scheduler.slots)
        self._record("run", slot.name, error, others[0].name if others else None)
        if others:
            self._scheduler.requeue(request)
            return True
        return False

    # -- lifetime --------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop scheduling, fail queued requests with ModelClosedError, release every executor. Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            pending = self._scheduler.drain()
            self._cond.notify_all()
        self._dispatcher.join()
        for request in pending:
            _fail(request.future, ModelClosedError("the model was closed before this request ran"))
        for pool in self._pools.values():
            pool.shutdown(wait=True)
        for executor in self._executors:
            try:
                executor.close()
            except Exception as exc:  # closing must go on for the others
                log.warning("closing %s failed: %s", executor.info.name, exc)

    def __repr__(self) -> str:
        names = ", ".join(s.name for s in self._scheduler.slots)
        return f"<edgeaccel.ScheduledModel {self.info.path.name} on {names} policy={self._policy}>"

