"""LiteRT's NPU accelerator, described but not driven (runtimes/litert.yaml marks it planned).

ai-edge-litert 2.x has a second API beside the Interpreter: ``CompiledModel.from_file(path,
hardware_accel=HardwareAccelerator.NPU | HardwareAccelerator.CPU)``, which compiles the .tflite with a
vendor compiler plugin and runs it through a vendor dispatch library, both shipped inside the wheel under
``ai_edge_litert/vendors/<vendor>/{compiler,dispatch}/``. What that takes, measured with ai-edge-litert 2.3.0
on the x86 build machine (no NPU):

- the Intel OpenVINO plugin and dispatch libraries link libopenvino.so.2631 (OpenVINO 2026.3); the
  openvino wheel installed beside them was 2026.4 (libopenvino.so.2641), so neither loaded;
- without a compiler plugin, NPU|CPU silently ran the whole model on the CPU (``is_fully_accelerated()``
  False) and NPU alone raised "Some ops are not accelerated": an executor built on it must check
  is_fully_accelerated() and report the fallback;
- Qualcomm and MediaTek ship only compiler plugins here (no dispatch library): their NPUs need the
  vendor's runtime (QNN SDK, NeuroPilot) on the device.

This module answers availability with the state of those libraries; it imports no runtime.
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os

from .base import Availability

PLANNED = ("LiteRT's NPU accelerator (CompiledModel with HardwareAccelerator.NPU) is described in "
           "runtimes/litert.yaml but not driven by edgeaccel yet")
FIX = "use OpenVINO's NPU device (executor='openvino', device='NPU') for an Intel NPU"


def vendor_libraries() -> dict[str, dict[str, list[str]]]:
    """{vendor: {"compiler": [paths], "dispatch": [paths]}} inside the installed ai_edge_litert, found
    without importing it."""
    try:
        spec = importlib.util.find_spec("ai_edge_litert")
    except (ImportError, ValueError):
        return {}
    if spec is None or not spec.submodule_search_locations:
        return {}
    base = os.path.join(list(spec.submodule_search_locations)[0], "vendors")
    found: dict[str, dict[str, list[str]]] = {}
    for vendor in sorted(os.listdir(base)) if os.path.isdir(base) else ():
        parts = {kind: sorted(glob.glob(os.path.join(base, vendor, kind, "*LiteRt*")))
                 for kind in ("compiler", "dispatch")}
        if any(parts.values()):
            found[vendor] = parts
    return found


def npu_availability(version: str | None) -> Availability:
    libraries = vendor_libraries()
    dispatch = [(vendor, path) for vendor, parts in libraries.items() for path in parts["dispatch"]]
    if not dispatch:
        shipped = ", ".join(libraries) or "none"
        return Availability(False, f"{PLANNED}; this ai-edge-litert ships no NPU dispatch library (vendor "
                                   f"plugins: {shipped})", fix=FIX, version=version)
    states = []
    for vendor, path in dispatch:
        try:
            ctypes.CDLL(path)
            states.append(f"{vendor} dispatch library loads")
        except OSError as exc:
            states.append(f"{vendor} dispatch library {os.path.basename(path)} does not load: {exc}")
    return Availability(False, f"{PLANNED}; here the {'; the '.join(states)}", fix=FIX, version=version)
