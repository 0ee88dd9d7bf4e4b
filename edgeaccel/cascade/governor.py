"""A thermal or power policy over every stage of every source of a live cascade, and the order in which it sheds.

The policy (``edgeaccel.scheduling``: thermal, power, latency, efficiency) is the one a single model uses: every
``interval_s`` the governor samples each stage's device (``TelemetrySampler``), tells the policy how busy each
device was, and reads back the duty it allows each device (the share of time it may be busy). A device allowed
less than it is doing is relieved in this order, always the same and stated in the report:

1. the later stages' crops on that device, the last stage first: a share of frames goes past that stage
   unlooked (``shed`` with reason "policy"; the share is the same for every source);
2. only when no later-stage work is left on that device to shed (or it runs the first stage), the frame rate:
   frames are admitted at most at ``max_fps`` (all sources together, taken in turn), so that the first stage's
   device works within its duty. A live source's frames that wait meanwhile are replaced (dropped, reason
   "policy"); a file is read more slowly, losing nothing.

Everything it needs comes in as arguments (the clock's time, busy seconds, per-frame device times), so tests
drive it with a simulated clock and a fake sensor tree.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

HISTORY = 512  # plans kept
FULL_TOLERANCE = 0.98  # a first stage that needs this share of its device's allowance has the device to itself


@dataclass(frozen=True)
class Plan:
    keep: dict[str, float] = field(default_factory=dict)  # later stage -> share of frames it looks at (1: all)
    max_fps: float | None = None  # frames admitted a second, all sources together (None: no limit)
    duty: dict[str, float] = field(default_factory=dict)  # device -> duty the policy allows
    reason: str = "no policy"

    @property
    def limiting(self) -> bool:
        return self.max_fps is not None or any(v < 1.0 for v in self.keep.values())

    def to_dict(self) -> dict:
        return {"keep": {k: round(v, 3) for k, v in self.keep.items()},
                "max_fps": None if self.max_fps is None else round(self.max_fps, 2),
                "duty": {k: round(v, 3) for k, v in self.duty.items()}, "reason": self.reason}


def shed_plan(duty: dict[str, float], stages: list[tuple[str, str]], stage_s: dict[str, float],
              rate: float) -> Plan:
    """What to shed so that every device works within ``duty``. ``stages``: (name, device) in cascade order;
    ``stage_s``: each stage's device seconds a frame (all its crops); ``rate``: frames a second now."""
    keep = {name: 1.0 for name, _ in stages[1:]}
    first, first_device = stages[0]
    notes, caps = [], []
    for device, allowed_share in duty.items():
        if allowed_share >= 1.0:
            continue
        on = [(k, name) for k, (name, dev) in enumerate(stages) if dev == device]
        if not on:
            continue
        allowed = allowed_share / rate if rate > 0 else float("inf")  # device seconds a frame
        need = sum(stage_s.get(name, 0.0) for _, name in on)
        for k, name in reversed(on):  # the last stage first; the first stage's frames are never shed here
            if k == 0 or need <= allowed:
                break
            cost = stage_s.get(name, 0.0)
            cut = min(cost, need - allowed)
            keep[name] = (cost - cut) / cost if cost > 0 else 1.0
            need -= cut
            notes.append(f"{name} looks at {keep[name]:.0%} of frames ({device} allowed {allowed_share:.0%})")
        later_left = any(keep.get(name, 1.0) > 0.0 for k, name in on if k > 0)
        t0 = stage_s.get(first, 0.0) if device == first_device else 0.0
        if device == first_device and allowed_share <= 0.0:
            caps.append((0.0, device, allowed_share))  # backed off: no frame starts on it
        elif t0 > 0 and (not later_left) and rate * t0 >= allowed_share * FULL_TOLERANCE:
            caps.append((allowed_share / t0, device, allowed_share))
    max_fps = None
    if caps:
        max_fps, device, share = min(caps)
        notes.append(f"frames at most {max_fps:.1f}/s ({device} allowed {share:.0%} for {first})")
    return Plan(keep, max_fps, dict(duty), "; ".join(notes) or "within every device's duty")


class Governor:
    """The policy's loop for one live cascade: ``tick(now, ...)`` returns a new Plan when a decision is due."""

    def __init__(self, policy, stages: list[tuple[str, str]], *, power_budget_w: float | None = None,
                 sensors: dict | None = None, telemetry_root: str | Path = "/", interval_s: float = 0.5) -> None:
        from ..scheduling.policies import Policy, make_policy
        from ..telemetry.sampler import TelemetrySampler
        from ..telemetry.sensors import SensorSpec, auto_spec
        from ..scheduling.devices import place_device

        self.policy = policy if isinstance(policy, Policy) else make_policy(policy, power_budget_w)
        self.stages = list(stages)
        self.devices = list(dict.fromkeys(device for _, device in stages))
        root = Path(telemetry_root)
        sensors = dict(sensors or {})
        specs = {}
        for device in self.devices:
            spec = sensors.get(device)
            if spec is None:
                try:
                    spec = auto_spec(place_device(device).domain, root)
                except Exception as exc:  # noqa: BLE001 -- no sensor is a reason, not a failure
                    spec = SensorSpec(notes=(f"no sensors for {device}: {exc}",))
            specs[device] = spec
        self.sampler = TelemetrySampler(specs, root, min_interval_s=interval_s)
        self.interval_s = interval_s
        self.state = self.policy.initial_state()
        self.plan = Plan(reason="not decided yet")
        self.decision = None
        self.decisions = 0
        self.history: deque = deque(maxlen=HISTORY)  # (time, plan): what was shed when, for the report and tests
        self._last: float | None = None
        self._wanted = 0.0  # frames a second the sources gave before the frame rate was capped

    def due(self, now: float) -> bool:
        return self._last is None or now - self._last >= self.interval_s

    def tick(self, now: float, busy_s: dict[str, float], stage_s: dict[str, float], rate: float) -> Plan:
        """Sample, decide, plan. ``busy_s``: each device's busy seconds since the last tick; ``rate``: frames a
        second the sources offered meanwhile (a file held back by the cap offers what it was let through: the
        rate before the cap stands for it)."""
        from ..scheduling.decision import DeviceView, ExecutorView, Observation

        dt = 0.0 if self._last is None else max(1e-9, now - self._last)
        samples = self.sampler.sample(now)
        views = {}
        for device in self.devices:
            busy = min(1.0, busy_s.get(device, 0.0) / dt) if dt else 0.0
            s = samples.get(device)
            views[device] = DeviceView(device, temp_reason="no telemetry for this device", busy=busy) if s is None \
                else DeviceView(device, s.temp_c, s.temp_reason, s.passive_c, s.critical_c, s.slope_c_per_s,
                                s.power_w, s.power_reason, s.throttled, busy,
                                str(s.status) if s.status is not None else None, s.headroom, s.limits_note)
        executors = tuple(ExecutorView(name, device, stage_s.get(name) or None) for name, device in self.stages)
        decision, self.state = self.policy.decide(Observation(now, views, executors, 0, rate), self.state)
        self.decision = decision
        self.decisions += 1
        self._last = now
        duty = {d: float(decision.duty.get(d, 1.0)) for d in self.devices}
        if self.plan.max_fps is not None and rate >= 0.9 * self.plan.max_fps:
            rate = max(rate, self._wanted)  # held back by the cap (a file is read slower): it would give more
        else:
            self._wanted = rate
        plan = shed_plan(duty, self.stages, stage_s, rate)
        why = f"{self.policy}: {decision.action}: {decision.reason}"
        self.plan = Plan(plan.keep, plan.max_fps, plan.duty, f"{plan.reason} ({why})")
        self.history.append((now, self.plan))
        return self.plan

    def to_dict(self) -> dict:
        return {"policy": str(self.policy), "decisions": self.decisions, "order": ORDER, **self.plan.to_dict()}


ORDER = ("later stages' crops on the limited device (last stage first), then the frame rate; sources in turn")


class Share:
    """Which frames a later stage looks at under ``keep`` share: an even spread (credit adds up per source)."""

    def __init__(self) -> None:
        self._credit: dict[int, float] = {}

    def take(self, source: int, keep: float) -> bool:
        if keep >= 1.0:
            return True
        credit = self._credit.get(source, 0.0) + keep
        if credit >= 1.0 - 1e-9:
            self._credit[source] = credit - 1.0
            return True
        self._credit[source] = credit
        return False
