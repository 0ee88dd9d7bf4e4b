"""Emulated accelerators: executors that wrap a REAL CPU runtime and behave like a described accelerator.

No accelerator is needed to test what edgeaccel does with one (choose it, guard its accuracy, weigh its energy,
fall back from it, schedule it): an emulated one is a plug-in like any other, whose answers come from LiteRT,
ONNX Runtime or OpenVINO on the CPU and whose device behaviour is described::

    from edgeaccel.testing.emulated import Faults, emulated_accelerator

    FastGPU = emulated_accelerator("fastgpu", device="FastGPU", kind="gpu", wraps="litert", speedup=10)
    Unplugged = emulated_accelerator("flaky", device="FlakyNPU", kind="npu", fixed_latency_ms=2,
                                     faults=Faults(fail_after=100))

Use a class directly (``FastGPU(model_info, "FastGPU", ExecutorOptions())``) or install it as a plug-in
(``edgeaccel.testing.plugins.installed_plugins``) so that ``edgeaccel.load`` ranks it.

What is emulated, and how (every simulated figure is labelled so in ``info.details["simulated"]``):
- latency: a run takes ``max(real / speedup, fixed_latency_ms)``, where ``real`` is the wrapped runtime's own
  time for that input. A device faster than the CPU it runs on cannot be had by computing: each distinct input
  is computed once by the real runtime (the first call takes the real time) and its answer kept (``memo``
  inputs, least recently used out); later calls with the same input sleep the modelled time. With
  ``offload_share`` s < 1 the share 1 - s runs at CPU speed: ``real * (1 - s) + accelerated * s``. One request
  at a time holds the device, as on an Edge TPU, across every model loaded on it;
- numerics: "exact" (the CPU answer), "f16" / "bf16" (float outputs rounded to that precision), "int8" (float
  outputs requantized per tensor, symmetric, 255 levels), "corrupt" (a deliberately wrong answer: the values
  rotated along the last axis, so the top-1 class and every value move);
- power and heat: ``power_w`` (busy) gives a simulated energy per inference; ``heat`` (a ``sim.heat.DeviceParams``)
  makes a heat model that every run heats, for the telemetry simulator (``attach_heat``, ``edgeaccel.sim``);
- faults (``Faults``): ``load_error`` (loading fails as a missing delegate does: DeviceUnavailableError with the
  reason, while availability says the device is there), ``fail_after`` N calls of one loaded executor (a
  hot-unplug: that call and every later one raise DeviceUnavailableError, availability() says so, new loads fail,
  until ``replug()``), ``hang_after`` N calls (the call sleeps ``hang_s``, bounded, then raises
  InferenceTimeoutError), ``offload_share`` (partial placement, reported in ``info.details["accelerated_share"]``).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from ..errors import DeviceUnavailableError, InferenceTimeoutError, ModelClosedError
from ..executors.base import Availability, Executor, ExecutorInfo, ExecutorOptions
from ..executors.device import base_of
from ..executors.facts import DEVICE_KINDS, DeviceSpec
from ..modelinfo import Format, ModelInfo
from .emulated_numerics import NUMERICS, _digest, _numerics

WRAPPABLE = ("litert", "onnxruntime", "openvino")
SIMULATED = "simulated by edgeaccel.testing.emulated"
_DEVICE_LOCKS: dict[str, threading.Lock] = {}  # emulated device name -> the lock its requests take turns on
_DEVICE_LOCKS_GUARD = threading.Lock()


@dataclass(frozen=True)
class Faults:
    """Faults to inject. ``load_error``: the reason loading fails (a delegate that does not load);
    ``fail_after``: calls of one loaded executor that succeed before the device is unplugged; ``hang_after``:
    calls before one hangs for ``hang_s`` (then InferenceTimeoutError); ``offload_share``: the share of the
    model placed on the accelerator (the rest "runs on the CPU" at CPU speed)."""

    load_error: str | None = None
    fail_after: int | None = None
    hang_after: int | None = None
    hang_s: float = 5.0
    offload_share: float = 1.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.offload_share <= 1.0:
            raise ValueError(f"offload_share is a share of the model, 0..1, not {self.offload_share}")
        for name in ("fail_after", "hang_after"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} counts calls: 0 or more, not {value}")
        if not 0 < self.hang_s <= 600:
            raise ValueError(f"hang_s is bounded: 0 < hang_s <= 600, not {self.hang_s}")


@dataclass(frozen=True)
class EmulatedSpec:
    """Everything that describes one emulated accelerator; plain data, so that a plug-in module written to
    disk can make the same class again (``source``)."""

    name: str  # the runtime name it registers as
    device: str
    kind: str
    wraps: str = "litert"
    speedup: float | None = None
    fixed_latency_ms: float | None = None
    numerics: str = "exact"
    power_w: float | None = None
    idle_w: float | None = None
    heat: dict | None = None  # sim.heat.DeviceParams fields
    faults: Faults = field(default_factory=Faults)
    available: bool | str = True  # False or a reason: the device is absent
    memo: int = 64
    label: str = ""

    def __post_init__(self) -> None:
        if self.numerics not in NUMERICS:
            raise ValueError(f"numerics must be one of {', '.join(NUMERICS)}, not {self.numerics!r}")
        if self.wraps not in WRAPPABLE:
            raise ValueError(f"wraps must be one of {', '.join(WRAPPABLE)} (a CPU runtime), not {self.wraps!r}")
        if self.kind not in DEVICE_KINDS or self.kind in ("cpu", "auto"):
            raise ValueError(f"kind must be an accelerator kind ({', '.join(DEVICE_KINDS[1:-1])}), not {self.kind!r}")
        if self.speedup is not None and self.speedup <= 0:
            raise ValueError(f"speedup must be positive, not {self.speedup}")
        if self.fixed_latency_ms is not None and self.fixed_latency_ms < 0:
            raise ValueError(f"fixed_latency_ms must be 0 or more, not {self.fixed_latency_ms}")
        if base_of(self.device) != self.device or self.device == "CPU":
            raise ValueError(f"device must be a plain device name other than CPU (FastGPU, EdgeTPU), not {self.device!r}")

    @property
    def precision(self) -> str | None:
        """What the device computes in when asked for nothing: its reduced precision, said; None otherwise."""
        return self.numerics if self.numerics in ("f16", "bf16", "int8") else None

    def kwargs(self) -> dict[str, Any]:
        data = asdict(self)
        data["faults"] = asdict(self.faults)
        return data

    def source(self, variable: str) -> str:
        """Python that makes this class again under ``variable`` (for a plug-in module on disk)."""
        kwargs = self.kwargs()
        kwargs["faults"] = "__FAULTS__"
        text = repr(kwargs).replace("'__FAULTS__'", f"Faults(**{asdict(self.faults)!r})")
        return f"{variable} = emulated_accelerator(**{text})\n{variable}.__module__ = __name__\n"


def emulated_accelerator(name: str = "fastgpu", device: str = "FastGPU", kind: str = "gpu", wraps: str = "litert",
                         speedup: float | None = None, fixed_latency_ms: float | None = None,
                         numerics: str = "exact", power_w: float | None = None, idle_w: float | None = None,
                         heat: Any = None, faults: Faults | None = None, available: bool | str = True,
                         memo: int = 64, label: str = "") -> type[EmulatedExecutor]:
    """A new Executor class for one emulated accelerator (see the module's docstring for what each argument
    emulates). ``heat`` is a ``sim.heat.DeviceParams`` or a dict of its fields."""
    if heat is not None and not isinstance(heat, dict):
        heat = asdict(heat)
    spec = EmulatedSpec(name, device, kind, wraps, speedup, fixed_latency_ms, numerics, power_w, idle_w, heat,
                        faults or Faults(), available, memo, label)
    target = DeviceSpec(device, kind, via=f"emulated: answers by {wraps} on the CPU, behaviour simulated",
                          precisions=(spec.precision,) if spec.precision else (),
                          default_precision=spec.precision)
    class_name = "".join(part.capitalize() for part in name.replace("-", "_").split("_")) + "EmulatedExecutor"
    return type(class_name, (EmulatedExecutor,), {
        "__module__": __name__, "runtime": name, "label": label or f"{name} (emulated {kind})", "spec": spec, "device_specs": (target,),
        "__doc__": f"Emulated {kind} {device!r} over {wraps} on the CPU ({numerics} numerics); figures simulated.",
    })


class EmulatedExecutor(Executor):
    """Base of the classes ``emulated_accelerator`` makes; the class attribute ``spec`` describes the device."""

    spec: ClassVar[EmulatedSpec]
    presence = "availability"  # no probe knows this device: availability() says whether it is here
    formats = frozenset(Format)  # narrowed per class to what the wrapped runtime reads (see __init_subclass__)
    _unplugged: ClassVar[str | None] = None
    _heat: ClassVar[Any] = None
    _heat_clock: ClassVar[Any] = None

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        spec = cls.__dict__.get("spec")
        if spec is not None:
            wrapped = cls.wrapped()
            cls.formats = frozenset(f for f in wrapped.formats if f is not Format.EDGETPU_TFLITE)
            cls.native_formats = wrapped.native_formats
            cls.distributions = wrapped.distributions  # installed when the runtime it wraps is
            cls.error_rules = wrapped.error_rules
            cls.power_w = spec.power_w
            cls._unplugged = None
            if spec.heat is not None:
                from ..sim.heat import DeviceParams, HeatModel

                cls._heat = HeatModel(DeviceParams(**spec.heat))

    # -- the class's facts -------------------------------------------------------------------------------------
    power_w: ClassVar[float | None] = None  # simulated busy power

    @classmethod
    def wrapped(cls) -> type[Executor]:
        from ..executors import registry

        # the built-in table, not registry.get: a plug-in module making this class runs while the registry
        # itself is loading entry points
        return registry.load_class(registry.BUILTIN[cls.spec.wraps], f"built-in {cls.spec.wraps}")

    @classmethod
    def availability(cls, device: str | None = None) -> Availability:
        spec = cls.spec
        try:
            inner = cls.wrapped().availability("CPU")
        except Exception as exc:  # never raise: the wrapped runtime's bug is a reason
            return Availability(False, f"{spec.wraps} on the CPU cannot be asked: {type(exc).__name__}: {exc}")
        if not inner:
            return Availability(False, f"emulated {spec.device} wraps {spec.wraps}, which is not usable: "
                                f"{inner.reason}", fix=inner.fix)
        if device is None:  # the runtime itself: usable wherever what it wraps is
            return Availability(True, f"emulated {spec.kind} {spec.device} over {spec.wraps} on the CPU",
                                version=inner.version)
        if not isinstance(device, str) or base_of(device) != spec.device:
            return Availability(False, f"{cls.runtime} drives {spec.device} only, not {device!r}")
        if spec.available is not True:
            reason = spec.available if isinstance(spec.available, str) else "not connected"
            return Availability(False, f"no {spec.device} here (emulated): {reason}", fix="plug it in (emulated)")
        if cls._unplugged:
            return Availability(False, cls._unplugged, fix="plug it back in, then model.reselect() (emulated)")
        return Availability(True, f"emulated {spec.kind} {spec.device} present (answers by {spec.wraps} on the CPU; "
                            "latency, power and heat simulated)", version=inner.version)

    @classmethod
    def rejects(cls, model: ModelInfo, device: str, options: ExecutorOptions) -> str | None:
        why = super().rejects(model, device, options)
        return why or cls.wrapped().rejects(model, "CPU", replace(options, precision=None))

    @classmethod
    def unplug(cls, reason: str | None = None) -> None:
        """The device goes away now (a hot-unplug): running executors raise DeviceUnavailableError."""
        cls._unplugged = reason or f"{cls.spec.device} was unplugged (emulated hot-unplug)"

    @classmethod
    def replug(cls) -> None:
        cls._unplugged = None

    @classmethod
    def attach_heat(cls, heat, clock=time.monotonic) -> None:
        """Make every run heat ``heat`` (a sim.heat.HeatModel, e.g. one of a SimWorld's ``models``), on ``clock``
        (seconds, the timebase the SimWorld is synced on). The scheduler then reads its device as simulated."""
        cls._heat, cls._heat_clock = heat, clock

    # -- one loaded model ----------------------------------------------------------------------------------------
    def __init__(self, model: ModelInfo, device: str, options: ExecutorOptions) -> None:
        super().__init__(model, device, options)
        spec = self.spec
        self._closed = False
        self._calls = 0
        self._count = threading.Lock()
        # the device runs one request at a time, whichever loaded model sends it (two models on one Edge TPU
        # take turns): one lock per emulated device, not per executor
        with _DEVICE_LOCKS_GUARD:
            self._device = _DEVICE_LOCKS.setdefault(spec.device, threading.Lock())
        self._memo: OrderedDict[bytes, tuple[list[np.ndarray], float]] = OrderedDict()
        self._inner: Executor | None = None
        if base_of(device) != spec.device:
            raise DeviceUnavailableError(f"{self.runtime} drives {spec.device}, not {device!r}")
        if self._unplugged:
            raise DeviceUnavailableError(f"{self.runtime}:{device}: {self._unplugged}",
                                         hint="plug it back in (emulated: replug())")
        if spec.faults.load_error is not None:  # as LiteRT's load_delegate or a missing driver says it
            raise DeviceUnavailableError(f"{self.runtime} could not load its delegate for {device}: "
                                         f"{spec.faults.load_error} (emulated load failure)",
                                         hint=f"install the {spec.device} driver and runtime library (emulated)")
        self._inner = self.wrapped()(model, "CPU", replace(options, precision=None))

    @property
    def inputs(self):
        return self._inner.inputs

    @property
    def outputs(self):
        return self._inner.outputs

    @property
    def heat(self):
        """The simulated heat model this device heats (None without one): ``scheduling`` names its domain."""
        return type(self)._heat

    @property
    def concurrency(self) -> int:
        return 1

    @property
    def info(self) -> ExecutorInfo:
        spec = self.spec
        inner = self._inner.info
        share = spec.faults.offload_share
        simulated = {"source": SIMULATED, "latency_model": self._latency_text(), "numerics": spec.numerics,
                     "power_w": spec.power_w, "accelerated_share": share}
        if spec.power_w is not None and self._last_ms is not None:
            simulated["energy_mj_per_inference"] = round(spec.power_w * self._last_ms, 4)
        details = {"emulated": f"answers by {inner.runtime} {inner.version} on the CPU; latency, numerics, power and "
                               "heat simulated", "wraps": inner.name, "accelerated_share": share,
                   "simulated": simulated}
        if share < 1.0:
            details["placement"] = f"{share:.0%} of the model on {spec.device} (simulated), the rest on the CPU"
        precision = spec.precision or inner.precision
        return ExecutorInfo(self.runtime, f"emulated over {inner.runtime} {inner.version}", self.device,
                            precision, inner.threads, details=details)

    _last_ms: float | None = None

    def _latency_text(self) -> str:
        spec = self.spec
        parts = []
        if spec.speedup:
            parts.append(f"real / {spec.speedup:g}")
        if spec.fixed_latency_ms is not None:
            parts.append(f"{spec.fixed_latency_ms:g} ms")
        accelerated = f"max({', '.join(parts)})" if len(parts) > 1 else (parts[0] if parts else "real")
        share = spec.faults.offload_share
        return accelerated if share >= 1.0 else f"real x {1 - share:.2f} + {accelerated} x {share:.2f}"

    def modelled_s(self, real_s: float) -> float:
        """The simulated time of one run whose answer the CPU computed in ``real_s``."""
        spec = self.spec
        accelerated = real_s / spec.speedup if spec.speedup else real_s
        if spec.fixed_latency_ms is not None:
            accelerated = max(accelerated, spec.fixed_latency_ms / 1000) if spec.speedup else spec.fixed_latency_ms / 1000
        share = spec.faults.offload_share
        return real_s * (1.0 - share) + accelerated * share

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        if self._closed:
            raise ModelClosedError(f"{self.model.path.name} was closed ({self.runtime} on {self.device})",
                                   hint="load it again with edgeaccel.load")
        self._fault()
        with self._device:
            start = time.perf_counter()
            key = _digest(inputs)
            found = self._memo.get(key) if key is not None else None
            if found is None:
                outputs = list(self._inner.run(inputs))  # the wrapped runtime's errors are edgeaccel errors
                found = (outputs, time.perf_counter() - start)
                if key is not None:
                    self._memo[key] = found
                    while len(self._memo) > self.spec.memo:
                        self._memo.popitem(last=False)
            else:
                self._memo.move_to_end(key)
            outputs, real_s = found
            modelled = self.modelled_s(real_s)
            left = modelled - (time.perf_counter() - start)
            if left > 0:
                time.sleep(left)
            self._last_ms = modelled * 1000
            if self._heat is not None:
                clock = self._heat_clock or time.monotonic
                self._heat.begin(clock())
        return [_numerics(a, self.spec.numerics) for a in outputs]

    def _fault(self) -> None:
        faults = self.spec.faults
        with self._count:
            self._calls += 1
            calls = self._calls
        if faults.fail_after is not None and calls > faults.fail_after and not self._unplugged:
            type(self).unplug(f"{self.spec.device} was unplugged after {faults.fail_after} calls (emulated hot-unplug)")
        if self._unplugged:
            raise DeviceUnavailableError(f"{self.runtime}:{self.device}: {self._unplugged}",
                                         hint="plug it back in (emulated: replug()), then model.reselect()")
        if faults.hang_after is not None and calls > faults.hang_after:
            time.sleep(faults.hang_s)
            raise InferenceTimeoutError(f"{self.runtime}:{self.device} hung for {faults.hang_s:g} s (emulated hang "
                                        f"after {faults.hang_after} calls)", runtime=self.runtime,
                                        hint="the device stopped answering; it needs a reset (emulated)")

    def close(self) -> None:
        self._closed = True
        self.stop_workers()
        if self._inner is not None:
            self._inner.close()
        self._memo.clear()
