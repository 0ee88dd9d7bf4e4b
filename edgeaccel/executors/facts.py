"""What an executor class declares about its runtime, so that nothing outside its module names the runtime.

``DeviceTarget``: one device the runtime reaches, its kind and how it is reached (provider, delegate, the
runtime's own device string), the precisions it offers and the one it runs by default, and what installs it.
``RuntimeSurvey``: what the runtime reaches on this machine, as ``edgeaccel probe`` shows it (an executor's
``survey()``); it lives in ``edgeaccel.runtimeinfo``, beside both the probe report and the executors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..modelinfo import Format
from ..runtimeinfo import RuntimeInfo as RuntimeSurvey  # noqa: F401  (re-exported for executor authors)

# Device kinds the selector and the scheduler know; a plug-in names one of these for each device.
DEVICE_KINDS = ("cpu", "gpu", "npu", "tpu", "edgetpu", "dsp", "auto")


@dataclass(frozen=True)
class DeviceTarget:
    """One device a runtime reaches, and how."""

    name: str
    kind: str
    via: str = ""  # for people: how the runtime reaches it
    provider: str | None = None  # ONNX Runtime execution provider
    delegate: str | None = None  # LiteRT delegate library
    device_name: str | None = None  # the runtime's own device string
    extra: str | None = None  # the edgeaccel extra that installs the build reaching it, when not the runtime's
    packages: tuple[str, ...] = ()
    requires: str | None = None  # what pip cannot install (a system library, a driver)
    formats: frozenset[Format] | None = None  # None: the runtime's formats
    planned: bool = False  # described, not driven yet: never offered to the selector
    # Precisions the device offers besides its default, each an opt-in that calibration must check.
    precisions: tuple[str, ...] = ()
    # What runs when the caller asks for none: None is the model's own precision (f32 math for float layers);
    # an NPU that computes in f16 only says "f16" here.
    default_precision: str | None = None
    # Precisions that need CPU flags to be worth offering: emulated bf16 is slower, never a win.
    needs_cpu_flags: dict = field(default_factory=dict)
