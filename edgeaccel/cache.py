"""edgeaccel's cache folder and the calibration cache kept in it.

Calibration results are keyed by the artifacts' content hashes, this machine's hardware fingerprint, the
installed runtime versions and edgeaccel's version, so a load on the same machine chooses from measurements
without measuring again, and any change to what was measured invalidates them.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import platform
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from pathlib import Path

from .digest import blake2b, short
from .modelinfo import Format, ModelInfo
from .selector import Measurement

log = logging.getLogger("edgeaccel.cache")
CALIBRATION_SCHEMA = "edgeaccel.calibration/1"


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


def calibration_key(artifact_hashes: Iterable[str], fingerprint: str, versions: Mapping[str, str | None],
                    threads: int, goal_independent: str = "", *, options=None, executor: str | None = None,
                    device: str | None = None, tolerance: float | None = None) -> str:
    """Everything that changes what calibration measures: the artifacts, the hardware, the runtimes' and
    edgeaccel's versions, the threads, the executor options (precision asked, performance hint, runtime
    options), what was pinned (a pinned device measures other candidates) and the accuracy tolerance. The
    samples it ran on are recorded with the measurements (``inputs_digest``), not keyed: a later load cannot
    know them, and a `tune` on real samples must serve the plain loads after it."""
    from ._version import __version__

    payload = {"artifacts": sorted(artifact_hashes), "hardware": fingerprint,
               "runtimes": dict(sorted(versions.items())), "edgeaccel": __version__,
               "threads": threads, "extra": goal_independent, "executor": executor, "device": device,
               "tolerance": tolerance}
    if options is not None:
        payload.update(precision=options.precision, performance_hint=options.performance_hint,
                       runtime_options=_jsonable(options.runtime_options))
        if getattr(options, "gpu_mem_limit_mb", None) is not None:  # only when set: earlier keys stay valid
            payload["gpu_mem_limit_mb"] = options.gpu_mem_limit_mb
    return short(json.dumps(payload, sort_keys=True, default=repr), 32)


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


def _jsonable(value):
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)


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


@functools.lru_cache(maxsize=1)
def validation_rules_key() -> str:
    """A key for the checks of this edgeaccel: the hash of the format readers' sources. A memo made under
    other rules is not trusted: a rule added because a model crashed a runtime must see that model again
    after an upgrade, not a memo saying it passed."""
    from . import formats
    from ._version import __version__

    h = blake2b(__version__.encode(), digest_size=8)
    for source in sorted(Path(formats.__file__).parent.glob("*.py")):
        try:
            h.update(source.name.encode() + source.read_bytes())
        except OSError:
            h.update(source.name.encode())
    return h.hexdigest()


class ValidationMemo:
    """formats.ValidationMemo as JSON descriptions named by content hash under
    <cache>/validated/<validation_rules_key()>.

    A description is reused only for the same bytes, found at any path, checked by the same rules; what lives
    beside the model file is checked again: an OpenVINO IR's .bin must still have the size the checks saw, and
    an ONNX model with external data is never remembered (its data files are outside the hash)."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.folder = Path(root) / "validated" / validation_rules_key()

    def recall(self, digest: str, path: Path) -> ModelInfo | None:
        try:
            data = json.loads((self.folder / f"{digest}.json").read_text())
            info = ModelInfo.from_dict(data)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError, KeyError) as exc:  # damaged: validate again
            log.debug("ignoring the damaged validation memo %s: %s", digest, exc)
            return None
        extra = []
        for old in info.extra_files:
            beside = path.with_name(Path(old).name)
            try:
                if beside.stat().st_size != info.details.get("extra_sizes", {}).get(Path(old).name):
                    return None
            except OSError:
                return None
            extra.append(beside)
        return dataclasses.replace(info, path=path, extra_files=tuple(extra))

    def remember(self, info: ModelInfo) -> None:
        if info.format is Format.ONNX and info.extra_files:
            return
        sizes = {}
        for extra in info.extra_files:
            try:
                sizes[extra.name] = extra.stat().st_size
            except OSError:
                return
        data = info.to_dict()
        data["details"] = {**data["details"], "extra_sizes": sizes}
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            target = self.folder / f"{info.digest}.json"
            tmp = target.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(data))
            os.replace(tmp, target)
        except (OSError, TypeError, ValueError) as exc:  # a read-only cache only costs validating next time
            log.debug("cannot remember %s in %s: %s", info.path, self.folder, exc)


class CalibrationCache:
    def __init__(self, root: str | os.PathLike) -> None:
        self.folder = Path(root) / "calibration"

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def get(self, key: str) -> dict[str, Measurement] | None:
        path = self.path(key)
        try:
            data = json.loads(path.read_text())
            if data.get("schema") != CALIBRATION_SCHEMA:
                return None
            return {m["key"]: Measurement(**m) for m in data["measurements"]}
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError, KeyError) as exc:  # a damaged cache entry is re-measured
            log.warning("ignoring damaged calibration cache %s: %s", path, exc)
            return None

    def put(self, key: str, measurements: Mapping[str, Measurement], about: Mapping) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.path(key)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({"schema": CALIBRATION_SCHEMA, "about": dict(about),
                                   "measurements": [asdict(m) for m in measurements.values()]}, indent=1))
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the new one
        return path


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


def calibration_entries(root: str | os.PathLike) -> list[dict]:
    """Each kept calibration: its file, the artifacts measured, when, and which candidates were eligible."""
    entries = []
    for path in sorted((Path(root) / "calibration").glob("*.json")):
        try:
            data = json.loads(path.read_text())
            about = data.get("about", {})
            measured = data.get("measurements", [])
            entries.append({"file": str(path), "artifacts": about.get("artifacts", []),
                            "measured_at": about.get("measured_at"),
                            "eligible": [m["key"].split("/", 1)[-1] for m in measured if m.get("eligible")],
                            "refused": {m["key"].split("/", 1)[-1]: m.get("reason") for m in measured
                                        if not m.get("eligible")}})
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            entries.append({"file": str(path), "error": f"unreadable: {exc}"})
    return entries


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
