"""edgeaccel's cache folder: where it is, what lives in it, and keeping it within its size.

Runtimes keep compiled models here (``compiled_dir``) and the selection pipeline keeps its calibration
measurements (``edgeaccel.selection.cache``); this module knows only folders and files, so every layer can use it.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterable, Mapping
from pathlib import Path

from .digest import blake2b


def cache_root(override: str | os.PathLike | None = None) -> Path:
    """$EDGEACCEL_CACHE_DIR, else $XDG_CACHE_HOME/edgeaccel, else ~/.cache/edgeaccel."""
    if override:
        return Path(override)
    if os.environ.get("EDGEACCEL_CACHE_DIR"):
        return Path(os.environ["EDGEACCEL_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "edgeaccel"


def hardware_fingerprint(devices: Iterable[str] = ()) -> str:
    """CPU model, core count, architecture and the devices present: what measurements depend on."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    parts = [platform.machine(), model or platform.processor(), str(os.cpu_count()), ",".join(sorted(devices))]
    return "|".join(parts)


def inputs_digest(inputs) -> str | None:
    """A digest of the caller's calibration inputs (dtype, shape and bytes of every array); None for none."""
    if not inputs:
        return None
    import numpy as np

    h = blake2b(b"calibration-inputs", digest_size=16)
    for sample in inputs:
        for array in (sample.values() if isinstance(sample, Mapping) else sample):
            a = np.ascontiguousarray(array)
            h.update(f"{a.dtype}{a.shape}".encode())
            h.update(a.tobytes() if a.dtype != object else repr(a.tolist()).encode())
    return h.hexdigest()


DEFAULT_MAX_BYTES = 1 << 30  # compiled models kept at most; $EDGEACCEL_CACHE_MAX_MB overrides


COMPILED_FOLDERS = ("openvino", "onnxruntime", "tensorrt")


def compiled_dir(root: str | os.PathLike, runtime: str) -> Path:
    """Where a runtime keeps its compiled/optimized models (made on demand)."""
    folder = Path(root) / runtime
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def max_bytes() -> int:
    try:
        return int(float(os.environ["EDGEACCEL_CACHE_MAX_MB"]) * (1 << 20))
    except (KeyError, ValueError):
        return DEFAULT_MAX_BYTES


def trim(root: str | os.PathLike, limit: int | None = None) -> int:
    """Delete the least recently used compiled-model files until the folders fit ``limit``; bytes freed."""
    limit = max_bytes() if limit is None else limit
    files = []
    for name in COMPILED_FOLDERS:
        folder = Path(root) / name
        if folder.is_dir():
            for path in folder.rglob("*"):
                try:
                    if path.is_file():
                        st = path.stat()
                        files.append((max(st.st_atime, st.st_mtime), st.st_size, path))
                except OSError:
                    continue
    total = sum(size for _, size, _ in files)
    freed = 0
    for _, size, path in sorted(files):
        if total - freed <= limit:
            break
        try:
            path.unlink()
            freed += size
        except OSError:
            continue
    return freed


# What lives in the cache folder, by sub-folder, for `edgeaccel cache info` and `edgeaccel cache clear`.
CACHE_PARTS = {
    "calibration": "measurements from `edgeaccel tune` / calibrate=True: they change which executor is chosen",
    "openvino": "OpenVINO's compiled models (faster loads)",
    "onnxruntime": "ONNX Runtime's optimized graphs and TensorRT engines (faster loads)",
    "tensorrt": "engines TensorRT built from ONNX models, by model, GPU, TensorRT version and options (faster loads)",
    "validated": "descriptions of model files that passed validation, by content hash (faster loads)",
    "profiles": "the device profiles as parsed from their YAML, by content hash (lighter start-up)",
}


def usage(root: str | os.PathLike) -> dict[str, dict]:
    """Files and bytes in each part of the cache folder at ``root`` (parts that are absent count 0)."""
    out = {}
    for name in CACHE_PARTS:
        files = size = 0
        folder = Path(root) / name
        if folder.is_dir():
            for path in folder.rglob("*"):
                try:
                    if path.is_file():
                        files += 1
                        size += path.stat().st_size
                except OSError:
                    continue
        out[name] = {"files": files, "bytes": size}
    return out


def clear(root: str | os.PathLike, parts: Iterable[str] | None = None) -> int:
    """Delete the named parts of the cache folder (default: all of them); bytes freed. Only edgeaccel's own
    sub-folders are touched, so a cache_dir pointing somewhere shared loses nothing else."""
    import shutil

    parts = list(parts or CACHE_PARTS)
    unknown = [name for name in parts if name not in CACHE_PARTS]
    if unknown:
        raise ValueError(f"unknown cache part {unknown[0]!r}; known: {', '.join(CACHE_PARTS)}")
    sizes = usage(root)
    for name in parts:
        shutil.rmtree(Path(root) / name, ignore_errors=True)
    return sum(sizes[name]["bytes"] for name in parts)
