"""The selector: a pure function from (model artifacts, runtimes, what this machine has) to a ranked list of
candidates, each with the reason for its place, and every rejected (artifact, runtime, device) with its reason.

No file, device or runtime access happens here: callers gather the facts (executor classes, installed
versions, devices present) and tests drive it from tables.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .executors.base import ExecutorOptions
from .executors.registry import RuntimeDescriptor
from .modelinfo import Format, ModelInfo

# Accelerators are tried before the CPU when present; the CPU is always the last resort.
KIND_ORDER = {"edgetpu": 0, "npu": 1, "gpu": 2, "tpu": 2, "auto": 4, "cpu": 5}


@dataclass(frozen=True)
class Candidate:
    artifact: ModelInfo
    runtime: str
    device: str
    kind: str
    reason: str
    score: tuple = ()

    @property
    def name(self) -> str:
        return f"{self.runtime}:{self.device}"

    def __str__(self) -> str:
        return f"{self.name} [{self.artifact.path.name}]"


@dataclass(frozen=True)
class Rejection:
    artifact: ModelInfo
    runtime: str
    device: str
    reason: str
    fix: str | None = None

    @property
    def name(self) -> str:
        return f"{self.runtime}:{self.device}"


@dataclass
class Ranking:
    candidates: list[Candidate] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)

    def rejection_reasons(self) -> dict[str, str]:
        return {f"{r.name} [{r.artifact.path.name}]": r.reason + (f" (fix: {r.fix})" if r.fix else "")
                for r in self.rejected}


@dataclass(frozen=True)
class MachineFacts:
    """What the selector knows of this machine: installed runtime versions and the devices present."""

    installed: Mapping[str, str | None]  # runtime name -> version, None when not installed
    devices_present: frozenset[str] = frozenset({"CPU"})  # device names ("CPU", "GPU", "CUDA", "EdgeTPU", ...)


RejectFn = Callable[[str, ModelInfo, str, ExecutorOptions], "str | None"]


def rank(
    artifacts: Sequence[ModelInfo],
    runtimes: Mapping[str, RuntimeDescriptor],
    facts: MachineFacts,
    rejects: RejectFn,
    options: ExecutorOptions,
    executor: str | None = None,
    device: str | None = None,
) -> Ranking:
    """Every (artifact, runtime, device) either ranked or rejected with a reason.

    ``rejects(runtime, artifact, device, options)`` is the executor class's own model-level check.
    ``executor`` / ``device`` pin the choice: everything else is rejected as "not the one asked for".
    """
    ranking = Ranking()
    for artifact in artifacts:
        for desc in runtimes.values():
            for dev_name, kind in desc.devices:
                target = device if (device and _same_device(device, dev_name)) else dev_name
                why, fix = _reject(artifact, desc, target, kind, facts, rejects, options, executor, device)
                if why:
                    ranking.rejected.append(Rejection(artifact, desc.name, target, why, fix))
                    continue
                score = (KIND_ORDER.get(kind, 3), desc.preference, _artifact_order(artifact))
                ranking.candidates.append(
                    Candidate(artifact, desc.name, target, kind, _reason(desc, kind, executor, device), score)
                )
    ranking.candidates.sort(key=lambda c: c.score)
    return ranking


def _same_device(asked: str, offered: str) -> bool:
    return asked.split(":")[0].split(".")[0].lower() == offered.lower()


def _reject(artifact, desc, target, kind, facts, rejects, options, executor, device) -> tuple[str | None, str | None]:
    if executor and desc.name != executor:
        return f"not the executor asked for ({executor})", None
    if device and not _same_device(device, target):
        return f"not the device asked for ({device})", None
    if kind == "auto" and not device:
        return "a meta-device, used only when asked for by name (edgeaccel picks devices itself)", None
    if artifact.format not in desc.formats:
        return f"{desc.name} does not read {artifact.format.value}", None
    if facts.installed.get(desc.name) is None:
        return f"{desc.name} is not installed", desc.install_hint()
    base = target.split(":")[0].split(".")[0]
    if kind not in ("cpu", "auto") and base not in facts.devices_present:
        return f"no {base} device found on this machine", "`edgeaccel probe` shows what was found and why"
    why = rejects(desc.name, artifact, target, options)
    if why:
        return why, None
    return None, None


def _artifact_order(artifact: ModelInfo) -> int:
    # Among CPU artifacts of one model, a quantized .tflite is the edge-native form.
    return {Format.EDGETPU_TFLITE: 0, Format.TFLITE: 1, Format.OPENVINO_IR: 2, Format.ONNX: 3}.get(artifact.format, 4)


def _reason(desc: RuntimeDescriptor, kind: str, executor: str | None, device: str | None) -> str:
    if executor or device:
        return "pinned by the caller"
    if kind == "cpu":
        return f"{desc.name} preference {desc.preference} for this format on the CPU (rules, not measured)"
    return f"{kind} accelerator present, tried before the CPU (rules, not measured)"
