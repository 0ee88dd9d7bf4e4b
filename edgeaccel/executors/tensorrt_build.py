"""The parts of the TensorRT executor that are facts and decisions, not GPU work: which TensorRT is installed,
whether an engine's header says it can run here, the build options and the cache key of an engine built from
ONNX, the ONNX twin beside an engine, and what TensorRT's errors mean. Nothing here imports TensorRT or CUDA
(``build_engine`` and ``cuda_runtime`` do, when called), so all of it is tested on any machine.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import packages
from ..digest import short
from ..errors import ConfigError
from ..formats.tensorrt import REBUILD_HINT, UNKNOWN

# runtime_options["tensorrt"] keys: what changes the engine TensorRT builds (part of the cache key), and what
# only changes how an engine is used
BUILD_KEYS = ("workspace_bytes", "shapes", "builder_optimization_level", "int8_calibration", "dla_core")
USE_KEYS = ("version_compatible",)
TWIN_SUFFIXES = ("_fp16", "_f16", "_fp32", "_f32", "_int8", "_float")
_VERSION_TEXT = re.compile(r"""^__version__\s*=\s*["']([0-9][^"']*)["']""", re.M)
# TensorRT's words when an engine meets another GPU ("The engine plan file is generated on an incompatible
# device, expecting compute 8.6 got compute 8.7, please rebuild.") or another version ("Version tag does not
# match. Note: Current Version: 213, Serialized Engine Version: 205")
_COMPUTE = re.compile(r"expecting compute (\d+\.\d+) got compute (\d+\.\d+)")


def tensorrt_version() -> str | None:
    """The installed TensorRT's version without importing it: the wheel's metadata, else (JetPack installs
    python3-libnvinfer with apt, no dist-info) the ``__version__`` line of the module's own __init__.py."""
    version = packages.installed_version(packages.TENSORRT)
    if version is not None:
        return version
    import importlib.util

    try:
        spec = importlib.util.find_spec("tensorrt")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    try:
        text = Path(spec.origin).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    m = _VERSION_TEXT.search(text)
    return m.group(1) if m else "unknown"


def cuda_binding() -> str | None:
    """The distribution that provides a CUDA runtime binding (cuda-bindings / cuda-python); None without one."""
    return packages.installed(packages.CUDA_BINDINGS)[0]


def same_release(built: str, here: str) -> bool:
    """Whether an engine serialized by TensorRT ``built`` deserializes on ``here``: the same major.minor.patch
    (the build number may differ; NVIDIA's developer guide binds an engine to the TensorRT version)."""
    return built.split(".")[:3] == here.split(".")[:3]


def version_refusal(name: str, built: str | None, here: str | None, version_compatible: bool = False) -> str | None:
    """Why the engine ``name`` cannot run on the installed TensorRT, from its header alone; None when it may
    (or when either version is unknown: then TensorRT itself decides, and says why)."""
    if version_compatible or not built or built == UNKNOWN or not here or here == UNKNOWN:
        return None
    if same_release(built, here):
        return None
    return (f"{name} was built by TensorRT {built}, and this machine has TensorRT {here}: an engine runs only on the "
            "TensorRT version that built it (its header says so; it was not deserialized)")


def gpu_refusal(name: str, messages: list[str], gpu: str | None = None) -> str | None:
    """The reason an engine was built for another GPU, from TensorRT's deserialization error; None otherwise."""
    for message in messages:
        m = _COMPUTE.search(message)
        if m:
            here = f" ({gpu})" if gpu else ""
            return (f"{name} was built for a GPU of compute capability {m.group(1)}, and this GPU{here} is compute "
                    f"capability {m.group(2)}: an engine runs only on the GPU architecture it was built for")
    return None


def onnx_twin(engine: Path) -> Path | None:
    """The ONNX model beside an engine that it was most likely built from: the same name (m.engine, m.onnx), or
    the name without a precision suffix (m_fp16.engine, m.onnx; edgeaccel convert's m_f16.engine, m_float.onnx)."""
    stem = engine.stem
    names = [stem]
    for suffix in TWIN_SUFFIXES:
        if stem.endswith(suffix):
            names.append(stem[: -len(suffix)])
    names += [f"{n}_float" for n in list(names)]
    for n in dict.fromkeys(names):
        candidate = engine.with_name(f"{n}.onnx")
        if candidate != engine and candidate.is_file():
            return candidate
    return None


def twin_fix(engine: Path) -> str:
    """What to do instead of running an engine here: its ONNX twin, or the model it came from."""
    twin = onnx_twin(engine)
    if twin is not None:
        return (f"load its ONNX twin {twin.name} with it (edgeaccel.load([{engine.name!r}, {twin.name!r}]) or the "
                "folder): the twin takes over wherever the engine cannot run, and says so in model.fallbacks")
    return REBUILD_HINT


@dataclass(frozen=True)
class BuildOptions:
    """runtime_options["tensorrt"], checked: what a build from ONNX depends on, and how an engine is used."""

    precision: str | None = None
    workspace_bytes: int | None = None
    shapes: dict = field(default_factory=dict)  # input name -> (min, opt, max) shapes of a dynamic input
    builder_optimization_level: int | None = None
    int8_calibration: tuple = ()  # samples (each a list of arrays in input order) for int8 without QDQ
    version_compatible: bool = False  # the engine was built with kVERSION_COMPATIBLE: skip the header check
    dla_core: int | None = None

    @classmethod
    def from_runtime_options(cls, runtime_options: dict, precision: str | None = None) -> BuildOptions:
        given = dict(runtime_options.get("tensorrt", {}) or {})
        unknown = sorted(set(given) - set(BUILD_KEYS) - set(USE_KEYS))
        if unknown:
            raise ConfigError(f"unknown TensorRT option {unknown[0]!r}", key="runtime_options.tensorrt",
                              hint=f"known: {', '.join(BUILD_KEYS + USE_KEYS)}")
        shapes = {}
        for name, triple in (given.get("shapes") or {}).items():
            if not (isinstance(triple, (list, tuple)) and len(triple) == 3):
                raise ConfigError(f"shapes[{name!r}] must be (min, opt, max) shapes", key="runtime_options.tensorrt")
            shapes[str(name)] = tuple(tuple(int(d) for d in s) for s in triple)
        calibration = tuple(given.get("int8_calibration") or ())
        return cls(precision, given.get("workspace_bytes"), shapes, given.get("builder_optimization_level"),
                   calibration, bool(given.get("version_compatible", False)), given.get("dla_core"))

    def key_parts(self) -> dict:
        """What goes into the cache key: every option that changes the engine TensorRT builds."""
        from ..cachedir import inputs_digest

        return {"precision": self.precision, "workspace_bytes": self.workspace_bytes,
                "shapes": {k: [list(s) for s in v] for k, v in sorted(self.shapes.items())},
                "builder_optimization_level": self.builder_optimization_level,
                "int8_calibration": inputs_digest(list(self.int8_calibration)), "dla_core": self.dla_core}


def engine_cache_key(model_digest: str, gpu_name: str, compute_capability: str, tensorrt: str,
                     options: BuildOptions) -> str:
    """The name of a built engine in the cache: the ONNX model's content, the GPU (name and compute capability),
    the TensorRT version and the build options. Any of them changing builds again."""
    payload = {"model": model_digest, "gpu": gpu_name, "compute_capability": compute_capability,
               "tensorrt": tensorrt, "options": options.key_parts()}
    return short(json.dumps(payload, sort_keys=True), 32)


def cached_engine_paths(folder: Path, key: str) -> tuple[Path, Path]:
    """(engine, facts) files of one cached build: the plan, and a JSON of what it was built for and how long."""
    return folder / f"{key}.engine", folder / f"{key}.json"


def int8_refusal(quantized: bool, options: BuildOptions) -> str | None:
    if quantized or options.int8_calibration:
        return None
    return ("TensorRT int8 needs a QDQ-quantized model (edgeaccel convert --to onnx-int8) or calibration samples "
            "(RuntimeOptions(native={'tensorrt': {'int8_calibration': [...]}}))")


def cuda_runtime():
    """The CUDA runtime API of cuda-python: ``cuda.bindings.runtime`` (12.6+), else the older ``cuda.cudart``."""
    try:
        from cuda.bindings import runtime  # type: ignore[import-not-found]

        return runtime
    except ImportError:
        from cuda import cudart  # type: ignore[import-not-found]

        return cudart
