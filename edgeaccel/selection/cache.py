"""The calibration cache kept in edgeaccel's cache folder (the folder itself: ``edgeaccel.cachedir``).

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
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from pathlib import Path

from ..digest import blake2b, short
from ..modelinfo import Format, ModelInfo
from .selector import Measurement

log = logging.getLogger("edgeaccel.cache")
CALIBRATION_SCHEMA = "edgeaccel.calibration/1"


def calibration_key(artifact_hashes: Iterable[str], fingerprint: str, versions: Mapping[str, str | None],
                    threads: int, goal_independent: str = "", *, options=None, executor: str | None = None,
                    device: str | None = None, tolerance: float | None = None) -> str:
    """Everything that changes what calibration measures: the artifacts, the hardware, the runtimes' and
    edgeaccel's versions, the threads, the executor options (precision asked, performance hint, runtime
    options), what was pinned (a pinned device measures other candidates) and the accuracy tolerance. The
    samples it ran on are recorded with the measurements (``inputs_digest``), not keyed: a later load cannot
    know them, and a `tune` on real samples must serve the plain loads after it."""
    from .._version import __version__

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


def _jsonable(value):
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)


@functools.lru_cache(maxsize=1)
def validation_rules_key() -> str:
    """A key for the checks of this edgeaccel: the hash of the format readers' sources. A memo made under
    other rules is not trusted: a rule added because a model crashed a runtime must see that model again
    after an upgrade, not a memo saying it passed."""
    from .. import formats
    from .._version import __version__

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

    A description is reused only for the same bytes, found at any path, checked by the same rules: the hash covers
    an OpenVINO IR's .bin too (formats.with_companions), whose size is checked again; an ONNX model with external
    data is never remembered (its data files are named inside it, known only once it is read)."""

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
            # an IR's weights are named after its .xml (the digest covered the one beside this path); ONNX
            # external data keeps the names the model gives it
            beside = path.with_suffix(".bin") if info.format is Format.OPENVINO_IR else path.with_name(Path(old).name)
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


