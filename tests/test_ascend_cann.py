"""ONNX Runtime's CANN provider (Huawei Ascend NPUs) without an Ascend NPU: provider options built as ONNX Runtime
documents them, the precisions the device offers, ORT's silent CPU fallback caught with the real (CPU-only)
onnxruntime, and availability on fake Atlas trees naming what is missing. Running on an NPU is unverified here."""

from __future__ import annotations

import pytest

pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")

from edgeaccel import formats  # noqa: E402
from edgeaccel.errors import DeviceUnavailableError  # noqa: E402
from edgeaccel.executors.base import ExecutorOptions  # noqa: E402
from edgeaccel.executors.onnxruntime import OnnxRuntimeExecutor, provider_options  # noqa: E402
from edgeaccel.hardware import Identity  # noqa: E402
from edgeaccel.testing import atlas_200_dk  # noqa: E402
from onnx_models import small_conv  # noqa: E402

CANN = "CANNExecutionProvider"


@pytest.fixture(scope="module")
def conv(tmp_path_factory):
    return formats.describe(small_conv(tmp_path_factory.mktemp("cann") / "conv.onnx"))


def test_cann_options_device_and_precision_mode():
    assert provider_options(CANN, "CANN", ExecutorOptions()) == {"device_id": "0", "precision_mode": "force_fp16"}
    assert provider_options(CANN, "CANN:1", ExecutorOptions(precision="f16")) == {"device_id": "1",
                                                                                   "precision_mode": "force_fp16"}
    assert provider_options(CANN, "CANN", ExecutorOptions(precision="f32"))["precision_mode"] == "force_fp32"
    mine = ExecutorOptions(runtime_options={"provider_options": {CANN: {
        "npu_mem_limit": 2 << 30, "op_select_impl_mode": "high_precision", "precision_mode": "allow_mix_precision"}}})
    assert provider_options(CANN, "CANN", mine) == {"device_id": "0", "precision_mode": "allow_mix_precision",
                                                    "npu_mem_limit": str(2 << 30),
                                                    "op_select_impl_mode": "high_precision"}
    assert provider_options("CPUExecutionProvider", "CANN", ExecutorOptions()) == {}
    with pytest.raises(ValueError, match="must be a GPU index such as CANN:0"):
        provider_options(CANN, "CANN:first", ExecutorOptions())


def test_the_npu_runs_f16_by_default_and_f32_is_the_opt_in(conv):
    assert OnnxRuntimeExecutor.kind_of("CANN") == "npu" and OnnxRuntimeExecutor.default_precision("CANN") == "f16"
    assert OnnxRuntimeExecutor.offered_precisions("CANN") == ("f16", "f32")
    assert OnnxRuntimeExecutor.rejects(conv, "CANN", ExecutorOptions(precision="f16")) is None
    assert "offers int8 through TensorRT only, not CANN" in OnnxRuntimeExecutor.rejects(
        conv, "CANN", ExecutorOptions(precision="int8"))
    f16_on_cuda = OnnxRuntimeExecutor.rejects(conv, "CUDA", ExecutorOptions(precision="f16"))
    assert "through TensorRT only (and through CANN on an Ascend NPU), not CUDA" in f16_on_cuda
    assert OnnxRuntimeExecutor.install_hint("CANN") == ("pip install 'edgeaccel[ascend]'; also a Huawei Ascend NPU with "
                                                        "its driver and the CANN toolkit (source set_env.sh)")


@pytest.mark.filterwarnings("ignore:Specified provider:UserWarning")  # ORT's own warning, all it does
def test_ort_silent_cpu_fallback_from_cann_is_an_error(conv):
    with pytest.raises(DeviceUnavailableError) as err:
        OnnxRuntimeExecutor(conv, "CANN", ExecutorOptions())
    assert f"did not give this session {CANN}: it fell back to ['CPUExecutionProvider']" in str(err.value)


def test_availability_here_names_the_missing_npu_and_provider():
    available = OnnxRuntimeExecutor.availability("CANN")
    assert not available and available.reason.startswith("no Huawei Ascend NPU on this machine (no /dev/davinciN")
    assert f"has no {CANN}" in available.reason and "pip install onnxruntime-cann" in available.fix


def test_availability_on_an_atlas_tree_blames_only_the_build(tmp_path):
    atlas_200_dk(tmp_path)
    available = OnnxRuntimeExecutor.availability("CANN", root=tmp_path)
    assert not available and available.reason.startswith(f"this onnxruntime build (onnxruntime) has no {CANN}")


def test_availability_on_an_atlas_tree_for_an_account_outside_hwhiaiuser(tmp_path):
    atlas_200_dk(tmp_path)
    available = OnnxRuntimeExecutor.availability("CANN", root=tmp_path, identity=Identity(4242, frozenset({4242})))
    assert available.reason.startswith("Huawei Ascend NPU /dev/davinci0: this user cannot read and write /dev/davinci0")
    assert "usermod -aG HwHiAiUser" in available.fix


def test_the_probe_and_the_scheduler_name_it_an_npu():
    from edgeaccel.scheduling.devices import place_device

    placed = place_device("CANN:0", OnnxRuntimeExecutor.device_kinds, "OnnxRuntimeExecutor")
    assert (placed.kind, placed.domain) == ("npu", "npu")
    assert place_device("CANN").kind == "npu"  # by name too (an isolated worker's executor)
