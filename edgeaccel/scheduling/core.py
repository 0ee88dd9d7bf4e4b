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

Executors on one device take turns: while one has requests running there, the others on that device start
none. Each runtime sizes its threads (or streams) to the whole device, so two side by side (LiteRT and
OpenVINO on one CPU) only preempt each other: measured on a 2-core CPU with mobilenet_v2, 4 requests in flight
over both ran at 0.8x the rate of either alone, and each one's latency estimate, taken under the other's load,
misled the routing. A device's capacity is therefore its largest executor's concurrency, not their sum.
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
from .decision import Decision, DecisionRecord, DeviceView, ExecutorView, Observation
from .policies import Policy, PolicyState
from .slots import DeviceBudget, ExecutorSlot, Request
from .stats import DeviceCounters, DeviceStats, ExecutorCounters, ExecutorStats, SchedulerStats, percentiles
from .trace import Trace

SCAN_LIMIT = 64  # requests looked at per routing pass: bounds its cost when the queue is long
LATENCY_EMA = 0.2
WARMUP_RUNS = 2  # an executor's first runs (lazy initialisation) are not averaged in: the latest one stands
REMEASURE_S = 5.0  # an executor not measured for this long is measured again (a probe, or one request)
SWITCH_MARGIN = 0.1  # another executor on a device takes its work when measured this much faster alone


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
        self._account(now, samples)
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
        dt = (now - self._last_decision) if self._last_decision is not None else 0.0
        devices = {}
        for name in self.devices:
            counters = self.device_counters[name]
            capacity = self.budgets[name].capacity
            busy = sum(counters.interval_busy.values())
            share = min(1.0, busy / (dt * capacity)) if dt > 0 else 0.0
            s = samples.get(name)
            if s is None:
                devices[name] = DeviceView(name, temp_reason="no telemetry for this device", busy=share)
            else:
                devices[name] = DeviceView(name, s.temp_c, s.temp_reason, s.passive_c, s.critical_c, s.slope_c_per_s,
                                           s.power_w, s.power_reason, s.throttled, share,
                                           str(s.status) if s.status is not None else None, s.headroom,
                                           s.limits_note)
        if dt > 0:
            rate = self._arrivals / dt
            self._arrival_rate = rate if self._last_decision is None else 0.7 * self._arrival_rate + 0.3 * rate
        self._arrivals = 0
        for counters in self.device_counters.values():
            counters.interval_busy.clear()
            counters.interval_runs.clear()
        self._last_decision = now
        executors = tuple(self._executor_view(s) for s in self.slots)
        return Observation(now, devices, executors, len(self._queue), self._arrival_rate)

    def _executor_view(self, slot: ExecutorSlot) -> ExecutorView:
        c = self.exec_counters[slot.name]
        measurable = self.device_counters[slot.device].energy_j is not None
        energy = c.energy_j / c.energy_runs if c.energy_runs >= 10 else None
        power = slot.power
        return ExecutorView(slot.name, slot.device, slot.latency_s, energy, measurable, slot.max_concurrency,
                            c.completed, power.watts if power is not None else None,
                            power.source if power is not None else None)

    def _account(self, now: float, samples: dict[str, DeviceSample]) -> None:
        """Time limited / throttled / above passive since the last decision, and energy attributed to executors."""
        dt = (now - self._last_decision) if self._last_decision is not None else 0.0
        for name in self.devices:
            counters = self.device_counters[name]
            if dt > 0 and (self.decision.duty.get(name, 1.0) < 1.0 or
                           any(not self.decision.enabled.get(s.name, True) for s in self.slots if s.device == name)):
                counters.limited_s += dt
            s = samples.get(name)
            if s is None:
                continue
            if s.temp_c is not None:
                counters.samples += 1
                counters.last_temp_c = s.temp_c
                counters.max_temp_c = s.temp_c if counters.max_temp_c is None else max(counters.max_temp_c, s.temp_c)
                if s.passive_c is not None and s.temp_c > s.passive_c:
                    counters.above_passive_s += dt
                if s.critical_c is not None and s.temp_c >= s.critical_c:
                    counters.samples_at_critical += 1
            counters.temp_reason = s.temp_reason
            counters.limits_note = s.limits_note
            if s.throttled:
                counters.hw_throttled_s += dt
            counters.energy_reason = s.energy_reason
            if s.energy_j is not None:
                if counters.last_energy_j is not None:
                    spent = s.energy_j - counters.last_energy_j
                    busy = sum(counters.interval_busy.values())
                    if busy > 0:
                        for executor, seconds in counters.interval_busy.items():
                            c = self.exec_counters[executor]
                            c.energy_j += spent * seconds / busy
                            c.energy_runs += counters.interval_runs.get(executor, 0)
                    else:
                        counters.idle_energy_j += spent
                counters.last_energy_j = s.energy_j
                counters.energy_j = s.energy_j
        self.samples = samples

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
            ready[slot] = self._ready_time(slot, conc, budget, now)
        for slot in ready:
            ready[slot] = max(ready[slot], self._turn(slot, now))
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
            candidates = self._first_per_device(every, order) if decision.route == "earliest" else every
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
                ready[slot] = self._ready_time(slot, limit[slot], self.budgets[slot.device], now)
                for other in self.by_device[slot.device]:
                    if other is not slot and other in ready:
                        ready[other] = max(ready[other], self._turn(other, now))
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

    def _first_per_device(self, candidates: list, order: dict[str, int]) -> list:
        """Routing for time: one executor per device, the first there in the policy's order (the ranking's where
        it gives none), unless another there was measured faster alone (``alone_s``, both measured, by more than
        ``SWITCH_MARGIN``). The others are its fallbacks, not its rivals: they share its cores, and comparing a
        latency measured alone with one measured under load (an executor running two at once) handed the device
        back and forth (on a 2-core CPU, OpenVINO took turns with LiteRT's two streams at 0.7x their rate). A
        stale estimate is still measured again (``dispatch``), so a faster executor is found."""
        by_device: dict[str, list] = {}
        for c in candidates:
            by_device.setdefault(c[0].device, []).append(c)
        chosen = []
        for group in by_device.values():
            group.sort(key=lambda c: order.get(c[0].name, len(order) + self._index[c[0].name]))
            best = group[0]
            for c in group[1:]:
                mine, theirs = c[0].alone_s, best[0].alone_s
                if mine is not None and theirs is not None and mine < theirs * (1 - SWITCH_MARGIN):
                    best = c
            chosen.append(best)
        return chosen

    def _turn(self, slot: ExecutorSlot, now: float) -> float:
        """When ``slot``'s turn on its device comes: now, or once the other executors there have finished
        what they run (just after now if one runs past its expected end: it still holds the device)."""
        t = now
        for other in self.by_device[slot.device]:
            if other is not slot and other.running:
                t = max(t, max(other.ends, default=now), math.nextafter(now, math.inf))
        return t

    @staticmethod
    def _ready_time(slot: ExecutorSlot, conc: int, budget: DeviceBudget, now: float) -> float:
        if slot.running < conc and (budget.duty >= 1.0 or budget.tokens > 0):
            return now
        t = now
        if slot.running >= conc:
            ends = sorted(slot.ends)
            index = slot.running - conc
            t = max(now, ends[index]) if index < len(ends) else now
        return max(t, budget.ready_at(now))

    def next_wakeup(self, now: float) -> float | None:
        """The next time something can change without an arrival or a completion: a decision is due or a
        duty budget refills enough to start a queued request."""
        times = []
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

    # -- probes ------------------------------------------------------------------------------------------------
    def due_probe(self, now: float) -> ExecutorSlot | None:
        """An executor whose estimate is older than ``remeasure_s``, to measure on the host's own inputs now:
        only while no request is queued and nothing runs on its device (a probe never delays a caller's request
        that is already waiting, and is measured alone), only one in rotation with duty budget, and only while
        the model is in use (a request arrived within twice ``remeasure_s``, at least 1 s): an idle model is not
        woken every few seconds to measure executors nobody asks for."""
        if self.remeasure_with_requests or self._queue or self.last_arrival is None:
            return None
        if now - self.last_arrival > max(2 * self.remeasure_s, 1.0):
            return None
        for slot in self.slots:
            if slot.measured_at is None or now - slot.measured_at <= self.remeasure_s:
                continue
            if slot.failed_permanently or not self.decision.enabled.get(slot.name, True):
                continue
            if self.decision.concurrency.get(slot.name, slot.max_concurrency) <= 0 or self._running_on[slot.device]:
                continue
            budget = self.budgets[slot.device]
            budget.refill(now)
            if budget.duty < 1.0 and budget.tokens <= 0:
                continue
            return slot
        return None

    def start_probe(self, slot: ExecutorSlot, now: float, payload: Any = None) -> Request:
        """Book a probe on ``slot`` as dispatch books a request (it holds the device while it runs)."""
        request = Request(-1, now, None, payload, None, probe=True)
        latency = slot.latency_s or self._guess_latency()
        request.alone, request.expected_s, request.started, request.attempts = True, latency, now, 1
        self._running_on[slot.device].add(request)
        slot.running += 1
        slot.ends.append(now + latency)
        slot.measured_at = now
        self.budgets[slot.device].charge(latency)
        return request

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
        start = self._started_at if self._started_at is not None else now
        elapsed = max(0.0, now - start)
        executors = {}
        for slot in self.slots:
            c = self.exec_counters[slot.name]
            device = self.device_counters[slot.device]
            energy = c.energy_j / c.energy_runs if c.energy_runs else None
            reason = None
            if energy is None:
                reason = device.energy_reason or ("no runs in a measured interval yet" if device.energy_j is not None
                                                  else "not sampled yet")
            estimate = slot.power.energy_j(slot.latency_s) if slot.power is not None and energy is None else None
            executors[slot.name] = ExecutorStats(
                slot.device, c.completed, c.failed, c.deadline_met, c.deadline_missed,
                _ms(percentiles(c.service_s)), _ms(percentiles(c.latency_s)), c.busy_s, energy, reason, estimate,
                slot.power.source if estimate is not None else None, c.probes)
        devices = {name: DeviceStats(d.last_temp_c, d.max_temp_c, d.temp_reason, d.limited_s, d.hw_throttled_s,
                                     d.above_passive_s, d.samples_at_critical, d.energy_j, d.energy_reason,
                                     d.idle_energy_j, d.limits_note)
                   for name, d in self.device_counters.items()}
        completed = sum(c.completed for c in self.exec_counters.values())
        return SchedulerStats(
            str(self.policy), self.simulated, elapsed, completed, self.shed, completed / elapsed if elapsed > 0 else 0.0,
            executors, devices, _us(percentiles(self.dispatch_cost_s, (50, 99, 100))),
            _us(percentiles(self.decision_cost_s, (50, 99, 100))), _us(percentiles(self.tick_cost_s, (50, 99, 100))),
            self.sampler.samples if self.sampler else 0, self.sampler.cpu_s if self.sampler else 0.0, self.decisions)


def _ms(p: dict | None) -> dict | None:
    return None if p is None else {k: v * 1000.0 for k, v in p.items()}


def _us(p: dict | None) -> dict | None:
    return None if p is None else {k: v * 1e6 for k, v in p.items()}
