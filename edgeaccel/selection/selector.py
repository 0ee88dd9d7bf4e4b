"""The selector: a pure function from (model artifacts, runtimes, machine facts, profile, measurements) to a
ranked list of candidates, each with the reason for its place, and every rejected candidate with its reason.

A candidate is (artifact, runtime, device, precision). No file, device or runtime access happens here:
callers gather the facts and tests drive it from tables.

Ranking, in order:
1. With measurements (calibration), eligible measured candidates by measured p50 latency (goal "latency")
   or by energy per inference in mJ ("efficiency"): measured where telemetry gave it, else p50 x the
   device's typical power from the profile, else for the CPU p50 x an estimate of its power (busy cores x
   CPU_CORE_W, said so in the reason); candidates with no energy figure at all cannot be compared and rank
   after those with one, saying so. A measured candidate that failed its accuracy check or its load is
   rejected with that reason.
2. Without, rules: the profile's device preference for the goal (accelerators before the CPU when none is
   given), a runtime reading its own native format before one converting it, the profile's runtime order
   for the device, then the runtime descriptor's preference, then the artifact (Edge TPU twin first).
Each device runs at its own default precision (the model's own, or f16 on an NPU that computes nothing
else); other precisions it offers (bf16, f16) change answers, so such a candidate is eligible only once
calibration has checked its accuracy, or when the caller asked for that precision.
Every fact about a runtime comes from its executor class (``Executor``): no runtime is named here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from dataclasses import replace

from ..executors.base import Executor, ExecutorOptions
from ..executors.device import base_of, same_base
from ..modelinfo import Format, ModelInfo
from ..profiles.types import Profile

# Without a profile: accelerators are tried before the CPU, the CPU is the last resort.
KIND_ORDER = {"edgetpu": 0, "npu": 1, "dsp": 1, "gpu": 2, "tpu": 2, "auto": 4, "cpu": 5}
# Power of one busy CPU core, for the energy estimate of CPU candidates where neither telemetry nor the profile
# gives one: a Cortex-A76 at 2.4 GHz draws about 1.5-2 W, a laptop x86 core 3-5 W under load; 2.5 W is between.
CPU_CORE_W = 2.5
NEEDS_CALIBRATION = ("changes answers; eligible once calibration checks its accuracy (background calibration "
                     "after load, calibrate=True or `edgeaccel tune`)")


@dataclass(frozen=True)
class Candidate:
    artifact: ModelInfo
    runtime: str
    device: str
    kind: str
    precision: str | None = None
    reason: str = ""
    score: tuple = ()

    @property
    def name(self) -> str:
        return f"{self.runtime}:{self.device}" + (f"@{self.precision}" if self.precision else "")

    @property
    def key(self) -> str:
        """Identity across runs: the artifact's content, runtime, device and precision."""
        return f"{self.artifact.digest[:16]}/{self.name}"

    def __str__(self) -> str:
        return f"{self.name} [{self.artifact.path.name}]"


@dataclass(frozen=True)
class Rejection:
    artifact: ModelInfo
    runtime: str
    device: str
    reason: str
    fix: str | None = None
    precision: str | None = None

    @property
    def name(self) -> str:
        return f"{self.runtime}:{self.device}" + (f"@{self.precision}" if self.precision else "")


@dataclass(frozen=True)
class Measurement:
    """What calibration measured for one candidate (keyed by Candidate.key)."""

    key: str
    p50_ms: float | None
    p90_ms: float | None = None
    runs: int = 0
    eligible: bool = True
    reason: str = ""  # why not eligible, or the accuracy summary
    accuracy: dict = field(default_factory=dict)
    energy_mj: float | None = None  # measured energy per inference, where telemetry gave it
    energy_source: str = ""  # what measured it ("RAPL package", "NVML", "INA3221 VDD_IN", ...)


@dataclass
class Ranking:
    candidates: list[Candidate] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    # reduced-precision candidates that only calibration can make eligible
    untested: list[Candidate] = field(default_factory=list)
    goal: str = "latency"
    profile: str | None = None
    measured: bool = False

    def rejection_reasons(self) -> dict[str, str]:
        return {f"{r.name} [{r.artifact.path.name}]": r.reason + (f" (fix: {r.fix})" if r.fix else "")
                for r in self.rejected}


@dataclass(frozen=True)
class MachineFacts:
    """What the selector knows of this machine."""

    installed: Mapping[str, str | None]  # runtime name -> version, None when not installed
    devices_present: frozenset[str] = frozenset({"CPU"})  # "CPU", "GPU", "NPU", "CUDA", "EdgeTPU", "TPU", ...
    cpu_flags: frozenset[str] = frozenset()
    # devices a plug-in reports present through availability(), per runtime: {"hailort": {"Hailo8"}}
    plugin_devices: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # why a device is absent, where the caller knows better than "not found" (an availability() reason)
    absent_reasons: Mapping[str, str] = field(default_factory=dict)
    # asks a runtime why it cannot open a device the probe found (``Executor.unloadable``): the real machine's
    # facts set it; facts a caller makes up (another machine's) leave it None, as the real runtime is not theirs
    unloadable: Callable[[type[Executor], str], tuple[str, str | None] | None] | None = field(default=None,
                                                                                        compare=False)

    def all_present(self) -> frozenset[str]:
        return self.devices_present.union(*self.plugin_devices.values())

    def present(self, runtime: type[Executor], device: str) -> bool:
        if runtime.presence == "probe":
            return base_of(device) in self.devices_present
        return base_of(device) in self.plugin_devices.get(runtime.runtime, frozenset())


RejectFn = Callable[[str, ModelInfo, str, ExecutorOptions], "str | None"]


def rank(
    artifacts: Sequence[ModelInfo],
    runtimes: Mapping[str, type[Executor]],
    facts: MachineFacts,
    rejects: RejectFn | None,
    options: ExecutorOptions,
    executor: str | None = None,
    device: str | None = None,
    profile: Profile | None = None,
    goal: str = "latency",
    measurements: Mapping[str, Measurement] | None = None,
    *,
    reduced: bool = True,
) -> Ranking:
    """Every (artifact, runtime, device, precision) either ranked or rejected with a reason.

    ``rejects(runtime, artifact, device, options)`` is the model-level check (default: the executor class's
    own ``rejects``), asked with each candidate's own precision. ``executor`` / ``device`` pin the choice;
    ``options.precision`` pins the precision. ``reduced``: whether the reduced precisions a device offers
    (bf16, f16) may be measured and admitted by calibration; False keeps each device at its own default (a
    caller who pinned an executor or device without ``precision="auto"``: a pin is a pin).
    """
    if goal not in ("latency", "efficiency"):
        raise ValueError(f"goal must be 'latency' or 'efficiency', not {goal!r}")
    if rejects is None:
        def rejects(runtime: str, artifact: ModelInfo, dev: str, opts: ExecutorOptions) -> str | None:
            return runtimes[runtime].rejects(artifact, dev, opts)
    measurements = measurements or {}
    ranking = Ranking(goal=goal, profile=profile.name if profile else None, measured=bool(measurements))
    for artifact in artifacts:
        for cls in runtimes.values():
            for dev_name, kind in cls.device_kinds.items():
                target = device if (device and same_base(device, dev_name)) else dev_name
                why, fix = _reject(artifact, cls, target, kind, facts, executor, device)
                if why:
                    ranking.rejected.append(Rejection(artifact, cls.runtime, target, why, fix, options.precision))
                    continue
                for precision in _precisions(cls, target, kind, facts, options, reduced):
                    why = rejects(cls.runtime, artifact, target, replace(options, precision=precision))
                    if why:
                        ranking.rejected.append(Rejection(artifact, cls.runtime, target, why, None, precision))
                        continue
                    cand = Candidate(artifact, cls.runtime, target, kind, precision)
                    _place(ranking, cand, cls, profile, goal, measurements, pinned=bool(executor or device),
                           asked=options.precision is not None, threads=options.resolved_threads(),
                           present=facts.all_present())
    ranking.candidates.sort(key=lambda c: c.score)
    return ranking


def _precisions(cls: type[Executor], device: str, kind: str, facts: MachineFacts,
                options: ExecutorOptions, reduced: bool = True) -> tuple[str | None, ...]:
    if options.precision is not None:
        return (options.precision,)
    offered = cls.offered_precisions(device, facts.cpu_flags)
    return offered if reduced else offered[:1]


def _place(ranking: Ranking, cand: Candidate, cls: type[Executor], profile: Profile | None, goal: str,
           measurements: Mapping[str, Measurement], pinned: bool, asked: bool, threads: int = 1,
           present: frozenset[str] = frozenset({"CPU"})) -> None:
    m = measurements.get(cand.key)
    if m is not None and not m.eligible:
        ranking.rejected.append(Rejection(cand.artifact, cand.runtime, cand.device,
                                          f"calibration: {m.reason}", precision=cand.precision))
        return
    if cand.precision != cls.default_precision(cand.device) and not asked and m is None:
        ranking.untested.append(_scored(cand, cls, profile, goal, None,
                                        f"{cand.precision} {NEEDS_CALIBRATION}", threads, present))
        ranking.rejected.append(Rejection(cand.artifact, cand.runtime, cand.device,
                                          f"{cand.precision} {NEEDS_CALIBRATION}", precision=cand.precision))
        return
    reason = "pinned by the caller" if pinned else ""
    ranking.candidates.append(_scored(cand, cls, profile, goal, m, reason, threads, present))


def _scored(cand: Candidate, cls: type[Executor], profile: Profile | None, goal: str,
            m: Measurement | None, pinned_reason: str, threads: int = 1,
            present: frozenset[str] = frozenset({"CPU"})) -> Candidate:
    rules, why = _rule_score(cand, cls, profile, goal, present)
    if m is not None and m.p50_ms is not None:
        cost, what = _measured_cost(cand, m, profile, goal, threads)
        # (0, cost): comparable figures first; (1, ...) for a measured candidate whose energy is unknown
        score = (0, cost, *rules) if cost is not None else (1, m.p50_ms, *rules)
        why = f"{what} ({m.runs} timed runs); {m.reason}" if m.reason else f"{what} ({m.runs} timed runs)"
    else:
        score = (2, 0.0, *rules)
    if pinned_reason:
        why = f"{pinned_reason}; {why}"
    return Candidate(cand.artifact, cand.runtime, cand.device, cand.kind, cand.precision, why, score)


def _measured_cost(cand: Candidate, m: Measurement, profile: Profile | None, goal: str,
                   threads: int) -> tuple[float | None, str]:
    """(cost, why): ms for latency; mJ per inference for efficiency, None where no energy figure exists."""
    if goal != "efficiency":
        return m.p50_ms, f"measured p50 {m.p50_ms:.3f} ms"
    if m.energy_mj is not None:
        return m.energy_mj, f"measured {m.energy_mj:.2f} mJ/inference ({m.energy_source or 'telemetry'}; " \
                            f"p50 {m.p50_ms:.3f} ms)"
    spec = profile.accelerator(base_of(cand.device)) if profile else None
    if spec and spec.typical_power_w:
        energy = m.p50_ms * spec.typical_power_w  # ms x W = mJ
        return energy, (f"estimated {energy:.2f} mJ/inference = measured p50 {m.p50_ms:.3f} ms x "
                        f"{spec.typical_power_w} W typical ({profile.name})")
    if cand.kind == "cpu":
        watts = threads * CPU_CORE_W
        energy = m.p50_ms * watts
        return energy, (f"estimated {energy:.2f} mJ/inference = measured p50 {m.p50_ms:.3f} ms x {watts:g} W "
                        f"({threads} busy cores x {CPU_CORE_W} W, a generic estimate: no CPU power in the profile "
                        "or telemetry)")
    return None, (f"measured p50 {m.p50_ms:.3f} ms, but no energy figure for {cand.device} (no power sensor, "
                  "no typical power in the profile): cannot compare its energy, ranked after those with one")


def _profile_rank(profile: Profile, goal: str, base: str, kind: str, present: frozenset[str]) -> tuple[float, str]:
    """The device's place in the profile's order for ``goal``, and the reason counted among the devices here
    (on a CPU-only machine "CPU is #4" says nothing). A device the profile does not list (a plug-in's) goes
    just before the CPU when it is an accelerator: an unknown accelerator is not a reason to starve it."""
    order = profile.preference.get(goal) or profile.preference.get("latency") or ()
    if base in order:
        here = [d for d in order if d in present or d == base]
        place = here.index(base)
        why = (f"{base} is the only device of profile {profile.name}'s {goal} order here" if len(here) == 1 else
               f"{base} is #{place + 1} of {len(here)} devices here in profile {profile.name}'s {goal} order")
        return order.index(base), why
    cpu_at = order.index("CPU") if "CPU" in order else len(order)
    if kind in ("cpu", "auto"):
        return len(order), f"{base} is not in profile {profile.name}'s {goal} order"
    return cpu_at - 0.5, f"{base} is not in profile {profile.name}'s {goal} order: an accelerator, tried before the CPU"


def _rule_score(cand: Candidate, cls: type[Executor], profile: Profile | None, goal: str,
                present: frozenset[str] = frozenset({"CPU"})) -> tuple[tuple, str]:
    base = base_of(cand.device)
    if profile is not None:
        device_rank, device_why = _profile_rank(profile, goal, base, cand.kind, present)
    else:
        device_rank = KIND_ORDER.get(cand.kind, 3)
        device_why = "an accelerator, tried before the CPU" if cand.kind != "cpu" else "the CPU"
    native = cls.is_native(cand.artifact.format)
    profile_rank = profile.runtime_rank(base, cand.runtime) if profile else None
    runtime_rank = profile_rank if profile_rank is not None else cls.preference
    precision_rank = 0 if cand.precision is None else 1
    why = f"{device_why}; {cand.runtime} " + ("reads this format natively" if native else f"converts {cand.artifact.format.value}")
    if profile_rank is not None:
        why += f"; runtime #{profile_rank + 1} for {base} in the profile"
    return (device_rank, 0 if native else 1, runtime_rank, _artifact_order(cand.artifact), precision_rank), \
        why + " (rules, not measured)"


def _reject(artifact, cls: type[Executor], target, kind, facts, executor, device) -> tuple[str | None, str | None]:
    if executor and cls.runtime != executor:
        return f"not the executor asked for ({executor})", None
    if device and not same_base(device, target):
        return f"not the device asked for ({device})", None
    if kind == "auto" and not device:
        return "a meta-device, used only when asked for by name (edgeaccel picks devices itself)", None
    if not cls.reads(artifact.format, target):
        if artifact.format is Format.EDGETPU_TFLITE:
            return ("compiled for the Edge TPU: its body is one edgetpu-custom-op that only the Edge TPU "
                    f"delegate runs, not {cls.runtime} on {target}"), None
        device_target = cls.target(target)
        if device_target is not None and device_target.formats is not None:
            reads = ", ".join(sorted(f.value for f in device_target.formats))
            return f"{cls.runtime} on {device_target.name} runs {reads} only, not {artifact.format.value}", None
        return f"{cls.runtime} does not read {artifact.format.value}", None
    if facts.installed.get(cls.runtime) is None:
        return f"{cls.runtime} is not installed", cls.install_hint(target)
    if kind not in ("cpu", "auto") and not facts.present(cls, target):
        base = base_of(target)
        why = facts.absent_reasons.get(f"{cls.runtime}:{base}") or f"no {base} device found on this machine"
        return why, "`edgeaccel probe` shows what was looked for and why it is absent"
    # a device pinned by name is tried whatever this says: a wrong verdict must not leave the caller no way round
    if kind not in ("cpu", "auto") and facts.unloadable is not None and not device:
        blocked = facts.unloadable(cls, target)
        if blocked:
            return blocked
    return None, None


def _artifact_order(artifact: ModelInfo) -> int:
    return {Format.EDGETPU_TFLITE: 0, Format.TFLITE: 1, Format.OPENVINO_IR: 2, Format.ONNX: 3}.get(artifact.format, 4)
