"""The scheduler's engine, shared by the threaded ScheduledModel and the discrete-event simulator: a queue of
requests ordered by deadline, the policy's latest decision, a duty-cycle budget per device, and the routing
pass that hands queued requests to executors. It never reads a clock itself: every call says what time it is.

Routing is list scheduling on expected finish times: each executor has a time it can next start (now if it
has a free slot and duty budget; else when its running request should end or its budget refills) and a
measured service time. Requests are taken in deadline order; each goes to the executor that finishes it
first ("earliest") or to the policy's preferred executor when that still meets its deadline ("cheapest"). A
request whose best executor is busy stays queued with that executor's time reserved, so a slow executor takes
work only when waiting for the fast one would take longer. A request that no executor can finish by its
deadline is shed at once (its future gets DeadlineExceededError) rather than delaying the others.

Executors on one device take turns (scheduling/routing.py says why). What each decision learns is in
scheduling/accounting.py, the probes that re-measure an idle executor in scheduling/probes.py.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections import deque
from dataclasses import replace
from typing import Any
from collections.abc import Callable

from ..telemetry.sampler import DeviceSample, TelemetrySampler
from .accounting import account, observe
from .decision import Decision, DecisionRecord, Observation
from .policies import Policy, PolicyState
from .probes import due_probe, probe_due_at, start_probe
from .routing import first_per_device, ready_time, turn
from .slots import DeviceBudget, ExecutorSlot, Request
from .stats import DeviceCounters, ExecutorCounters, SchedulerStats, scheduler_stats
from .trace import Trace

SCAN_LIMIT = 64  # requests looked at per routing pass: bounds its cost when the queue is long
LATENCY_EMA = 0.2
WARMUP_RUNS = 2  # an executor's first runs (lazy initialisation) are not averaged in: the latest one stands
REMEASURE_S = 5.0  # an executor not measured for this long is measured again (a probe, or one request)


class Scheduler:
    def __init__(self, slots: list[ExecutorSlot], policy: Policy, sampler: TelemetrySampler | None = None, *,
                 interval_s: float = 0.5, simulated: bool = False, before_sample: Callable[[float], None] | None = None,
                 trace_limit: int = 200_000, patience_s: float = 1.0, bucket_s: float = 0.5,
                 max_queue: int | None = None, remeasure_s: float = REMEASURE_S,
                 max_wait_s: float | None = None, remeasure_with_requests: bool = True) -> None:
        if not slots:
            raise ValueError("a scheduler needs at least one executor")
        names = [s.name for s in slots]
        if len(set(names)) != len(names):
            raise ValueError(f"executor names must be unique: {names}")
        self.slots = list(slots)
        self.by_name = {s.name: s for s in slots}
        self.policy = policy
        self.sampler = sampler
        self.interval_s = max(interval_s, sampler.min_interval_s if sampler else 0.0)
        self.simulated = simulated
        self.before_sample = before_sample
        self.patience_s = patience_s
        self.max_queue = max_queue
        self.remeasure_s = remeasure_s
        # True: a stale executor is re-measured by handing it a caller's request (the simulator's model);
        # False: callers' requests never go to an executor for the sake of measuring it, and the host runs a
        # probe on its own inputs while the device is idle instead (``due_probe``; ScheduledModel does)
        self.remeasure_with_requests = remeasure_with_requests
        if max_wait_s is not None and max_wait_s <= 0:
            raise ValueError(f"max_wait_s must be a positive number of seconds or None, not {max_wait_s!r}")
        self.max_wait_s = max_wait_s  # a request without a deadline waits at most this long to start
        self.expired = 0  # requests failed because none of the executors started them within max_wait_s
        self.rejected = 0  # requests refused because the queue was full
        self.devices = list(dict.fromkeys(s.device for s in slots))
        self.by_device = {d: [s for s in slots if s.device == d] for d in self.devices}
        self._index = {s.name: i for i, s in enumerate(slots)}
        self._running_on: dict[str, set[Request]] = {d: set() for d in self.devices}
        capacity = {d: max(s.max_concurrency for s in self.by_device[d]) for d in self.devices}
        self.budgets = {d: DeviceBudget(capacity[d], bucket_s) for d in self.devices}
        self.state: PolicyState = policy.initial_state()
        self.decision = Decision({d: 1.0 for d in self.devices}, {s.name: True for s in slots},
                                 {s.name: s.max_concurrency for s in slots}, policy.route, tuple(names), "hold",
                                 "not decided yet")
        self.trace = Trace(trace_limit, simulated)
        self._queue: list[tuple[float, int, Request]] = []  # (deadline or inf, seq, request): earliest deadline first
        self._undated: deque[Request] = deque()  # queued requests without a deadline, in arrival order
        self._seq = itertools.count()
        self._next_decision: float | None = None
        self._last_decision: float | None = None
        self._started_at: float | None = None
        self._last_time: float | None = None
        self._arrivals = 0
        self._arrival_rate = 0.0
        self.last_arrival: float | None = None  # a probe re-measures only a model in use (``due_probe``)
        self.samples: dict[str, DeviceSample] = {}
        self.exec_counters = {s.name: ExecutorCounters(s.device) for s in slots}
        self.device_counters = {d: DeviceCounters() for d in self.devices}
        self.dispatch_cost_s: deque[float] = deque(maxlen=100_000)
        self.decision_cost_s: deque[float] = deque(maxlen=100_000)
        self.tick_cost_s: deque[float] = deque(maxlen=100_000)  # sample + decide + apply + record
        self.decisions = 0
        self.shed = 0  # requests refused because no executor could meet their deadline

    # -- requests ---------------------------------------------------------------------------------------------
    def new_request(self, now: float, deadline: float | None = None, payload: Any = None, future: Any = None) -> Request:
        return Request(next(self._seq), now, deadline, payload, future)

    def submit(self, request: Request) -> bool:
        """Queue a request; False (and not queued) when the queue already holds ``max_queue`` requests."""
        if self._started_at is None:
            self._started_at = request.arrival
        self._arrivals += 1
        self.last_arrival = request.arrival
        if self.max_queue is not None and len(self._queue) >= self.max_queue:
            self.rejected += 1
            return False
        self._push(request)
        return True

    def requeue(self, request: Request) -> None:
        self._push(request)

    def _push(self, request: Request, entering: bool = True) -> None:
        heapq.heappush(self._queue, (*request.key(), request))
        request.queued = True
        if entering and request.deadline is None:
            self._undated.append(request)

    def _pop(self) -> Request:
        request = heapq.heappop(self._queue)[2]
        request.queued = False
        return request

    @property
    def queued(self) -> int:
        return len(self._queue)

    def drain(self) -> list[Request]:
        out, self._queue = [entry[2] for entry in self._queue], []
        self._undated.clear()
        return out

    def expire(self, now: float) -> list[tuple[Request, str]]:
        """Take out the requests without a deadline that have waited ``max_wait_s`` without an executor
        starting them (every executor held back, or so far behind): (request, why) for each, saying what the
        policy is doing. Cheap when nothing is due (the oldest request is tracked)."""
        if self.max_wait_s is None or not self._queue:
            return []
        due = now - self.max_wait_s
        if self._oldest_arrival() > due:
            return []
        keep, out = [], []
        for entry in self._queue:
            request = entry[2]
            if request.deadline is None and request.arrival <= due:
                request.queued = False
                out.append(request)
            else:
                keep.append(entry)
        if not out:
            return []
        heapq.heapify(keep)
        self._queue = keep
        self.expired += len(out)
        held = [s.name for s in self.slots if not self.decision.enabled.get(s.name, True)
                or s.failed_permanently or self.decision.duty.get(s.device, 1.0) <= 0.0]
        state = (f"every executor is held back ({self.decision.action}: {self.decision.reason})"
                 if len(held) == len(self.slots) else f"the policy says {self.decision.action}: {self.decision.reason}")
        why = f"no executor started this request within max_wait_s={self.max_wait_s:g} s: {state}"
        return [(request, why) for request in out]

    def _oldest_arrival(self) -> float:
        """Arrival of the oldest queued request without a deadline (those queue in arrival order; one that
        failed over and was queued again counts from its requeue here, and is caught by expire's scan)."""
        undated = self._undated
        while undated and not undated[0].queued:
            undated.popleft()
        return undated[0].arrival if undated else math.inf

    # -- decisions -----------------------------------------------------------------------------------------
    def decision_due(self, now: float) -> bool:
        return self._next_decision is None or now >= self._next_decision

    def maybe_decide(self, now: float, force: bool = False) -> bool:
        if not force and not self.decision_due(now):
            return False
        if self._started_at is None:
            self._started_at = now
        tick = time.perf_counter()
        if self.before_sample is not None:
            self.before_sample(now)
        samples = self.sampler.sample(now) if self.sampler is not None else {}
        account(self, now, samples)
        observation = self.observe(now, samples)
        started = time.perf_counter()
        decision, self.state = self.policy.decide(observation, self.state)
        self.decision_cost_s.append(time.perf_counter() - started)
        self.apply(decision, now)
        self.trace.append(DecisionRecord(now - self._started_at, str(self.policy), decision.action, decision.reason,
                                         observation.devices, dict(decision.duty), dict(decision.enabled),
                                         dict(decision.concurrency)))
        self.decisions += 1
        self.tick_cost_s.append(time.perf_counter() - tick)
        self._next_decision = now + self.interval_s
        return True

    def apply(self, decision: Decision, now: float) -> None:
        enabled = dict(decision.enabled)
        for slot in self.slots:
            if slot.failed_permanently:
                enabled[slot.name] = False
        self.decision = replace(decision, enabled=enabled)
        for device, budget in self.budgets.items():
            budget.set_duty(decision.duty.get(device, 1.0), now)

    def observe(self, now: float, samples: dict[str, DeviceSample]) -> Observation:
        """The Observation the policy decides from (scheduling/accounting.py); starts the next interval."""
        return observe(self, now, samples)

    # -- routing ---------------------------------------------------------------------------------------------
    def _guess_latency(self) -> float:
        known = [s.latency_s for s in self.slots if s.latency_s]
        return sum(known) / len(known) if known else 0.01

    def dispatch(self, now: float) -> tuple[list[tuple[Request, ExecutorSlot]], list[Request]]:
        """Hand queued requests to executors that can start now. Returns (assignments, shed requests)."""
        if not self._queue:
            return [], []
        started = time.perf_counter()
        decision = self.decision
        guess = self._guess_latency()
        ready: dict[ExecutorSlot, float] = {}
        limit: dict[ExecutorSlot, int] = {}
        for slot in self.slots:
            conc = decision.concurrency.get(slot.name, slot.max_concurrency)
            if not decision.enabled.get(slot.name, True) or conc <= 0:
                continue
            budget = self.budgets[slot.device]
            budget.refill(now)
            limit[slot] = conc
            ready[slot] = ready_time(slot, conc, budget, now)
        for slot in ready:
            ready[slot] = max(ready[slot], turn(slot, self.by_device[slot.device], now))
        if not any(t <= now and s.running < limit[s] for s, t in ready.items()):
            shed = self._shed_late(now)  # nothing can start now: only requests already past their deadline go
            self.dispatch_cost_s.append(time.perf_counter() - started)
            return [], shed
        order = {name: i for i, name in enumerate(decision.order)}
        assigned: list[tuple[Request, ExecutorSlot]] = []
        shed: list[Request] = []
        keep: list[Request] = []
        scanned = 0
        while self._queue and scanned < SCAN_LIMIT:
            request = self._pop()
            scanned += 1
            every = [(slot, t, t + (slot.latency_s or guess)) for slot, t in ready.items()
                     if slot.name not in request.tried]
            candidates = first_per_device(every, order, self._index) if decision.route == "earliest" else every
            if not candidates:
                if request.deadline is not None and now > request.deadline:
                    shed.append(request)
                else:
                    keep.append(request)
                continue
            best = min(candidates, key=lambda c: c[2])
            if decision.route == "cheapest":
                ranked = sorted(candidates, key=lambda c: order.get(c[0].name, len(order)))
                for slot, t, done in ranked:
                    if (done <= request.deadline) if request.deadline is not None else (t - now <= self.patience_s):
                        best = (slot, t, done)
                        break
            for c in every:
                if c[0].measured_at is None:
                    c[0].measured_at = now  # staleness counts from the first time it could have taken work
            # one request refreshes a stale estimate: a slow first run would otherwise stick forever, and an
            # executor the route never picks (the last in a cost order) would never be measured again
            stale = [c for c in every if c[1] <= now and c[0].running < limit[c[0]] and c[0] is not best[0]
                     and now - c[0].measured_at > self.remeasure_s
                     and (request.deadline is None or c[2] <= request.deadline)] if self.remeasure_with_requests else []
            if stale:
                stale[0][0].measured_at = now
                best = stale[0]
            slot, t, done = best
            if request.deadline is not None and done > request.deadline:
                shed.append(request)
                continue
            if t <= now and slot.running < limit[slot]:
                latency = slot.latency_s or guess
                sharing = self._running_on[slot.device]
                request.alone = not sharing  # alone only if nothing else runs on the device while it runs
                for other in sharing:
                    other.alone = False
                sharing.add(request)
                request.expected_s = latency
                request.started = now
                request.attempts += 1
                slot.running += 1
                slot.ends.append(now + latency)
                self.budgets[slot.device].charge(latency)
                ready[slot] = ready_time(slot, limit[slot], self.budgets[slot.device], now)
                for other in self.by_device[slot.device]:
                    if other is not slot and other in ready:
                        ready[other] = max(ready[other], turn(other, self.by_device[other.device], now))
                assigned.append((request, slot))
            else:
                ready[slot] = max(t, now) + (slot.latency_s or guess)  # reserved for this request
                keep.append(request)
            if not any(t <= now and s.running < limit[s] for s, t in ready.items()):
                break
        for request in keep:
            self._push(request, entering=False)
        self.dispatch_cost_s.append(time.perf_counter() - started)
        self.shed += len(shed)
        return assigned, shed

    def _shed_late(self, now: float) -> list[Request]:
        """Requests past their deadline, taken out while no executor can start anything (the queue is ordered
        by deadline, so only its head is looked at)."""
        shed = []
        while self._queue and self._queue[0][0] < now:
            shed.append(self._pop())
        self.shed += len(shed)
        return shed

    def next_wakeup(self, now: float) -> float | None:
        """The next time something can change without an arrival or a completion: a decision is due or a
        duty budget refills enough to start a queued request, or an idle executor's estimate goes stale."""
        times = []
        probe_at = probe_due_at(self, now)
        if probe_at is not None and probe_at > now:
            times.append(probe_at)
        if self._next_decision is not None:
            times.append(self._next_decision)
        if self.max_wait_s is not None and self._queue:
            times.append(self._oldest_arrival() + self.max_wait_s)
        if self._queue:
            for slot in self.slots:
                conc = self.decision.concurrency.get(slot.name, slot.max_concurrency)
                if self.decision.enabled.get(slot.name, True) and conc > 0 and slot.running < conc:
                    t = self.budgets[slot.device].ready_at(now)
                    if t > now and math.isfinite(t):
                        times.append(t)
        return min(times) if times else None

    # -- probes (scheduling/probes.py) ------------------------------------------------------------------------
    def due_probe(self, now: float) -> ExecutorSlot | None:
        return due_probe(self, now)

    def start_probe(self, slot: ExecutorSlot, now: float, payload: Any = None) -> Request:
        return start_probe(self, slot, now, payload)

    # -- completions ------------------------------------------------------------------------------------------
    def finished(self, request: Request, slot: ExecutorSlot, end: float, ok: bool = True) -> None:
        slot.running = max(0, slot.running - 1)
        self._running_on[slot.device].discard(request)
        if slot.ends:
            expected_end = (request.started or end) + request.expected_s
            slot.ends.remove(min(slot.ends, key=lambda e: abs(e - expected_end)))
        service = max(0.0, end - (request.started if request.started is not None else end))
        self.budgets[slot.device].charge(service - request.expected_s)
        c = self.exec_counters[slot.name]
        device = self.device_counters[slot.device]
        device.interval_busy[slot.name] = device.interval_busy.get(slot.name, 0.0) + service
        c.busy_s += service
        if not ok:
            if not request.probe:
                c.failed += 1
            return
        slot.measured += 1
        slot.measured_at = end
        if slot.latency_s is None or slot.measured <= WARMUP_RUNS:
            slot.latency_s = service
        else:
            slot.latency_s = (1 - LATENCY_EMA) * slot.latency_s + LATENCY_EMA * service
        if request.alone:
            slot.alone_s = service if slot.alone_s is None or slot.measured <= WARMUP_RUNS else \
                (1 - LATENCY_EMA) * slot.alone_s + LATENCY_EMA * service
        if request.probe:  # the executor's time, not a caller's request: no completion, latency or deadline
            c.probes += 1
            return
        c.completed += 1
        device.interval_runs[slot.name] = device.interval_runs.get(slot.name, 0) + 1
        c.service_s.append(service)
        c.latency_s.append(end - request.arrival)
        if request.deadline is not None:
            if end <= request.deadline:
                c.deadline_met += 1
            else:
                c.deadline_missed += 1
        self._last_time = end

    # -- reporting ---------------------------------------------------------------------------------------
    def stats(self, now: float) -> SchedulerStats:
        return scheduler_stats(self, now)
