"""The small contract every executor implements: availability with a reason, load, run, close.

An executor owns one loaded model on one device of one runtime. ``run`` receives inputs already validated
by the Model (count, order, dtype, shape), is safe to call from many threads at once (each executor keeps
the runtime objects that are not thread-safe in a pool), and returns outputs in the model's order.
Runtimes are imported inside the executor's methods, never when edgeaccel is imported.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import numpy as np

if TYPE_CHECKING:  # concurrent.futures costs start-up memory; only the asynchronous path needs it
    from concurrent.futures import Future, ThreadPoolExecutor

from ..modelinfo import Format, ModelInfo, TensorSpec
from ..packages import installed, installed_version
from .device import DeviceRef, base_of
from .executor_options import ExecutorOptions, default_threads  # noqa: F401  (re-exported: their old home)
from .facts import DeviceSpec, DeviceTarget, RuntimeSurvey, fold_old_declaration
from .pool import Pool  # noqa: F401  (re-exported: its old home)


@dataclass(frozen=True)
class Availability:
    """Whether a runtime (or a device through it) can be used here, and if not why and how to fix it."""

    ok: bool
    reason: str
    fix: str | None = None
    version: str | None = None

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        text = self.reason if not self.version else f"{self.reason} (version {self.version})"
        return f"{text}; fix: {self.fix}" if self.fix else text


@dataclass(frozen=True)
class ExecutorInfo:
    """What runs the model: shown by ``print(model.executor)``."""

    runtime: str
    version: str
    device: str
    precision: str
    threads: int | None = None
    reason: str = ""
    artifact: str = ""
    details: dict = field(default_factory=dict, compare=False)

    @property
    def name(self) -> str:
        return f"{self.runtime}:{self.device}"

    def __str__(self) -> str:
        parts = [f"{self.runtime} {self.version} on {self.device}", f"precision {self.precision}"]
        if self.threads:
            parts.append(f"{self.threads} threads")
        text = ", ".join(parts)
        return f"{text} ({self.reason})" if self.reason else text


class Executor(ABC):
    """Base class of every executor, built-in or plug-in. The class declares its runtime's facts; the rest of
    edgeaccel (selector, probe report, scheduler, CLI) reads them through the registry and names no runtime.

    A subclass sets ``runtime`` and ``formats``, and declares its devices once, as ``device_specs``: a tuple of
    ``DeviceSpec(name, kind, ...)`` (how the device is reached, its precisions, what installs it), e.g.
    ``device_specs = (DeviceSpec("Hailo8", "npu"),)``. ``targets``, ``device_kinds`` and ``devices`` are derived
    from it (read them, never set them: a class that still sets one is converted, with a DeprecationWarning).
    It implements ``availability``, ``info``, ``run`` and ``close``; ``survey``, ``rejects``, ``error_rules``
    and ``options_beside_others`` have defaults.
    """

    runtime: ClassVar[str]
    label: ClassVar[str] = ""  # the runtime's name for people ("ONNX Runtime"); ``runtime`` when not given
    formats: ClassVar[frozenset[Format]]
    # formats the runtime reads without converting them (None: all of ``formats``): ranked first
    native_formats: ClassVar[frozenset[Format] | None] = None
    # the one declaration of the devices the runtime reaches (planned ones included, never offered)
    device_specs: ClassVar[tuple[DeviceSpec, ...]] = (DeviceSpec("CPU", "cpu"),)
    # derived from device_specs: every spec; {name: kind} and the names of the devices driven today
    targets: ClassVar[tuple[DeviceTarget, ...]] = device_specs
    device_kinds: ClassVar[dict[str, str]] = {"CPU": "cpu"}
    devices: ClassVar[tuple[str, ...]] = ("CPU",)
    # how the class declared them: "device_specs", or the older attribute it set (converted, with a warning)
    devices_declared_as: ClassVar[str] = "device_specs"
    # precisions the caller may ask for; None is "the model's own" (f32 math for float models)
    precisions: ClassVar[tuple[str | None, ...]] = (None, "f32")
    # (top-level module, pip distribution) pairs that provide the runtime, any one suffices (checked
    # without importing it)
    distributions: ClassVar[tuple[tuple[str, str], ...]] = ()
    extra: ClassVar[str | None] = None  # the edgeaccel extra that installs the runtime
    preference: ClassVar[int] = 50  # among runtimes reaching one device, lower is tried first
    # environment variables an isolated worker of this runtime gets besides edgeaccel.isolation.environment's
    # list (names, or prefixes ending in "*", e.g. "CUDA_*"): a worker never sees the rest of the app's
    worker_environment: ClassVar[tuple[str, ...]] = ()
    # "probe": the hardware survey says whether a device is here (built-ins: CUDA, EdgeTPU, ...);
    # "availability": ``availability(device)`` says so (plug-ins, whose hardware the probe does not know)
    presence: ClassVar[str] = "availability"
    # how the runtime's exceptions become edgeaccel errors (``translate.translate``): ErrorRule, first match
    error_rules: ClassVar[tuple] = ()
    load_hint: ClassVar[str | None] = None  # the hint of a load failure no rule explains
    # devices (their base names) on which the executor holds the runtime to ExecutorOptions.gpu_mem_limit_mb; a
    # GPU not listed is refused under a limit rather than run without it (executors/gpu_memory.py)
    gpu_mem_limit_devices: ClassVar[frozenset[str]] = frozenset()
    kindless_devices: ClassVar[tuple[str, ...]] = ()
    # the runtime picks its throughput streams and their threads itself (OpenVINO's THROUGHPUT hint): the
    # options' stream threads do not size them, and ``info.threads`` counts the threads of all of them
    sizes_own_streams: ClassVar[bool] = False
    # a plug-in's "module:function" of the per-operator collector `edgeaccel profile` uses (collect(job) ->
    # edgeaccel.profiling.job.Collected); None: the built-in class's it extends (edgeaccel.profiling.collect
    # lists those, so that no executor names a module of the layer above), else whole-model time only, said so
    profiler: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__
        if "device_specs" not in own:
            folded = fold_old_declaration(cls.__qualname__, own)  # targets/device_kinds/devices, with a warning
            if folded is not None:
                cls.device_specs, cls.kindless_devices = folded
                cls.devices_declared_as = next(a for a in ("targets", "device_kinds", "devices") if a in own)
        else:
            cls.kindless_devices, cls.devices_declared_as = (), "device_specs"
        cls.device_specs = tuple(cls.device_specs)
        cls.targets = cls.device_specs
        # anything but a DeviceSpec is left to the registry, which refuses the class saying why
        cls.device_kinds = {t.name: t.kind for t in cls.device_specs if isinstance(t, DeviceSpec) and not t.planned}
        cls.devices = tuple(cls.device_kinds)
        if not cls.__dict__.get("label") and "runtime" in own:
            cls.label = cls.runtime

    def __init__(self, model: ModelInfo, device: str, options: ExecutorOptions) -> None:
        self.model = model
        self.device = device
        self.options = options
        self._workers: ThreadPoolExecutor | None = None
        self._workers_lock = threading.Lock()

    # -- facts, read from the class ------------------------------------------------------------------------
    @classmethod
    def target(cls, device: str | DeviceRef) -> DeviceTarget | None:
        """The declared device behind a device string ("CUDA:1" -> the CUDA target), planned ones included."""
        base = device.base if isinstance(device, DeviceRef) else base_of(device)
        return next((t for t in cls.targets if t.name == base), None)

    @classmethod
    def kind_of(cls, device: str) -> str | None:
        target = cls.target(device)
        return target.kind if target is not None else None

    @classmethod
    def reads(cls, fmt: Format, device: str | None = None) -> bool:
        """Whether the runtime reads ``fmt`` (on ``device``, which may read other formats than the runtime)."""
        target = cls.target(device) if device else None
        formats = target.formats if target is not None and target.formats is not None else cls.formats
        return fmt in formats

    @classmethod
    def is_native(cls, fmt: Format) -> bool:
        return fmt in (cls.native_formats if cls.native_formats is not None else cls.formats)

    @classmethod
    def default_precision(cls, device: str) -> str | None:
        target = cls.target(device)
        return target.default_precision if target is not None else None

    @classmethod
    def offered_precisions(cls, device: str, cpu_flags: frozenset[str] = frozenset()) -> tuple[str | None, ...]:
        """The device's default precision first, then the opt-ins it offers that this CPU makes worth it."""
        target = cls.target(device)
        if target is None:
            return (None,)
        extra = tuple(p for p in target.precisions if p != target.default_precision
                      and (p not in target.needs_cpu_flags or cpu_flags & set(target.needs_cpu_flags[p])))
        return (target.default_precision, *extra)

    @classmethod
    def installed(cls) -> str | None:
        """The installed version of the runtime's package, from metadata alone (no import: cheap)."""
        return installed_version(cls.distributions)

    @classmethod
    def install_hint(cls, device: str | None = None) -> str:
        """What installs the runtime, or its build for ``device`` (CUDA needs onnxruntime-gpu, not onnxruntime)."""
        target = cls.target(device) if device else None
        extra = cls.extra
        packages: tuple[str, ...] = tuple(dict.fromkeys(d for _, d in cls.distributions[:1]))
        if target is not None and (target.extra or target.packages):
            extra, packages = target.extra, target.packages
        hint = f"pip install 'edgeaccel[{extra}]'" if extra else (f"pip install {' '.join(packages)}" if packages
                                                                   else "")
        if target is not None and target.requires:
            hint = f"{hint}; also {target.requires}" if hint else target.requires
        return hint

    @classmethod
    def survey(cls) -> RuntimeSurvey:
        """What this runtime reaches here, for ``edgeaccel probe``: the default asks ``availability`` of each
        device. Built-ins override it to say more (providers, delegate libraries). Never raises."""
        dist, version = installed(cls.distributions) if cls.distributions else (None, None)
        if cls.distributions and dist is None:
            return RuntimeSurvey(cls.runtime, False, None, None, False, (), f"{cls.runtime} is not installed",
                                 cls.install_hint())
        reaches, reasons = [], []
        for device in cls.devices:
            try:
                found = cls.availability(device)
            except Exception as exc:  # a plug-in's bug is its reason, never ours
                found = Availability(False, f"availability() raised {type(exc).__name__}: {exc}")
            if found:
                reaches.append(device)
            else:
                reasons.append(f"{device}: {found.reason}")
        reason = f"reaches {', '.join(reaches)}" if reaches else "reaches no device here"
        return RuntimeSurvey(cls.runtime, True, version, dist, bool(reaches), tuple(reaches),
                             "; ".join([reason, *reasons]))

    @classmethod
    def explain_absence(cls, model: ModelInfo, device: str) -> tuple[str, str | None] | None:
        """(why, fix) when ``model`` can run only on ``device`` and the device is not here: each missing
        piece (device, library, permission) and the way to run the model anyway. None: the generic reason."""
        return None

    @classmethod
    def options_beside_others(cls, options: ExecutorOptions) -> ExecutorOptions:
        """The options to use when this executor shares the machine with others under a scheduler."""
        return options

    @classmethod
    def unloadable(cls, device: str) -> tuple[str, str | None] | None:
        """(why, fix) when this runtime cannot open ``device`` on this machine although the probe found the
        device (a build without its provider, a provider library whose dependencies are missing); None when
        nothing is known against it. Asked at ranking, for a model this runtime reads, on the real machine only;
        it may import the runtime. What it refuses is a rejection in `explain`, not a fallback at every load."""
        return None

    @classmethod
    @abstractmethod
    def availability(cls, device: str | None = None) -> Availability:
        """Can this runtime (and ``device``, when given) be used in this process? Cheap; never raises."""

    @classmethod
    def rejects(cls, model: ModelInfo, device: str, options: ExecutorOptions) -> str | None:
        """Why this executor cannot run ``model`` on ``device`` at ``options.precision``, from the description
        alone; None if it may. Pure: no runtime import, no device access."""
        if not cls.reads(model.format, device):
            readable = ", ".join(sorted(f.value for f in cls.formats))
            return f"{cls.runtime} reads {readable}, not {model.format.value}"
        target = cls.target(device)
        offered = (*cls.precisions, *(target.precisions if target else ()),
                   target.default_precision if target else None)
        if options.precision not in offered:
            allowed = ", ".join(dict.fromkeys(p for p in offered if p))
            return f"{cls.runtime} on {device} cannot run at precision {options.precision} (it offers {allowed})"
        from .gpu_memory import refusal  # a GPU whose memory this executor cannot cap, under a limit

        return refusal(cls, device, options)

    @property
    @abstractmethod
    def info(self) -> ExecutorInfo: ...

    @abstractmethod
    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run once. ``inputs`` are in the model's input order, already validated."""

    @abstractmethod
    def close(self) -> None:
        """Release every runtime object. Idempotent. Subclasses call ``self.stop_workers()`` first."""

    def submit(self, inputs: Sequence[np.ndarray]) -> Future:
        """Run in the background and return a Future of the outputs. The default keeps ``streams()``
        worker threads calling ``run`` (each takes its own runtime object from the executor's pool);
        executors with a native asynchronous API override this."""
        workers = self._workers
        if workers is None:
            from concurrent.futures import ThreadPoolExecutor

            with self._workers_lock:
                if self._workers is None:
                    self._workers = ThreadPoolExecutor(self.options.streams(), thread_name_prefix=self.runtime)
                workers = self._workers
        return workers.submit(self.run, inputs)

    @property
    def concurrency(self) -> int:
        """How many requests may be in flight at once to keep the device busy."""
        return self.options.streams()

    def stop_workers(self) -> None:
        with self._workers_lock:
            workers, self._workers = self._workers, None
        if workers is not None:
            workers.shutdown(wait=True)

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self.model.inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self.model.outputs
