"""Scheduling policies: pure functions from (Observation, PolicyState) to (Decision, PolicyState).

- ``latency``: every executor, least expected completion first; each device flat out until its identified
  plant model forecasts the critical trip (less a margin), then the highest duty that keeps it there, never
  less than ``thermal`` would grant (scheduling/modelled.py).
- ``thermal``: hold every device below its passive trip with the most throughput (duty cycle per device,
  work moves to whichever executor still has thermal room).
- ``efficiency``: the executor with the least measured energy per inference, spilling to others only when a
  request's deadline needs it; falls back to ``latency`` routing when energy cannot be measured.
- ``power``: a power budget in watts, held by duty-cycling devices, the most efficient first.
- ``fastest``: the naive baseline ("always the fastest executor", no thermal awareness at all); for benchmarks.

No policy reads a file or a clock: all they know is in the Observation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from .control import ControlStep, DeviceControl, ThermalConfig, safety_step
from .decision import Decision, DeviceView, ExecutorView, Observation
from . import modelled

POLICIES = ("latency", "efficiency", "thermal", "power", "fastest")
_PRIORITY = {"back_off": 0, "return": 1, "duty_cycle": 2, "lower_concurrency": 3, "shift": 4, "no_telemetry": 5,
             "hold": 6}


@dataclass(frozen=True)
class PolicyState:
    controls: dict[str, DeviceControl] = field(default_factory=dict)
    last_time: float | None = None
    preferred: str | None = None  # efficiency: the executor currently preferred
    power_level: float | None = None  # power: how many devices' worth of duty is granted


class Policy:
    name = "policy"
    route = "earliest"

    def __init__(self, config: ThermalConfig | None = None) -> None:
        self.config = config or ThermalConfig()

    def initial_state(self) -> PolicyState:
        return PolicyState()

    def decide(self, obs: Observation, state: PolicyState) -> tuple[Decision, PolicyState]:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.name

    # -- shared assembly -----------------------------------------------------------------------------------
    def _dt(self, obs: Observation, state: PolicyState) -> float:
        return 0.0 if state.last_time is None else max(0.0, obs.now - state.last_time)

    def _assemble(self, obs: Observation, duty: dict[str, float], steps: dict[str, ControlStep],
                  order: tuple[str, ...] = (), extra: list[tuple[str, str]] | None = None,
                  route: str | None = None) -> Decision:
        enabled = {e.name: duty.get(e.device, 1.0) > 0.0 for e in obs.executors}
        concurrency = {e.name: _concurrency(e, duty.get(e.device, 1.0)) for e in obs.executors}
        events = [(s.event, s.note) for s in steps.values() if s.event]
        events += extra or []
        if any(concurrency[e.name] < e.max_concurrency for e in obs.executors if enabled[e.name]):
            events.append(("lower_concurrency", "executors on limited devices run fewer requests at once"))
        # "limited" with the controller's hysteresis where there is one, so the label does not flap
        limited = [d for d, v in duty.items()
                   if (steps[d].control.limited or v <= 0.0 if d in steps else v < 1.0)]
        free = [e.name for e in obs.executors if e.device not in limited and enabled[e.name]]
        if limited and free:
            events.append(("shift", f"{', '.join(limited)} limited: work moves to {', '.join(free)}"))
        if events:
            events.sort(key=lambda ev: _PRIORITY.get(ev[0], 9))
            action = events[0][0]
            reason = "; ".join(dict.fromkeys(note for _, note in events))
        else:
            # no change of state: the action names the state the devices are held in, not "hold" while
            # every device is cut to a fraction of its time
            action = "duty_cycle" if any(v < self.config.limit_below for v in duty.values()) else "hold"
            reason = "; ".join(s.note for s in steps.values()) or "no change"
        return Decision(dict(duty), enabled, concurrency, route or self.route, order, action, reason)


def _concurrency(executor: ExecutorView, duty: float) -> int:
    if duty <= 0:
        return 0
    return max(1, min(executor.max_concurrency, math.ceil(executor.max_concurrency * duty)))


def _devices(obs: Observation) -> list[str]:
    return list(dict.fromkeys(e.device for e in obs.executors))


def _safety(obs: Observation, state: PolicyState, config: ThermalConfig) -> tuple[dict, dict, dict]:
    """Apply the critical back-off to every device; (duty, steps, controls)."""
    duty, steps, controls = {}, {}, {}
    for name in _devices(obs):
        dev = obs.devices.get(name, DeviceView(name, temp_reason="not sampled"))
        ctl = state.controls.get(name, DeviceControl())
        step = safety_step(dev, ctl, config)
        if step is None:
            duty[name], controls[name] = 1.0, ctl
        else:
            duty[name], controls[name], steps[name] = step.duty, step.control, step
    return duty, steps, controls


class LatencyPolicy(Policy):
    name = "latency"

    def decide(self, obs, state):
        dt = self._dt(obs, state)
        duty, steps, controls = {}, {}, {}
        for name in _devices(obs):
            dev = obs.devices.get(name, DeviceView(name, temp_reason="not sampled"))
            timed = [e.latency_s for e in obs.executors if e.device == name and e.latency_s]
            step = modelled.latency(dev, state.controls.get(name, DeviceControl()), self.config, dt,
                                    min(timed) if timed else None)
            duty[name], controls[name], steps[name] = step.duty, step.control, step
        decision = self._assemble(obs, duty, steps)
        if decision.action == "hold":
            decision = replace(decision, reason=f"least expected completion; {decision.reason}")
        return decision, replace(state, controls=controls, last_time=obs.now)


class ThermalPolicy(Policy):
    name = "thermal"

    def decide(self, obs, state):
        dt = self._dt(obs, state)
        duty, steps, controls = {}, {}, {}
        for name in _devices(obs):
            dev = obs.devices.get(name, DeviceView(name, temp_reason="not sampled"))
            step = modelled.thermal(dev, state.controls.get(name, DeviceControl()), self.config, dt)
            duty[name], controls[name], steps[name] = step.duty, step.control, step
        return self._assemble(obs, duty, steps), replace(state, controls=controls, last_time=obs.now)


class EfficiencyPolicy(Policy):
    """Least energy per inference first. Measured where the device has a counter (RAPL, NVML, hwmon,
    INA3221); elsewhere estimated from the executor's power figure (a profile's typical power, the CPU's
    share of its package power) times its measured service time, and labelled so. An executor with neither
    is tried after those with a figure (and still takes work when they are busy); only when no executor has
    any figure does the policy route for latency."""

    name = "efficiency"
    route = "cheapest"

    def __init__(self, config: ThermalConfig | None = None, switch_margin: float = 0.10) -> None:
        super().__init__(config)
        self.switch_margin = switch_margin  # a new favourite must be this much cheaper (no flapping)

    def decide(self, obs, state):
        duty, steps, controls = _safety(obs, state, self.config)
        costs = energy_costs(obs.executors)
        unknown = [e.name for e in obs.executors if e.name not in costs and _can_cost(e)]  # measure these first
        blind = [e.name for e in obs.executors if not _can_cost(e)]
        if not costs and not unknown:
            decision = self._assemble(obs, duty, steps, route="earliest")
            why = ("energy per inference is not measurable on any device (no energy counter) and no executor has a "
                   "power figure (profile or estimate): routing for latency")
            if decision.action == "hold":
                decision = replace(decision, reason=why, action="no_telemetry")
            return decision, replace(state, controls=controls, last_time=obs.now)
        known = sorted(costs, key=lambda n: costs[n][0])
        preferred = state.preferred
        extra = []
        if known:
            best = known[0]
            current = costs.get(preferred) if preferred is not None else None
            if current is None or costs[best][0] < current[0] * (1 - self.switch_margin):
                if preferred is not None and best != preferred:
                    extra.append(("shift", f"{best} now cheapest at {_joules(costs[best])}"))
                preferred = best
        rest = [n for n in known if n != preferred]
        order = tuple(unknown + ([preferred] if preferred in costs else []) + rest + blind)
        decision = self._assemble(obs, duty, steps, order=order, extra=extra)
        if decision.action == "hold":
            listed = ", ".join(f"{n} {_joules(costs[n])}" for n in known) or "none known yet"
            reason = f"cheapest first: {listed}"
            if unknown:
                reason += f"; measuring {', '.join(unknown)}"
            if blind:
                reason += (f"; no energy figure for {', '.join(blind)} (no counter, no power figure): tried after the "
                           "others")
            decision = replace(decision, reason=reason)
        return decision, replace(state, controls=controls, last_time=obs.now, preferred=preferred)


def energy_costs(executors) -> dict[str, tuple[float, str]]:
    """Executor -> (joules per inference, "measured" or the estimate's source), for those that have one."""
    out = {}
    for e in executors:
        if e.energy_j is not None:
            out[e.name] = (e.energy_j, "measured")
        elif not e.energy_measurable and e.estimated_energy_j is not None:
            out[e.name] = (e.estimated_energy_j, e.power_source or "estimated")
    return out


def _can_cost(e: ExecutorView) -> bool:
    return e.energy_measurable or e.power_w is not None


def _joules(cost: tuple[float, str]) -> str:
    joules, source = cost
    label = "measured" if source == "measured" else (source if source.startswith("estimated") else
                                                     f"estimated: {source}")
    return f"{joules:.4f} J ({label})"


class PowerBudgetPolicy(Policy):
    name = "power"

    def __init__(self, watts: float, config: ThermalConfig | None = None, gain: float = 1.5,
                 headroom: float = 0.03, leak_per_s: float = 0.02) -> None:
        super().__init__(config)
        if not watts or watts <= 0:
            raise ValueError(f"a power budget must be a positive number of watts, not {watts!r}")
        self.watts = float(watts)
        self.gain = gain  # devices' worth of duty per second per unit of relative error
        self.headroom = headroom  # aim this fraction below the budget
        self.leak_per_s = leak_per_s  # how fast unused budget is granted back (devices' worth per second)

    def __str__(self) -> str:
        return f"power {self.watts:g} W"

    def decide(self, obs, state):
        dt = self._dt(obs, state)
        devices = _devices(obs)
        safe_duty, steps, controls = _safety(obs, state, self.config)
        views = [obs.devices.get(n, DeviceView(n)) for n in devices]
        measured = [v for v in views if v.power_w is not None]
        figures = _device_power_figures(obs)
        estimated = {v.name: figures[v.name] * v.busy for v in views if v.power_w is None and v.name in figures}
        if not measured and not estimated:
            decision = self._assemble(obs, safe_duty, steps)
            why = ("no device reports power (no RAPL/hwmon/INA3221/NVML) and none has a power figure: the budget "
                   "cannot be held; serving unlimited")
            return replace(decision, action="no_telemetry", reason=why), replace(state, controls=controls,
                                                                               last_time=obs.now)
        total = sum(v.power_w for v in measured) + sum(estimated.values())
        level = state.power_level if state.power_level is not None else float(len(devices))
        error = (self.watts * (1 - self.headroom) - total) / self.watts
        change = self.gain * error * dt
        binding = any(v.busy >= 0.85 * min(1.0, max(0.0, level - i)) for i, v in enumerate(views))
        if change > 0 and not binding:
            change = min(change, self.leak_per_s * dt)
        level = min(float(len(devices)), max(0.0, level + change))
        ranked = sorted(devices, key=lambda n: _device_cost(n, obs))
        duty = {}
        for rank, name in enumerate(ranked):
            duty[name] = min(safe_duty[name], min(1.0, max(0.0, level - rank)))
        unmeasured = [v.name for v in views if v.power_w is None and v.name not in estimated]
        note = f"{total:.2f} W of {self.watts:g} W budget; duty " + ", ".join(f"{n} {duty[n]:.2f}" for n in ranked)
        if estimated:
            note += "; estimated (no power sensor): " + ", ".join(
                f"{n} {w:.2f} W = {figures[n]:.2f} W busy x its busy share" for n, w in estimated.items())
        if unmeasured:
            note += (f"; power of {', '.join(unmeasured)} is neither measured nor estimated, the budget covers only "
                     "the rest")
        extra = [("duty_cycle", note)] if any(d < 1.0 for d in duty.values()) else []
        decision = self._assemble(obs, duty, steps, extra=extra)
        if decision.action == "hold":
            decision = replace(decision, reason=note)
        return decision, replace(state, controls=controls, last_time=obs.now, power_level=level)


def _device_cost(device: str, obs: Observation) -> tuple:
    """Devices cheapest first by energy per inference, measured or estimated; those with neither last."""
    costs = energy_costs(e for e in obs.executors if e.device == device)
    return (0, min(c for c, _ in costs.values()), device) if costs else (1, 0.0, device)


def _device_power_figures(obs: Observation) -> dict[str, float]:
    """Device -> the busy power its executors' figures give (the largest, to be safe)."""
    out: dict[str, float] = {}
    for e in obs.executors:
        if e.power_w is not None:
            out[e.device] = max(out.get(e.device, 0.0), e.power_w)
    return out


class AlwaysFastest(Policy):
    """The naive baseline the benchmark compares against: every request to the executor with the lowest
    service time, ignoring temperature entirely (not even the critical back-off)."""

    name = "fastest"

    def decide(self, obs, state):
        timed = [e for e in obs.executors if e.latency_s is not None]
        fastest = min(timed, key=lambda e: e.latency_s).name if timed else obs.executors[0].name
        enabled = {e.name: e.name == fastest for e in obs.executors}
        concurrency = {e.name: e.max_concurrency if enabled[e.name] else 0 for e in obs.executors}
        duty = {d: 1.0 for d in _devices(obs)}
        decision = Decision(duty, enabled, concurrency, "earliest", (fastest,), "hold",
                            f"naive baseline: everything to {fastest}, temperature ignored")
        return decision, replace(state, last_time=obs.now)


def make_policy(name: str, power_budget_w: float | None = None, config: ThermalConfig | None = None) -> Policy:
    """A policy by name: latency, efficiency, thermal, power (needs ``power_budget_w``), fastest."""
    key = (name or "").strip().lower()
    if key == "latency":
        return LatencyPolicy(config)
    if key == "thermal":
        return ThermalPolicy(config)
    if key == "efficiency":
        return EfficiencyPolicy(config)
    if key in ("power", "power-budget", "budget"):
        if power_budget_w is None:
            raise ValueError("the power policy needs a budget: pass power_budget_w (watts), "
                             "or --power-budget on the command line")
        return PowerBudgetPolicy(power_budget_w, config)
    if key == "fastest":
        return AlwaysFastest(config)
    raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(POLICIES)}")
