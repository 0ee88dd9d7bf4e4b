"""Which Python packages provide each runtime, and their installed versions, found without importing them.

One table for the executors (is my runtime installed?) and the probe (which runtimes are here?). This
module imports nothing heavy (no numpy, no importlib.metadata unless a dist-info folder is missing), so
asking costs almost nothing at start-up.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence

# (top-level module, pip distribution) pairs, preferred first; any one installed suffices.
LITERT = (("ai_edge_litert", "ai-edge-litert"), ("tflite_runtime", "tflite-runtime"),
          ("tensorflow", "tensorflow"), ("tensorflow", "tensorflow-cpu"))
ONNXRUNTIME = tuple(("onnxruntime", d) for d in ("onnxruntime", "onnxruntime-gpu", "onnxruntime-openvino",
                                                  "onnxruntime-qnn", "onnxruntime-directml",
                                                  "onnxruntime-cann"))
OPENVINO = (("openvino", "openvino"),)
TENSORFLOW = (("tensorflow", "tensorflow"), ("tensorflow", "tensorflow-cpu"))
# NVIDIA's TensorRT wheels (the `tensorrt` meta-package pulls one per CUDA major) and a CUDA binding for it:
# cuda-python's cuda.bindings (12.6+), or its older flat `cuda` package
TENSORRT = tuple(("tensorrt", d) for d in ("tensorrt", "tensorrt-cu13", "tensorrt-cu12", "tensorrt-cu11",
                                          "tensorrt-cu13-bindings", "tensorrt-cu12-bindings"))
CUDA_BINDINGS = (("cuda.bindings", "cuda-bindings"), ("cuda", "cuda-python"))
# What accelerators need beside the runtimes: distribution -> its (module, distribution) pairs
HELPERS = {
    "nvidia-ml-py": (("pynvml", "nvidia-ml-py"),),
    "libtpu": (("libtpu", "libtpu"), ("libtpu", "libtpu-nightly")),
    "rknn-toolkit-lite2": (("rknnlite", "rknn-toolkit-lite2"),),
    "hailort": (("hailo_platform", "hailort"),),
}


def installed(pairs: Sequence[tuple[str, str]]) -> tuple[str | None, str | None]:
    """(distribution, version) of the first installed pair. The module is looked for first (cheap), then
    the version is read from the ``<dist>-<version>.dist-info`` folder beside it; importlib.metadata (6 MB of
    imports: email, zipfile, csv) only where that folder is not there (editable or egg installs)."""
    present = []
    for module, dist in pairs:
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            continue
        if spec is None:
            continue
        locations = list(spec.submodule_search_locations or ()) or ([spec.origin] if spec.origin else [])
        version = _dist_info_version(dist, [os.path.dirname(p) for p in locations])
        if version is not None:
            return dist, version
        present.append(dist)
    for dist in present:  # the module is there but no dist-info folder beside it names a version
        version = _metadata_version(dist)
        if version is not None:
            return dist, version
    return None, None


def installed_version(pairs: Sequence[tuple[str, str]]) -> str | None:
    return installed(pairs)[1]


def _dist_info_version(dist: str, folders: Sequence[str]) -> str | None:
    prefix = dist.replace("-", "_").lower() + "-"
    for folder in folders:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if name.endswith(".dist-info") and name.lower().startswith(prefix):
                return name[len(prefix) : -len(".dist-info")]
    return None


def _metadata_version(dist: str) -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None
    except Exception:  # broken metadata
        return None
