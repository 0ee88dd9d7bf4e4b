"""The option objects ``load()``, ``schedule()``, ``select()`` and ``ExecutorOptions`` take, each validated once,
here, when it is built (as ONNX Runtime's SessionOptions or httpx's Timeout/Limits are): a wrong type or value is
a ConfigError that says what to write, raised before any file is read or runtime imported.

- ``SelectionOptions``: how the executor is chosen (precision, goal, profile, calibration, accuracy, strict).
- ``RuntimeOptions``: how the chosen runtime runs (threads, hint, GPU memory cap, cache, isolation, native options).
- ``ScheduleOptions``: several executors under a policy (``edgeaccel.schedule``).
- ``TaskOptions``: the vision task's labels and decoding (``model.predict``).

They are frozen: ``dataclasses.replace(options, threads=2)`` makes a changed copy (validated again).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from .errors import ConfigError

# This module imports nothing of edgeaccel but its errors (executors, profiles and isolation import it): a
# Profile and IsolationLimits are recognized by what they hold, and the precisions are named here.
PRECISIONS = ("int4", "int8", "int16", "f16", "bf16", "f32")  # what a profile or a caller may name
GOALS = ("latency", "efficiency")
PERFORMANCE_HINTS = ("latency", "throughput", "adaptive")
CALIBRATE_MODES = (None, True, False, "background")


def _wrong(owner: str, name: str, value: object, what: str, example: str) -> ConfigError:
    """``example``: the code to write, then after " # " what it means."""
    code, _, note = example.partition(" # ")
    return ConfigError(f"{owner}({name}={value!r}): {name} must be {what}", key=name,
                       hint=f"write {owner}({code})" + (f": {note}" if note else ""))


def _is_number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def _positive_number(owner: str, name: str, value: object, example: str) -> float | None:
    if value is None:
        return None
    if not _is_number(value) or value <= 0:  # type: ignore[operator]
        raise _wrong(owner, name, value, "a positive number, or None", example)
    return float(value)  # type: ignore[arg-type]


def _positive_int(owner: str, name: str, value: object, example: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise _wrong(owner, name, value, "a whole number of at least 1, or None", example)


def _one_of(owner: str, name: str, value: object, allowed: Sequence, example: str) -> None:
    if value not in allowed:
        names = [repr(a) for a in allowed]
        shown = f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]
        raise _wrong(owner, name, value, f"one of {shown}", example)


def _set(self: object, name: str, value: object) -> None:
    object.__setattr__(self, name, value)  # a frozen dataclass normalizing what it was given


@dataclass(frozen=True)
class SelectionOptions:
    """How ``load()`` chooses among the executors that could run the model (README, "Choosing the executor").

    precision: None, the model's own (f32 math for float layers); "f16"/"bf16"/"int8" are opt-ins; "auto" lets
        calibration admit a reduced precision it measured accurate. goal: "latency" or "efficiency" (energy per
        inference). profile: a shipped profile name, a .yaml path or a Profile (default: the one matching this
        machine). calibrate: None (measure in the background when worth it), True (measure now), False (never),
        "background". calibration_inputs: real samples, each a list in input order or a dict by name.
        calibration_budget_s: the time calibration may take now. accuracy_tolerance: the worst error calibration
        allows, as a share of each output's range (default 0.05). strict: a candidate that fails to load or run
        raises instead of falling back to the next one (and partial accelerator placement is refused).
    """

    precision: str | None = None
    goal: str = "latency"
    profile: object = None  # a profiles.Profile, a shipped profile name or a .yaml path (not imported: see above)
    calibrate: bool | str | None = None
    calibration_inputs: Sequence | None = field(default=None, compare=False)
    calibration_budget_s: float | None = None
    accuracy_tolerance: float | None = None
    strict: bool = False

    def __post_init__(self) -> None:
        owner = "SelectionOptions"
        _one_of(owner, "precision", self.precision, (None, "auto", *PRECISIONS), "precision='f16'")
        _one_of(owner, "goal", self.goal, GOALS, "goal='efficiency'")
        if isinstance(self.profile, os.PathLike):
            _set(self, "profile", os.fspath(self.profile))
        elif self.profile is not None and not isinstance(self.profile, str) \
                and not (hasattr(self.profile, "accelerators") and hasattr(self.profile, "thermal")):
            raise _wrong(owner, "profile", self.profile, "a profile name, a .yaml path or a Profile",
                         "profile='rpi5-coral-usb'")
        if not any(self.calibrate is m for m in CALIBRATE_MODES[:3]) and self.calibrate != "background":
            raise _wrong(owner, "calibrate", self.calibrate, "None, True, False or 'background'", "calibrate=True")
        if self.calibration_inputs is not None and (isinstance(self.calibration_inputs, (str, bytes, dict))
                                                    or not isinstance(self.calibration_inputs, Sequence)):
            raise _wrong(owner, "calibration_inputs", type(self.calibration_inputs).__name__,
                         "a list of samples (each a list in input order, or a dict by input name)",
                         "calibration_inputs=[[image1], [image2]]")
        _set(self, "calibration_budget_s", _positive_number(owner, "calibration_budget_s", self.calibration_budget_s,
                                                            "calibration_budget_s=30"))
        _set(self, "accuracy_tolerance", _positive_number(owner, "accuracy_tolerance", self.accuracy_tolerance,
                                                          "accuracy_tolerance=0.05 # 5% of each output's range"))
        if not isinstance(self.strict, bool):
            raise _wrong(owner, "strict", self.strict, "True or False", "strict=True")

    @property
    def pins_precision(self) -> bool:
        """Whether the caller chose a precision (a reduced one, or f32 explicitly): "auto" and None do not."""
        return self.precision not in (None, "auto")


@dataclass(frozen=True)
class RuntimeOptions:
    """How the chosen runtime runs the model (README, "Runtime options").

    threads: intra-op threads (default: every core this process may use). performance_hint: "latency" (one
        request as fast as possible), "throughput" (several at once, for submit() and stream()) or "adaptive"
        (both held on a CPU; what ``edgeaccel serve`` loads). gpu_mem_limit_mb: the GPU memory (MB of 2**20
        bytes) the runtime may take; a GPU whose runtime cannot be capped is refused rather than run uncapped.
        cache, cache_dir: keep compiled models, validation results and measurements in ``cache_dir`` (default
        $EDGEACCEL_CACHE_DIR or ~/.cache/edgeaccel); ``cache=False`` keeps nothing. isolate: load and run the
        model in a worker process (True, or IsolationLimits for memory and time limits). native: options passed
        to the runtime as they are (ONNX Runtime session config entries, OpenVINO properties, ...).
    """

    threads: int | None = None
    performance_hint: str = "latency"
    gpu_mem_limit_mb: float | None = None
    cache: bool = True
    cache_dir: str | os.PathLike | None = None
    isolate: object = False  # True, False or an isolation.limits.IsolationLimits (not imported: see above)
    native: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        owner = "RuntimeOptions"
        _positive_int(owner, "threads", self.threads,
                      "threads=4 # or leave it None for every core this process may use")
        _one_of(owner, "performance_hint", self.performance_hint, PERFORMANCE_HINTS, "performance_hint='throughput'")
        _set(self, "gpu_mem_limit_mb", _positive_number(owner, "gpu_mem_limit_mb", self.gpu_mem_limit_mb,
                                                        "gpu_mem_limit_mb=2048 # 2 GiB, in MB of 2**20 bytes"))
        if not isinstance(self.cache, bool):
            raise _wrong(owner, "cache", self.cache, "True or False", "cache=False # keeps nothing")
        if self.cache_dir is not None:
            if not isinstance(self.cache_dir, (str, os.PathLike)):
                raise _wrong(owner, "cache_dir", self.cache_dir, "a folder path", "cache_dir='~/.cache/edgeaccel'")
            _set(self, "cache_dir", os.fspath(self.cache_dir))
        if not isinstance(self.isolate, bool) and type(self.isolate).__name__ != "IsolationLimits":
            raise _wrong(owner, "isolate", self.isolate, "True, False or an IsolationLimits",
                         "isolate=IsolationLimits(resident_bytes=2**31)")
        if self.native is None:
            _set(self, "native", {})
        if not isinstance(self.native, dict):
            raise _wrong(owner, "native", self.native, "a dict of the runtime's own options",
                         "native={'session_config': {'session.intra_op.allow_spinning': '0'}}")
        _set(self, "native", dict(self.native))  # a copy: the caller's dict may change after



@dataclass(frozen=True)
class ScheduleOptions:
    """Several executors of one model under a policy (``edgeaccel.schedule``; README, "Scheduling").

    policy: "latency", "efficiency", "thermal", "power" (with ``power_budget_w``) or "fastest"; or a policy
    object (``edgeaccel.scheduling.policies.Policy``: anything with ``decide`` and ``initial_state``).
    telemetry_root: where the sensors are read ("/" here; a fake tree in tests). max_executors: how many
    candidates that load join (a scheduler moves work only between executors it holds).
    """

    policy: Any = "latency"
    power_budget_w: float | None = None
    telemetry_root: str | os.PathLike = "/"
    max_executors: int = 3

    def __post_init__(self) -> None:
        owner = "ScheduleOptions"
        is_object = hasattr(self.policy, "decide") and hasattr(self.policy, "initial_state")
        if not is_object and (not isinstance(self.policy, str) or not self.policy.strip()):
            raise _wrong(owner, "policy", self.policy, "a policy name or a Policy object", "policy='thermal'")
        _set(self, "power_budget_w", _positive_number(owner, "power_budget_w", self.power_budget_w,
                                                      "policy='power', power_budget_w=5"))
        if not isinstance(self.telemetry_root, (str, os.PathLike)):
            raise _wrong(owner, "telemetry_root", self.telemetry_root, "a folder path", "telemetry_root='/'")
        _set(self, "telemetry_root", os.fspath(self.telemetry_root))
        if self.max_executors is None:
            raise _wrong(owner, "max_executors", None, "a whole number of at least 1", "max_executors=2")
        _positive_int(owner, "max_executors", self.max_executors, "max_executors=2")


@dataclass(frozen=True)
class TaskOptions:
    """The vision task's labels and decoding (``edgeaccel.vision.Task``; README, "Vision tasks").

    labels: a label file (.txt, .pbtxt), a list or a dict of names (default: the model's metadata). conf: the
    lowest score kept; iou: NMS overlap; max_det: most boxes kept; top_k: classes kept by classify; letterbox:
    keep the aspect ratio and pad; normalize: "0,1", "-1,1", "imagenet" or "raw"; imgsz: (height, width) or one
    side for a dynamic image input ("480x640" too). imgsz, letterbox and normalize also lay over
    ``model.pipeline``. decoder: the decoder's other options as they are (layout, anchors, ssd, color: docs/vision.md).
    """

    labels: str | os.PathLike | Sequence[str] | dict | None = None
    conf: float | None = None
    iou: float | None = None
    max_det: int | None = None
    top_k: int | None = None
    letterbox: bool | None = None
    normalize: str | None = None
    imgsz: int | str | tuple[int, int] | None = None
    decoder: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        owner = "TaskOptions"
        if self.labels is not None and not isinstance(self.labels, (str, os.PathLike, list, tuple, dict)):
            raise _wrong(owner, "labels", self.labels, "a label file, a list or a dict of names",
                         "labels='coco.txt'")
        if isinstance(self.labels, os.PathLike):
            _set(self, "labels", os.fspath(self.labels))
        for name in ("conf", "iou"):
            value = getattr(self, name)
            if value is not None and (not _is_number(value) or not 0 <= value <= 1):
                raise _wrong(owner, name, value, "a share between 0 and 1", f"{name}=0.25")
        _positive_int(owner, "max_det", self.max_det, "max_det=100")
        _positive_int(owner, "top_k", self.top_k, "top_k=5")
        if self.letterbox is not None and not isinstance(self.letterbox, bool):
            raise _wrong(owner, "letterbox", self.letterbox, "True, False or None", "letterbox=True")
        if self.normalize is not None and not isinstance(self.normalize, str):
            raise _wrong(owner, "normalize", self.normalize, "'0,1', '-1,1', 'imagenet' or 'raw'",
                         "normalize='imagenet'")
        size = self.imgsz
        sides = (size,) if isinstance(size, int) else tuple(size) if isinstance(size, (list, tuple)) else None
        if size is not None and not isinstance(size, str) and (sides is None or len(sides) not in (1, 2)
                                 or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0
                                            for s in sides)):
            raise _wrong(owner, "imgsz", size, "one side or (height, width) in pixels", "imgsz=(480, 640)")
        if isinstance(size, list):
            _set(self, "imgsz", tuple(size))
        if not isinstance(self.decoder, dict):
            raise _wrong(owner, "decoder", self.decoder, "a dict of decoder options", "decoder={'layout': 'yolov8'}")
        _set(self, "decoder", dict(self.decoder))

    def decoding(self) -> dict[str, Any]:
        """The options that were set, as ``edgeaccel.vision.Task`` and ``model.pipeline`` take them."""
        named = {f.name: getattr(self, f.name) for f in fields(self)
                 if f.name not in ("labels", "decoder") and getattr(self, f.name) is not None}
        return {**self.decoder, **named}

    @property
    def given(self) -> bool:
        """Whether anything was set (a task asked for with options is bound, and checked, at load)."""
        return self.labels is not None or bool(self.decoding())

    @classmethod
    def from_dict(cls, options: dict | None, labels=None) -> TaskOptions:
        """The older ``task_options={...}`` dict (plus ``labels``): named keys checked as fields, the rest
        handed to the decoder as they were."""
        if options is not None and not isinstance(options, dict):
            raise ConfigError(f"task_options must be a TaskOptions or a dict, not {type(options).__name__}",
                              key="task_options", hint="write task_options=TaskOptions(conf=0.3, imgsz=640)")
        named = {f.name for f in fields(cls)} - {"labels", "decoder"}
        options = dict(options or {})
        return cls(labels=labels, **{k: options.pop(k) for k in list(options) if k in named}, decoder=options)
