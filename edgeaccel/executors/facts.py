"""What an executor class declares about its runtime, so that nothing outside its module names the runtime.

``DeviceSpec``: one device the runtime reaches, its kind and how it is reached (provider, delegate, the
runtime's own device string), the precisions it offers and the one it runs by default, and what installs it.
``RuntimeSurvey``: what the runtime reaches on this machine, as ``edgeaccel probe`` shows it (an executor's
``survey()``); it lives in ``edgeaccel.runtimeinfo``, beside both the probe report and the executors.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from ..modelinfo import Format
from ..runtimeinfo import RuntimeInfo as RuntimeSurvey  # noqa: F401  (re-exported for executor authors)

# Device kinds the selector and the scheduler know; a plug-in names one of these for each device.
DEVICE_KINDS = ("cpu", "gpu", "npu", "tpu", "edgetpu", "dsp", "auto")


@dataclass(frozen=True)
class DeviceSpec:
    """One device a runtime reaches, and how: an executor class declares its devices as a tuple of these
    (``Executor.device_specs``)."""

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


DeviceTarget = DeviceSpec  # its earlier name, still read by plug-ins and tests


def fold_old_declaration(owner: str, own: dict) -> tuple[tuple[DeviceSpec, ...], tuple[str, ...]] | None:
    """(device_specs, kindless devices) of a class that declares its devices one of the earlier ways, with a
    DeprecationWarning that says how to write it now; None when it declares none of them (it inherits).

    ``targets`` (DeviceSpec objects), ``device_kinds`` ({"Hailo8": "npu"}), or ``devices`` (names alone: only
    the CPU's kind is known; the others are returned as kindless, which the registry refuses, saying why)."""
    if "targets" in own:
        specs, kindless, old = tuple(own["targets"]), (), "targets = (...)"
    elif "device_kinds" in own:
        specs = tuple(DeviceSpec(name, kind) for name, kind in own["device_kinds"].items())
        kindless, old = (), f"device_kinds = {own['device_kinds']!r}"
    elif "devices" in own:
        specs = tuple(DeviceSpec(d, "cpu") for d in own["devices"] if d == "CPU")
        kindless, old = tuple(d for d in own["devices"] if d != "CPU"), f"devices = {tuple(own['devices'])!r}"
    else:
        return None
    new = ", ".join(f"DeviceSpec({s.name!r}, {s.kind!r})" for s in specs[:3])
    new += ", ..." if len(specs) > 3 else ""
    if kindless:
        new = ", ".join([*([new] if new else []), *(f"DeviceSpec({d!r}, '<kind>')" for d in kindless)])
    warnings.warn(f"{owner} declares its devices as `{old}`, which is deprecated: declare "
                  f"`device_specs = ({new},)` (edgeaccel.executors.DeviceSpec; docs/plugins.md)",
                  DeprecationWarning, stacklevel=4)
    return specs, kindless
