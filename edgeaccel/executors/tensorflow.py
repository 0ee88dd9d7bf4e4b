"""TensorFlow for SavedModel folders (the ``tensorflow`` extra): CPU, an NVIDIA GPU, or a Cloud TPU.

A SavedModel is a program, not only weights: loading one runs its graph's ops (file reads included). Load
SavedModels that arrive from elsewhere with ``isolate=True``.

The TPU path follows TensorFlow's documented Cloud TPU VM recipe (TPUClusterResolver(tpu="local"),
connect_to_cluster, initialize_tpu_system, TPUStrategy). It is not verified on TPU hardware here: the README
lists it as unverified.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence

import numpy as np

from ..errors import DeviceUnavailableError, InferenceError, ModelLoadError, runtime_message
from ..modelinfo import Format, ModelInfo, TensorSpec
from .. import packages
from .base import Availability, Executor, ExecutorInfo, ExecutorOptions

DEFAULT_SIGNATURE = "serving_default"
_tpu_lock = threading.Lock()


@functools.lru_cache(maxsize=1)
def _tf():
    import tensorflow as tf

    return tf


class TensorFlowExecutor(Executor):
    runtime = "tensorflow"
    formats = frozenset({Format.SAVEDMODEL})
    devices = ("CPU", "GPU", "TPU")
    distributions = packages.TENSORFLOW

    @classmethod
    def availability(cls, device: str | None = None) -> Availability:
        version = cls.installed()
        if version is None:
            return Availability(False, "tensorflow is not installed", fix="pip install 'edgeaccel[tensorflow]'")
        kind = (device or "CPU").split(":")[0]
        if kind == "CPU":
            return Availability(True, "TensorFlow on the CPU", version=version)
        if kind == "TPU":
            # The probe's PCI survey first: on anything but a TPU VM, initializing TensorFlow's TPU system
            # costs seconds only to fail.
            from ..probe.tpu import read_tpu

            chips = read_tpu().accelerators
            if not chips:
                return Availability(False, "not a Cloud TPU VM: no Google TPU chip (PCI vendor 0x1ae0) on this "
                                    "machine", fix="run on a Cloud TPU VM", version=version)
            if not any(chip.usable for chip in chips):
                return Availability(False, chips[0].reason, fix=chips[0].fix, version=version)
        try:
            tf = _tf()
        except Exception as exc:
            return Availability(False, f"tensorflow failed to import: {runtime_message(exc)}", version=version)
        if kind == "GPU":
            gpus = tf.config.list_physical_devices("GPU")
            if not gpus:
                return Availability(False, "TensorFlow sees no GPU (a CPU-only build, or no CUDA driver)",
                                    fix="install the tensorflow[and-cuda] build on a machine with an NVIDIA GPU",
                                    version=version)
            return Availability(True, f"{len(gpus)} GPU(s)", version=version)
        if kind == "TPU":
            try:
                _tpu_strategy()
            except Exception as exc:
                return Availability(False, f"no Cloud TPU reachable: {runtime_message(exc).splitlines()[0]}",
                                    fix="run on a Cloud TPU VM with libtpu installed (pip install 'tensorflow[and-tpu]'"
                                        " or the libtpu the TPU VM image ships)", version=version)
            return Availability(True, "Cloud TPU (TPUStrategy)", version=version)
        return Availability(False, f"TensorFlow has no device {device!r}")

    def __init__(self, model: ModelInfo, device: str, options: ExecutorOptions) -> None:
        super().__init__(model, device, options)
        tf = _tf()
        self._kind = device.split(":")[0]
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
            raise ModelLoadError(f"TensorFlow failed to load the SavedModel {model.path}: {runtime_message(exc)}",
                                 runtime=self.runtime, hint="check that the folder is a complete SavedModel") from exc
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
        index = self.device.split(":")[1] if ":" in self.device else "0"
        return f"/{self._kind}:{index}"

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
        feed = {name: tf.constant(array) for name, array in zip(self._input_names, inputs)}
        try:
            if self._strategy is not None:
                result = self._strategy.run(self._fn, kwargs=feed)
                result = {k: self._strategy.experimental_local_results(v)[0] for k, v in result.items()}
            else:
                with tf.device(self._tf_device()):
                    result = self._fn(**feed)
            return [result[name].numpy() for name in self._output_names]
        except Exception as exc:
            raise InferenceError(f"TensorFlow failed to run the SavedModel: {runtime_message(exc)}",
                                 runtime=self.runtime) from exc

    def close(self) -> None:
        self.stop_workers()
        self._fn = None
        self._loaded = None


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
