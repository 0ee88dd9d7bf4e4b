"""Every device string maps to a thermal/power domain and its sensors, or says it has none. TensorRT:0 and QNN
used to map to domains no sensor reader knew, and ran unthrottled without a word."""

from __future__ import annotations

import numpy as np
import pytest

from edgeaccel.executors.base import Availability, Executor, ExecutorInfo
from edgeaccel.executors.facts import DeviceSpec
from edgeaccel.executors.registry import runtimes
from edgeaccel.loader import open_candidate, select
from edgeaccel.modelinfo import Format
from edgeaccel.profiles.types import DEVICE_NAMES
from edgeaccel.scheduling.devices import KINDS, base_name, place, place_device, sensors_for
from edgeaccel.scheduling.model import ScheduledModel
from edgeaccel.testing import rk3588_board, x86_server_with_cuda_gpu

from conftest import SAMPLES


@pytest.mark.parametrize("device, kind", [
    ("CPU", "cpu"), ("GPU", "gpu"), ("GPU.1", "gpu"), ("CUDA:0", "gpu"), ("TensorRT:0", "gpu"), ("NPU", "npu"),
    ("QNN", "npu"), ("RKNPU", "npu"), ("Hailo", "npu"), ("EdgeTPU", "edgetpu"), ("EdgeTPU:usb:0", "edgetpu"),
    ("EdgeTPU:pci:1", "edgetpu"), ("TPU", "tpu"), ("AUTO", "auto"), ("DSP", "dsp"),
])
def test_device_strings_map_to_their_kind(device, kind):
    placed = place_device(device)
    assert (placed.kind, placed.domain) == (kind, kind) and placed.found_by == "edgeaccel's device names"


def test_an_executor_class_says_what_its_devices_are():
    placed = place_device("Hailo8:0", {"Hailo8": "npu"}, "HailoExecutor")
    assert (placed.kind, placed.domain, placed.found_by) == ("npu", "npu", "device_kinds of HailoExecutor")
    # the class is asked first: a plug-in may call its own device what edgeaccel calls something else
    assert place_device("GPU", {"GPU": "dsp"}, "Vendor").kind == "dsp"
    unknown = place_device("Frobnicator:2")
    assert (unknown.kind, unknown.domain, unknown.found_by) == ("unknown", "frobnicator", "unknown")
    assert base_name("EdgeTPU:usb:0") == "EdgeTPU" and base_name("GPU.1") == "GPU"


def test_every_device_edgeaccel_names_has_a_kind_that_agrees_with_its_descriptor():
    described = {(t.name, t.kind) for cls in runtimes().values() for t in cls.targets}
    for name, kind in described:
        assert place_device(name).kind == kind, f"{name}: its executor class says {kind}"
    for name in DEVICE_NAMES:
        assert place_device(name).kind in KINDS - {"auto"}, name


def test_devices_without_sensors_say_so(tmp_path):
    x86_server_with_cuda_gpu(tmp_path)  # a CPU zone, no GPU zone, no NVML below a fake root
    devices = [place_device("CPU"), place_device("TensorRT:0"), place_device("CUDA:0"),
               place_device("Hailo8", {"Hailo8": "npu"}, "HailoExecutor"), place_device("Frob:1")]
    specs = sensors_for(sorted({p.domain for p in devices}), tmp_path, None, devices)
    assert specs["cpu"].temperature == "thermal:x86_pkg_temp"
    assert specs["gpu"].temperature is None
    assert specs["gpu"].note_for("temperature").startswith("no sensor for TensorRT:0, CUDA:0: no temperature")
    assert "no sensor for Hailo8: no temperature" in specs["npu"].note_for("temperature")
    assert "declare it in device_specs" in specs["frob"].note_for("temperature")


def test_an_npu_with_a_zone_of_its_own_is_read(tmp_path):
    rk3588_board(tmp_path)
    placed = [place_device("RKNPU")]
    spec = sensors_for(["npu"], tmp_path, None, placed)["npu"]
    assert spec.temperature == "thermal:npu-thermal"
    assert spec.note_for("energy").startswith("no sensor for RKNPU: no energy source")


class Relabelled(Executor):
    """A real executor that reports another device (as a TensorRT or Hailo executor would)."""

    runtime = "relabelled"
    formats = frozenset(Format)
    device_specs = (DeviceSpec("Hailo8", "npu"),)

    def __init__(self, inner: Executor, device: str) -> None:
        super().__init__(inner.model, device, inner.options)
        self.inner = inner

    @classmethod
    def availability(cls, device=None):
        return Availability(True, "test")

    @property
    def info(self):
        return ExecutorInfo(self.runtime, "test", self.device, "f32", 1)

    def run(self, inputs):
        return self.inner.run(inputs)

    def close(self):
        self.inner.close()


def test_a_scheduled_model_reports_no_sensor_for_tensorrt_and_hailo_in_trace_and_stats(tmp_path):
    pytest.importorskip("ai_edge_litert", reason="the model runs on LiteRT (in dev)")
    x86_server_with_cuda_gpu(tmp_path)
    selection = select(SAMPLES / "mobilenet_v1_0.25_128_quant.tflite")
    candidate = selection.ranking.candidates[0]
    executors = [Relabelled(open_candidate(candidate, selection.options), device)
                 for device in ("TensorRT:0", "Hailo8:0")]
    assert [place(e).domain for e in executors] == ["gpu", "npu"]
    x = np.zeros(executors[0].inputs[0].shape, np.uint8)
    with ScheduledModel(executors, "thermal", root=tmp_path) as model:
        for _ in range(5):
            model.run(x, timeout=30)
        devices = model.stats.devices
        assert "no sensor for TensorRT:0" in devices["gpu"].temp_reason
        assert "no sensor for Hailo8:0" in devices["npu"].temp_reason
        reason = model.trace.records[-1].reason
        assert "no sensor for TensorRT:0" in reason and "no sensor for Hailo8:0" in reason
        assert "serving unthrottled" in reason
