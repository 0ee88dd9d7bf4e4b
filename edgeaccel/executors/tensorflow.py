"""TensorFlow for SavedModel folders (the ``tensorflow`` extra): CPU, an NVIDIA GPU, or a Cloud TPU.

A SavedModel is a program, not only weights: loading one runs its graph's ops (file reads included). Load
SavedModels that arrive from elsewhere with ``isolate=True``.

Devices: ``CPU``; ``CUDA`` (``CUDA:N``; ``GPU`` is accepted for it) as TensorFlow's ``/GPU:N``; ``TPU``.
Availability asks the probe for the hardware first and imports TensorFlow only when it is there: importing
it costs seconds, and initializing its TPU system on a machine without one costs more only to fail.

The TPU path follows TensorFlow's documented Cloud TPU VM recipe (TPUClusterResolver(tpu="local"),
connect_to_cluster, initialize_tpu_system, TPUStrategy). It is not verified on TPU hardware here: the README
lists it as unverified.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import DeviceUnavailableError, InferenceError, ModelLoadError, runtime_message
from ..modelinfo import Format, ModelInfo, TensorSpec
from .. import packages
from .base import Availability, Executor, ExecutorInfo, ExecutorOptions
from .device import DeviceRef, base_of
from .facts import DeviceSpec
from .translate import ErrorRule, translate

DEFAULT_SIGNATURE = "serving_default"
_tpu_lock = threading.Lock()


@functools.lru_cache(maxsize=1)
def _tf():
    import tensorflow as tf

    return tf


ERROR_RULES = (
    ErrorRule(ModelLoadError, hint="check that the folder is a complete SavedModel",
              message=lambda f: f"TensorFlow failed to load the SavedModel {f.model.path if f.model else ''}: "
                                f"{f.message}"),
    ErrorRule(InferenceError, stages=("run",), message="TensorFlow failed to run the SavedModel: {message}"),
)


class TensorFlowExecutor(Executor):
    """TensorFlow for SavedModel folders: the only runtime here that reads them."""

    runtime = "tensorflow"
    # what the runtime reads in an isolated worker (edgeaccel.isolation.environment)
    worker_environment = ("CUDA_*", "NVIDIA_*", "TF_*")
    label = "TensorFlow"
    formats = frozenset({Format.SAVEDMODEL})
    device_specs = (
        DeviceSpec("CPU", "cpu", via="tf.saved_model.load under tf.device('/CPU:0'), the serving_default signature"),
        # CUDA:N is TensorFlow's /GPU:N (the probe names NVIDIA GPUs CUDA; the executor accepts GPU for it too)
        DeviceSpec("CUDA", "gpu", device_name="/GPU:0", packages=("tensorflow[and-cuda]",),
                     requires="an NVIDIA driver; the CUDA libraries come with tensorflow[and-cuda]"),
        DeviceSpec("TPU", "tpu", packages=("tensorflow-tpu",), requires="a Cloud TPU VM (libtpu)",
                     via="TPUClusterResolver(tpu='local') + TPUStrategy on a Cloud TPU VM (unverified here: no TPU)"),
    )
    distributions = packages.TENSORFLOW
    extra = "tensorflow"
    preference = 30
    presence = "probe"
    error_rules = ERROR_RULES

    @classmethod
    def availability(cls, device: str | None = None, *, root: str | Path = Path("/"),
                     identity=None) -> Availability:
        """``root``/``identity``: where the GPU/TPU hardware is looked for (tests: fake device trees). For a
        root other than "/" only the hardware is judged: TensorFlow talks to this machine's devices."""
        version = cls.installed()
        if version is None:
            return Availability(False, "tensorflow is not installed", fix="pip install 'edgeaccel[tensorflow]'")
        kind = _kind(device or "CPU")
        if kind == "CPU":
            return Availability(True, "TensorFlow on the CPU", version=version)
        if kind not in ("CUDA", "TPU"):
            return Availability(False, f"TensorFlow drives CPU, CUDA (GPU) and TPU, not {device!r}", version=version)
        hardware = tpu_hardware(root, identity) if kind == "TPU" else cuda_hardware(root, identity)
        if not hardware.ok:
            return Availability(False, hardware.reason, fix=hardware.fix, version=version)
        if not _is_real_root(root):
            return Availability(True, f"{hardware.reason} below {root} (TensorFlow itself is checked only on this "
                                "machine's own root)", version=version)
        try:
            tf = _tf()
        except Exception as exc:
            return Availability(False, f"tensorflow failed to import: {runtime_message(exc)}", version=version)
        if kind == "CUDA":
            gpus = tf.config.list_physical_devices("GPU")
            if not gpus:
                return Availability(False, f"{hardware.reason}, but TensorFlow sees no GPU (a CPU-only build such as "
                                    "tensorflow-cpu, or CUDA libraries it cannot load)",
                                    fix="pip install 'tensorflow[and-cuda]' (Linux) in place of tensorflow-cpu",
                                    version=version)
            return Availability(True, f"{len(gpus)} GPU(s) visible to TensorFlow", version=version)
        try:
            _tpu_strategy()
        except Exception as exc:
            return Availability(False, f"{hardware.reason}, but TensorFlow reaches no TPU: "
                                f"{runtime_message(exc).splitlines()[0]}",
                                fix="install TensorFlow's TPU build with libtpu (pip install tensorflow-tpu, or the "
                                    "libtpu the TPU VM image ships); only one process may hold the TPU",
                                version=version)
        return Availability(True, f"{hardware.reason}; TPUStrategy initialized", version=version)

    def __init__(self, model: ModelInfo, device: str, options: ExecutorOptions) -> None:
        super().__init__(model, device, options)
        tf = _tf()
        self._kind = _kind(device)
        self._strategy = None
        signature = options.runtime_options.get("signature", DEFAULT_SIGNATURE)
        try:
            if self._kind == "TPU":
                self._strategy = _tpu_strategy()
                with self._strategy.scope():
                    self._loaded = tf.saved_model.load(str(model.path))
            else:
                with tf.device(self._tf_device()):
                    self._loaded = tf.saved_model.load(str(model.path))
            signatures = dict(self._loaded.signatures)
        except Exception as exc:
            raise translate(type(self), exc, "load", model, device) from exc
        if signature not in signatures:
            raise ModelLoadError(
                f"the SavedModel has no signature {signature!r} (it has {sorted(signatures) or 'none'})",
                runtime=self.runtime, hint="pass runtime_options={'signature': NAME}")
        self._fn = signatures[signature]
        _, kwargs = self._fn.structured_input_signature
        self._input_names = list(kwargs)
        self._inputs = tuple(_spec(name, s) for name, s in kwargs.items())
        outputs = self._fn.structured_outputs
        self._output_names = list(outputs)
        self._outputs = tuple(_spec(name, s) for name, s in outputs.items())
        self._signature = signature

    def _tf_device(self) -> str:
        index = DeviceRef.parse(self.device).index or 0
        return f"/{'GPU' if self._kind == 'CUDA' else self._kind}:{index}"

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self._inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self._outputs

    @property
    def info(self) -> ExecutorInfo:
        return ExecutorInfo(self.runtime, self.installed() or "?", self.device, self.options.precision or "f32",
                            details={"signature": self._signature})

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        tf = _tf()
        try:  # tf.constant refuses what it cannot hold (objects) with a ValueError: translated as well
            feed = {name: tf.constant(array) for name, array in zip(self._input_names, inputs, strict=True)}
            if self._strategy is not None:
                result = self._strategy.run(self._fn, kwargs=feed)
                result = {k: self._strategy.experimental_local_results(v)[0] for k, v in result.items()}
            else:
                with tf.device(self._tf_device()):
                    result = self._fn(**feed)
            return [result[name].numpy() for name in self._output_names]
        except Exception as exc:
            raise translate(type(self), exc, "run", self.model, self.device) from exc

    def close(self) -> None:
        self.stop_workers()
        self._fn = None
        self._loaded = None


def _kind(device: str) -> str:
    base = base_of(device)
    return "CUDA" if base == "GPU" else base  # "GPU" was this executor's name for CUDA before the probe's names


def _is_real_root(root) -> bool:
    import os

    return os.path.realpath(root) == os.path.realpath("/")


def tpu_hardware(root: str | Path = Path("/"), identity=None) -> Availability:
    """Cloud TPU chips below ``root`` from the probe's PCI reader (no TensorFlow import)."""
    from ..devfs import as_tree
    from ..hardware.access import Access
    from ..hardware.tpu import read_tpu

    tree = as_tree(root)
    chips = read_tpu(tree, Access(tree, identity)).accelerators
    if not chips:
        where = "this machine" if tree.is_real else str(tree.root)
        return Availability(False, f"not a Cloud TPU VM: no Google TPU chip (PCI vendor 0x1ae0 with a TPU device id) "
                                   f"on {where}", fix="run on a Cloud TPU VM")
    usable = [c for c in chips if c.usable]
    if not usable:
        return Availability(False, f"{chips[0].name}: {chips[0].reason}", fix=chips[0].fix)
    kinds = sorted({c.details.get("chip") for c in usable})
    return Availability(True, f"{len(usable)} Cloud TPU {'/'.join(kinds)} chip(s) usable")


def cuda_hardware(root: str | Path = Path("/"), identity=None) -> Availability:
    """An NVIDIA GPU (or a Jetson's) below ``root`` from the probe (no TensorFlow import)."""
    from ..hardware import survey_device as probe

    report = probe(root, runtimes=False, identity=identity)
    gpus = [a for a in report.accelerators if "CUDA" in a.devices]
    if not gpus:
        return Availability(False, "no NVIDIA GPU with its driver on this machine (no PCI display device of vendor "
                                   "0x10de bound to nvidia, no /proc/driver/nvidia/gpus, not a Jetson)",
                            fix="run on a machine with an NVIDIA GPU and its driver")
    usable = [g for g in gpus if g.usable]
    if not usable:
        return Availability(False, f"{gpus[0].name}: {gpus[0].reason}", fix=gpus[0].fix)
    return Availability(True, f"{usable[0].name} usable")


def _spec(name: str, tf_spec) -> TensorSpec:
    shape = tuple(None if d is None else int(d) for d in tf_spec.shape)
    return TensorSpec(name, shape, np.dtype(tf_spec.dtype.as_numpy_dtype))


def _tpu_strategy():
    """TensorFlow's Cloud TPU VM recipe; one TPU system per process."""
    with _tpu_lock:
        return _tpu_strategy_once()


@functools.lru_cache(maxsize=1)
def _tpu_strategy_once():
    tf = _tf()
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    except (ValueError, RuntimeError) as exc:
        raise DeviceUnavailableError(f"no Cloud TPU: {runtime_message(exc)}") from exc
