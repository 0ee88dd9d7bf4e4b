"""What an emulated accelerator emulates, checked one behaviour at a time over LiteRT on the bundled model:
numerics, the latency model, faults (unplug, missing delegate, hang) and the plug-in module it is written as."""

from __future__ import annotations

import numpy as np
import pytest

import edgeaccel
from conftest import SAMPLES
from edgeaccel.errors import DeviceUnavailableError, InferenceTimeoutError
from edgeaccel.executors.base import ExecutorOptions
from edgeaccel.testing.emulated import EmulatedSpec, Faults, _numerics, emulated_accelerator

MODEL = SAMPLES / "mobilenet_v1_0.25_128_quant.tflite"


@pytest.fixture(scope="module")
def model_info():
    return edgeaccel.describe(MODEL)


def zeros(info):
    return [np.zeros(info.inputs[0].shape, np.uint8)]


def test_reduced_precision_numerics_round_as_numpy_does():
    x = np.array([[1.0001, -3.14159265, 1e-3, 65504.0, 0.1]], np.float32)
    np.testing.assert_array_equal(_numerics(x, "f16"), x.astype(np.float16).astype(np.float32))
    bf16 = _numerics(x, "bf16")
    assert (bf16.view(np.uint32) & 0xFFFF == 0).all() and np.allclose(bf16, x, rtol=2 ** -8)
    assert not np.array_equal(bf16, x)
    int8 = _numerics(x, "int8")
    assert len(np.unique(np.round(int8 / (65504.0 / 127)))) <= 255 and int8[0, 3] == pytest.approx(65504.0)
    assert int8[0, 0] == 0.0  # 1.0 is below half a step of a 65504-wide int8 range: requantized to zero
    ids = np.arange(12, dtype=np.uint8).reshape(1, 12)
    np.testing.assert_array_equal(_numerics(ids, "f16"), ids)  # integer outputs pass unchanged
    corrupt = _numerics(ids, "corrupt")
    assert np.argmax(corrupt) != np.argmax(ids) and sorted(corrupt.ravel()) == sorted(ids.ravel())
    for single in (np.array([[7]], np.uint8), np.array([0.25], np.float32), np.array(3, np.int64)):
        assert not np.array_equal(_numerics(single, "corrupt"), single)  # a lone value is wrong too


def test_latency_model_is_the_slower_of_speedup_and_fixed_and_counts_the_cpu_share(model_info):
    cls = emulated_accelerator("lat", "LatNPU", "npu", speedup=10, fixed_latency_ms=2,
                               faults=Faults(offload_share=0.5))
    with_both = cls(model_info, "LatNPU", ExecutorOptions())
    try:
        assert with_both.modelled_s(0.010) == pytest.approx(0.010 * 0.5 + 0.002 * 0.5)
        assert with_both.modelled_s(0.050) == pytest.approx(0.050 * 0.5 + 0.005 * 0.5)
        details = with_both.info.details
        assert details["simulated"]["latency_model"] == "real x 0.50 + max(real / 10, 2 ms) x 0.50"
        assert "simulated" in details["emulated"] and details["accelerated_share"] == 0.5
    finally:
        with_both.close()


def test_an_unplugged_device_fails_says_so_and_comes_back_when_replugged(model_info):
    cls = emulated_accelerator("plug", "PlugNPU", "npu", speedup=5, faults=Faults(fail_after=3))
    executor = cls(model_info, "PlugNPU", ExecutorOptions())
    for _ in range(3):
        executor.run(zeros(model_info))
    with pytest.raises(DeviceUnavailableError, match="unplugged after 3 calls"):
        executor.run(zeros(model_info))
    available = cls.availability("PlugNPU")
    assert not available and "unplugged" in available.reason and available.fix
    with pytest.raises(DeviceUnavailableError, match="unplugged"):
        cls(model_info, "PlugNPU", ExecutorOptions())
    executor.close()
    cls.replug()
    assert cls.availability("PlugNPU")
    again = cls(model_info, "PlugNPU", ExecutorOptions())
    assert len(again.run(zeros(model_info))) == 1
    again.close()


def test_a_missing_delegate_fails_the_load_while_the_device_is_there(model_info):
    cls = emulated_accelerator("nodel", "NoDelNPU", "npu", faults=Faults(load_error="Failed to load delegate"))
    assert cls.availability("NoDelNPU")
    with pytest.raises(DeviceUnavailableError, match="Failed to load delegate") as caught:
        cls(model_info, "NoDelNPU", ExecutorOptions())
    assert caught.value.hint


def test_a_hang_is_bounded_and_raises_a_timeout(model_info):
    cls = emulated_accelerator("hang", "HangNPU", "npu", faults=Faults(hang_after=1, hang_s=0.05))
    executor = cls(model_info, "HangNPU", ExecutorOptions())
    executor.run(zeros(model_info))
    with pytest.raises(InferenceTimeoutError, match="hung for 0.05 s"):
        executor.run(zeros(model_info))
    executor.close()


def test_an_absent_device_says_why(model_info):
    cls = emulated_accelerator("gone", "GoneNPU", "npu", available="not fitted on this board")
    assert not cls.availability("GoneNPU") and "not fitted" in cls.availability("GoneNPU").reason
    assert not cls.availability("OtherNPU") and cls.availability(None)


@pytest.mark.parametrize("bad, match", [
    (dict(numerics="fp8"), "numerics"), (dict(wraps="tensorflow"), "wraps"), (dict(kind="cpu"), "kind"),
    (dict(device="CPU"), "device"), (dict(device="GPU:0"), "device"), (dict(speedup=0), "speedup"),
    (dict(faults=Faults(offload_share=0.5), fixed_latency_ms=-1), "fixed_latency_ms"),
])
def test_a_wrong_description_is_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        emulated_accelerator(**{"name": "x", "device": "XNPU", "kind": "npu", **bad})
    with pytest.raises(ValueError, match="offload_share"):
        Faults(offload_share=1.5)


def test_the_plugin_module_source_makes_the_same_class_again():
    cls = emulated_accelerator("src", "SrcNPU", "npu", fixed_latency_ms=3, numerics="bf16", power_w=1.5,
                               faults=Faults(fail_after=7, offload_share=0.8))
    namespace = {"__name__": "written_module"}
    exec("from edgeaccel.testing.emulated import Faults, emulated_accelerator\n" + cls.spec.source("SRC"), namespace)
    again = namespace["SRC"]
    assert again.spec == cls.spec and again.__module__ == "written_module"
    assert again.device_kinds == {"SrcNPU": "npu"} and again.default_precision("SrcNPU") == "bf16"
    assert isinstance(again.spec, EmulatedSpec) and again.power_w == 1.5
