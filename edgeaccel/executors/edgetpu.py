"""The Edge TPU as a LiteRT device: device strings, the delegate library and its options, the runtime's
version, and Coral's pycoral where it is importable. No runtime is imported here.

Device strings (``device=`` of ``edgeaccel.load``) and the libedgetpu ``device`` option each becomes
(google-coral/libedgetpu tflite/edgetpu_delegate_for_custom_op_tflite_plugin.cc)::

    EdgeTPU           any Edge TPU                 (no "device" option: libedgetpu opens the first)
    EdgeTPU:N         the N-th of any type         ":N"
    EdgeTPU:usb       any USB Edge TPU             "usb"
    EdgeTPU:usb:N     the N-th USB Edge TPU        "usb:N"
    EdgeTPU:pci       any PCIe/M.2 Edge TPU        "pci"
    EdgeTPU:pci:N     the N-th PCIe Edge TPU       "pci:N"

N counts in libedgetpu's enumeration order (pycoral.utils.edgetpu.list_edge_tpus() shows it). libedgetpu
forwards its other options ("Performance": Low/Medium/High/Max, "Usb.AlwaysDfu", "Usb.MaxBulkInQueueLength")
only when the device string carries an index; pass them as ``RuntimeOptions(native={"edgetpu_options": {...}})``.

The delegate library is libedgetpu.so.1 / libedgetpu.1.dylib / edgetpu.dll (the probe's table);
``EDGEACCEL_EDGETPU_LIBRARY`` names another file or name (tests point it at a delegate they build).
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
from dataclasses import dataclass

from ..hardware.libraries import EDGETPU_LIBRARY

LIBRARY_ENV = "EDGEACCEL_EDGETPU_LIBRARY"
KINDS = ("usb", "pci")
DEVICE_FORMS = "EdgeTPU, EdgeTPU:N, EdgeTPU:usb, EdgeTPU:usb:N, EdgeTPU:pci, EdgeTPU:pci:N"


@dataclass(frozen=True)
class EdgeTpuDevice:
    """A parsed Edge TPU device string."""

    name: str  # as the caller wrote it
    kind: str | None  # "usb", "pci" or None for any
    index: int | None

    @property
    def option(self) -> str | None:
        """libedgetpu's "device" option value, None to let libedgetpu open any."""
        if self.kind is None and self.index is None:
            return None
        return f"{self.kind or ''}:{self.index}" if self.index is not None else self.kind

    @property
    def label(self) -> str:
        what = {"usb": "USB Edge TPU", "pci": "PCIe Edge TPU", None: "Edge TPU"}[self.kind]
        return what if self.index is None else f"{what} #{self.index}"


def parse_device(device: str) -> EdgeTpuDevice:
    """``EdgeTPU[:usb|:pci][:N]`` -> EdgeTpuDevice; ValueError naming the accepted forms otherwise."""
    parts = device.split(":")
    bad = ValueError(f"{device!r} is not an Edge TPU device; use one of {DEVICE_FORMS}")
    if parts[0] != "EdgeTPU" or len(parts) > 3:
        raise bad
    kind, index = None, None
    rest = parts[1:]
    if rest and rest[0] in KINDS:
        kind = rest.pop(0)
    if rest:
        if len(rest) != 1 or not rest[0].isdigit():
            raise bad
        index = int(rest[0])
    return EdgeTpuDevice(device, kind, index)


def delegate_options(device: EdgeTpuDevice, extra: dict | None = None) -> dict[str, str]:
    """The key/value options handed to tflite_plugin_create_delegate; all values are strings."""
    options = {str(k): str(v) for k, v in (extra or {}).items()}
    if "device" in options:
        raise ValueError("edgetpu_options must not set 'device': choose it with the device string "
                         f"({DEVICE_FORMS})")
    if device.option is not None:
        options["device"] = device.option
    return options


def default_library_name() -> str:
    platform = "linux" if sys.platform.startswith("linux") else sys.platform
    return EDGETPU_LIBRARY.get(platform, EDGETPU_LIBRARY["linux"])


def library_name() -> str:
    """What load_delegate is given: $EDGEACCEL_EDGETPU_LIBRARY (a path or a name), else the OS's name."""
    return os.environ.get(LIBRARY_ENV, "").strip() or default_library_name()


@dataclass(frozen=True)
class LibraryCheck:
    """Whether the dynamic loader opens the delegate library and whether it is a TFLite delegate plugin."""

    library: str
    loaded: bool
    error: str | None = None
    is_delegate: bool = False
    runtime_version: str | None = None  # libedgetpu's edgetpu_version() text, when it exports it


def check_library(library: str) -> LibraryCheck:
    """dlopen ``library`` and look for the plugin symbols; never raises. Opening libedgetpu touches no
    device (the device is opened by tflite_plugin_create_delegate)."""
    try:
        handle = ctypes.CDLL(library)
    except OSError as exc:
        return LibraryCheck(library, False, str(exc).strip() or "the loader refused it")
    is_delegate = all(hasattr(handle, name) for name in ("tflite_plugin_create_delegate",
                                                          "tflite_plugin_destroy_delegate"))
    version = None
    if hasattr(handle, "edgetpu_version"):
        try:
            handle.edgetpu_version.restype = ctypes.c_char_p
            raw = handle.edgetpu_version()
            version = raw.decode("utf-8", "replace") if raw else None
        except Exception:
            version = None
    error = None if is_delegate else "it does not export tflite_plugin_create_delegate/destroy_delegate"
    return LibraryCheck(library, True, error, is_delegate, version)


def runtime_version_number(text: str | None) -> int | None:
    """N of libedgetpu's "BuildLabel(...), RuntimeVersion(N)" (pycoral's get_runtime_version() prints it)."""
    m = re.search(r"RuntimeVersion\((\d+)\)", text or "")
    return int(m.group(1)) if m else None


def required_runtime_versions(message: str) -> tuple[int, int] | None:
    """(needed, have) from libedgetpu's "Package requires runtime version (14), which is newer than this
    runtime version (13)" (google-coral/edgetpu#435): the model came from a newer edgetpu_compiler."""
    m = re.search(r"requires runtime version \((\d+)\), which is newer than this runtime version \((\d+)\)",
                  message)
    return (int(m.group(1)), int(m.group(2))) if m else None


def pycoral_edge_tpus() -> list[dict] | None:
    """Coral's own enumeration, [{'type': 'usb'|'pci', 'path': ...}], in libedgetpu's order, when Coral's
    pycoral is importable; None otherwise. The PyPI project named ``pycoral`` is unrelated and lacks
    pycoral.utils.edgetpu, so the submodule is what is looked for. Never a dependency."""
    import importlib.util

    try:
        if importlib.util.find_spec("pycoral") is None or importlib.util.find_spec("pycoral.utils.edgetpu") is None:
            return None
        from pycoral.utils.edgetpu import list_edge_tpus  # type: ignore[import-not-found]

        return [dict(d) for d in list_edge_tpus()]
    except Exception:  # pycoral imports tflite_runtime, which fails under numpy 2 (runtime facts)
        return None
