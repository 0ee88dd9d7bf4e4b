"""The selector: a pure function from (model artifacts, runtimes, machine facts, profile, measurements) to a
ranked list of candidates, each with the reason for its place, and every rejected candidate with its reason.

A candidate is (artifact, runtime, device, precision). No file, device or runtime access happens here:
callers gather the facts and tests drive it from tables.

Ranking, in order:
1. With measurements (calibration), eligible measured candidates by measured p50 latency (goal "latency")
   or by estimated energy per inference = p50 x the device's typical power from the profile ("efficiency");
   a measured candidate that failed its accuracy check or its load is rejected with that reason.
2. Without, rules: the profile's device preference for the goal (accelerators before the CPU when none is
   given), a runtime reading its own native format before one converting it, the profile's runtime order
   for the device, then the runtime descriptor's preference, then the artifact (Edge TPU twin first).
Reduced precision (bf16, f16) changes answers, so such a candidate is eligible only once calibration has
checked its accuracy, or when the caller asked for that precision.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .executors.base import ExecutorOptions
from .executors.registry import RuntimeDescriptor
from .modelinfo import Format, ModelInfo
from .profiles.types import Profile

# Without a profile: accelerators are tried before the CPU, the CPU is the last resort.
KIND_ORDER = {"edgetpu": 0, "npu": 1, "gpu": 2, "tpu": 2, "auto": 4, "cpu": 5}
NATIVE = {"litert": {Format.TFLITE}, "edgetpu": {Format.EDGETPU_TFLITE}, "onnxruntime": {Format.ONNX},
          "openvino": {Format.OPENVINO_IR}, "tensorflow": {Format.SAVEDMODEL}}
# Reduced precisions each runtime can be asked for per device kind, and the CPU flag bf16 needs.
REDUCED_PRECISION = {("openvino", "cpu"): ("bf16",), ("openvino", "gpu"): ("f16",), ("openvino", "npu"): ("f16",),
                     ("onnxruntime", "gpu"): ("f16",)}
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
NEEDS_CALIBRATION = "changes answers; eligible once calibration checks its accuracy (calibrate=True or `edgeaccel tune`)"


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


RejectFn = Callable[[str, ModelInfo, str, ExecutorOptions], "str | None"]


def rank(
    artifacts: Sequence[ModelInfo],
    runtimes: Mapping[str, RuntimeDescriptor],
    facts: MachineFacts,
    rejects: RejectFn,
    options: ExecutorOptions,
    executor: str | None = None,
    device: str | None = None,
    profile: Profile | None = None,
    goal: str = "latency",
    measurements: Mapping[str, Measurement] | None = None,
) -> Ranking:
    """Every (artifact, runtime, device, precision) either ranked or rejected with a reason.

    ``rejects(runtime, artifact, device, options)`` is the executor class's own model-level check.
    ``executor`` / ``device`` pin the choice; ``options.precision`` pins the precision.
    """
    if goal not in ("latency", "efficiency"):
        raise ValueError(f"goal must be 'latency' or 'efficiency', not {goal!r}")
    measurements = measurements or {}
    ranking = Ranking(goal=goal, profile=profile.name if profile else None, measured=bool(measurements))
    for artifact in artifacts:
        for desc in runtimes.values():
            for dev_name, kind in desc.devices:
                target = device if (device and _same_device(device, dev_name)) else dev_name
                why, fix = _reject(artifact, desc, target, kind, facts, rejects, options, executor, device)
                if why:
                    ranking.rejected.append(Rejection(artifact, desc.name, target, why, fix, options.precision))
                    continue
                for precision in _precisions(desc.name, kind, facts, options):
                    cand = Candidate(artifact, desc.name, target, kind, precision)
                    _place(ranking, cand, desc, profile, goal, measurements, pinned=bool(executor or device),
                           asked=options.precision is not None)
    ranking.candidates.sort(key=lambda c: c.score)
    return ranking


def _precisions(runtime: str, kind: str, facts: MachineFacts, options: ExecutorOptions) -> tuple[str | None, ...]:
    if options.precision is not None:
        return (options.precision,)
    extra = REDUCED_PRECISION.get((runtime, kind), ())
    if "bf16" in extra and not facts.cpu_flags & set(BF16_FLAGS):
        extra = tuple(p for p in extra if p != "bf16")  # emulated bf16 is slower, never a win
    return (None, *extra)


def _place(ranking: Ranking, cand: Candidate, desc: RuntimeDescriptor, profile: Profile | None, goal: str,
           measurements: Mapping[str, Measurement], pinned: bool, asked: bool) -> None:
    m = measurements.get(cand.key)
    if m is not None and not m.eligible:
        ranking.rejected.append(Rejection(cand.artifact, cand.runtime, cand.device,
                                          f"calibration: {m.reason}", precision=cand.precision))
        return
    if cand.precision is not None and not asked and m is None:
        ranking.untested.append(_scored(cand, desc, profile, goal, None,
                                        f"{cand.precision} {NEEDS_CALIBRATION}"))
        ranking.rejected.append(Rejection(cand.artifact, cand.runtime, cand.device,
                                          f"{cand.precision} {NEEDS_CALIBRATION}", precision=cand.precision))
        return
    reason = "pinned by the caller" if pinned else ""
    ranking.candidates.append(_scored(cand, desc, profile, goal, m, reason))


def _scored(cand: Candidate, desc: RuntimeDescriptor, profile: Profile | None, goal: str,
            m: Measurement | None, pinned_reason: str) -> Candidate:
    rules, why = _rule_score(cand, desc, profile, goal)
    if m is not None and m.p50_ms is not None:
        cost, what = _measured_cost(cand, m, profile, goal)
        score = (0, cost, *rules)
        why = f"{what} ({m.runs} timed runs); {m.reason}" if m.reason else f"{what} ({m.runs} timed runs)"
    else:
        score = (1, 0.0, *rules)
    if pinned_reason:
        why = f"{pinned_reason}; {why}"
    return Candidate(cand.artifact, cand.runtime, cand.device, cand.kind, cand.precision, why, score)


def _measured_cost(cand: Candidate, m: Measurement, profile: Profile | None, goal: str) -> tuple[float, str]:
    if goal == "efficiency":
        spec = profile.accelerator(cand.device) if profile else None
        if spec and spec.typical_power_w:
            energy = m.p50_ms * spec.typical_power_w  # mJ
            return energy, (f"estimated {energy:.2f} mJ/inference = measured p50 {m.p50_ms:.3f} ms x "
                            f"{spec.typical_power_w} W typical ({profile.name})")
    return m.p50_ms, f"measured p50 {m.p50_ms:.3f} ms"


def _rule_score(cand: Candidate, desc: RuntimeDescriptor, profile: Profile | None, goal: str) -> tuple[tuple, str]:
    base = cand.device.split(":")[0].split(".")[0]
    if profile is not None:
        device_rank = profile.device_rank(goal, base)
        device_why = f"{base} is #{device_rank + 1} for {goal} in profile {profile.name}"
    else:
        device_rank = KIND_ORDER.get(cand.kind, 3)
        device_why = "an accelerator, tried before the CPU" if cand.kind != "cpu" else "the CPU"
    native = cand.artifact.format in NATIVE.get(cand.runtime, ())
    profile_rank = profile.runtime_rank(base, cand.runtime) if profile else None
    runtime_rank = profile_rank if profile_rank is not None else desc.preference
    precision_rank = 0 if cand.precision is None else 1
    why = f"{device_why}; {cand.runtime} " + ("reads this format natively" if native else f"converts {cand.artifact.format.value}")
    if profile_rank is not None:
        why += f"; runtime #{profile_rank + 1} for {base} in the profile"
    return (device_rank, 0 if native else 1, runtime_rank, _artifact_order(cand.artifact), precision_rank), \
        why + " (rules, not measured)"


def _same_device(asked: str, offered: str) -> bool:
    return asked.split(":")[0].split(".")[0].lower() == offered.lower()


def _reject(artifact, desc, target, kind, facts, rejects, options, executor, device) -> tuple[str | None, str | None]:
    if executor and desc.name != executor:
        return f"not the executor asked for ({executor})", None
    if device and not _same_device(device, target):
        return f"not the device asked for ({device})", None
    if kind == "auto" and not device:
        return "a meta-device, used only when asked for by name (edgeaccel picks devices itself)", None
    if not desc.reads(artifact.format, target):
        if artifact.format is Format.EDGETPU_TFLITE:
            return ("compiled for the Edge TPU: its body is one edgetpu-custom-op that only the Edge TPU "
                    f"delegate runs, not {desc.name}"), None
        device_target = desc.target(target)
        if device_target is not None and device_target.formats is not None:
            reads = ", ".join(sorted(f.value for f in device_target.formats))
            return f"{desc.name} on {device_target.name} runs {reads} only, not {artifact.format.value}", None
        return f"{desc.name} does not read {artifact.format.value}", None
    if facts.installed.get(desc.name) is None:
        return f"{desc.name} is not installed", desc.install_hint(target)
    base = target.split(":")[0].split(".")[0]
    if kind not in ("cpu", "auto") and base not in facts.devices_present:
        return f"no {base} device found on this machine", "`edgeaccel probe` shows what was found and why"
    why = rejects(desc.name, artifact, target, options)
    if why:
        return why, None
    return None, None


def _artifact_order(artifact: ModelInfo) -> int:
    return {Format.EDGETPU_TFLITE: 0, Format.TFLITE: 1, Format.OPENVINO_IR: 2, Format.ONNX: 3}.get(artifact.format, 4)
