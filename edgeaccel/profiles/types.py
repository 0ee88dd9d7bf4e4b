"""The profile model the selector and the scheduler consume. Loading and validation live beside it
(``loader.py``), matching a machine to a profile in ``match.py``."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..options import GOALS, PRECISIONS  # noqa: F401  (named once, where load() checks them)

# Device names as executors and the probe use them. A profile names only these, so a typo ("EdgeTpu")
# is an error at load time instead of a device that silently never ranks.
# RKNPU, Hailo and QNN are what the probe reports for the Rockchip NPU, a Hailo module and a Qualcomm NPU
# ("NPU" alone is the Intel NPU OpenVINO drives); CANN is a Huawei Ascend NPU (ONNX Runtime's CANN provider).
DEVICE_NAMES = ("CPU", "GPU", "NPU", "CUDA", "TensorRT", "EdgeTPU", "TPU", "RKNPU", "Hailo", "QNN", "CANN")
KINDS = ("cpu", "gpu", "npu", "edgetpu", "tpu", "dsp")


def base_device(device: str) -> str:
    """"GPU.1" and "CUDA:0" are the GPU and CUDA devices of a profile."""
    return device.split(":")[0].split(".")[0]


@dataclass(frozen=True)
class AcceleratorSpec:
    """One compute device of the family, with the vendor's published figures (``source`` cites them)."""

    device: str  # the device name executors use: "CPU", "GPU", "NPU", "CUDA", "TensorRT", "EdgeTPU", "TPU"
    kind: str  # cpu | gpu | npu | edgetpu | tpu
    name: str  # e.g. "Coral USB Accelerator (Edge TPU)"
    precisions: tuple[str, ...] = ()  # what it runs well: int8, f16, bf16, f32
    tops_int8: float | None = None
    tflops_f16: float | None = None
    memory_mb: float | None = None
    typical_power_w: float | None = None
    source: str = ""
    # Added: other device names executors use for the same silicon. One NVIDIA GPU is "CUDA" and
    # "TensorRT" to ONNX Runtime; listing it twice would duplicate (and let diverge) its figures.
    aliases: tuple[str, ...] = ()
    # Added: Cloud TPUs publish bf16, not f16; putting a bf16 figure in tflops_f16 would mislabel it.
    tflops_bf16: float | None = None

    @property
    def devices(self) -> tuple[str, ...]:
        return (self.device, *self.aliases)


@dataclass(frozen=True)
class ThermalLimits:
    """Trip points in degrees C: passive = the device starts to throttle; critical = it shuts down."""

    passive_c: float | None = None
    critical_c: float | None = None
    source: str = ""


@dataclass(frozen=True)
class MatchRule:
    """When a profile applies to a machine. Every condition given must hold; ``board`` and ``compatible``
    are two ways to name one board, so either of them matching is enough. Substrings are compared without
    regard to case. The matching profile with the highest ``priority`` wins (specific boards beat the
    generic arch fallbacks, which have priority 0)."""

    arch: tuple[str, ...] = ()  # platform.machine() values: x86_64, aarch64, ...
    board: tuple[str, ...] = ()  # substrings of the device-tree model (/proc/device-tree/model)
    compatible: tuple[str, ...] = ()  # substrings of a device-tree compatible string ("rockchip,rk3588")
    cpu_model: tuple[str, ...] = ()  # substrings of the CPU model name (/proc/cpuinfo "model name")
    cpu_flags: tuple[str, ...] = ()  # every one of these ISA flags must be present
    devices: tuple[str, ...] = ()  # every one of these devices must be present (probe's present_devices())
    priority: int = 0


@dataclass(frozen=True)
class Profile:
    name: str
    title: str
    accelerators: tuple[AcceleratorSpec, ...]
    # goal -> device names, best first; a device absent from the list ranks after those present in it
    preference: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # device -> runtime names, best first, for the selector's rules when nothing was measured
    runtimes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    power_budget_w: float | None = None
    idle_power_w: float | None = None
    thermal: ThermalLimits = ThermalLimits()
    notes: str = ""
    source_file: str = ""
    # Added: how the profile is matched to a machine (match.py), with the citations of the power figures
    # and the reason behind each runtime order (what `explain` can show next to the order).
    match: MatchRule = MatchRule()
    power_source: str = ""
    runtime_notes: dict[str, str] = field(default_factory=dict)

    def accelerator(self, device: str) -> AcceleratorSpec | None:
        base = base_device(device)
        return next((a for a in self.accelerators if base in a.devices), None)

    @property
    def device_names(self) -> tuple[str, ...]:
        """Every device name the profile knows, aliases included, in accelerator order."""
        return tuple(name for a in self.accelerators for name in a.devices)

    def device_rank(self, goal: str, device: str) -> int:
        order = self.preference.get(goal) or self.preference.get("latency") or ()
        base = base_device(device)
        return order.index(base) if base in order else len(order)

    def runtime_rank(self, device: str, runtime: str) -> int | None:
        order = self.runtimes.get(base_device(device))
        if not order:
            return None
        return order.index(runtime) if runtime in order else len(order)
