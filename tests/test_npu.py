"""NPUs without an NPU: OpenVINO's NPU device (static shapes only), what availability says here and on
fake trees read by the real probe, and LiteRT's NPU accelerator, which is described but not driven."""

from __future__ import annotations

import pytest

pytest.importorskip("openvino", reason="the openvino extra is not installed")

import edgeaccel  # noqa: E402
from edgeaccel import formats  # noqa: E402
from edgeaccel.executors.base import ExecutorOptions  # noqa: E402
from edgeaccel.executors.litert import LiteRTExecutor  # noqa: E402
from edgeaccel.executors.litert_npu import vendor_libraries  # noqa: E402
from edgeaccel.executors.openvino import OpenVINOExecutor, available_devices  # noqa: E402
from edgeaccel.executors.registry import runtimes  # noqa: E402
from edgeaccel.loader import executor_class  # noqa: E402
from edgeaccel.hardware import Identity  # noqa: E402
from edgeaccel.selection.selector import MachineFacts, rank  # noqa: E402
from edgeaccel.testing import intel_laptop_with_npu  # noqa: E402
from conftest import without  # noqa: E402
from onnx_models import small_conv  # noqa: E402

STRANGER = Identity(uid=4242, gids=frozenset({4242}))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("npu")
    return (formats.describe(small_conv(folder / "static.onnx")),
            formats.describe(small_conv(folder / "dynamic.onnx", dynamic=True)))


def test_openvino_npu_refuses_dynamic_shapes_and_says_which(models):
    static, dynamic = models
    why = OpenVINOExecutor.rejects(dynamic, "NPU", ExecutorOptions())
    assert why.startswith("the OpenVINO NPU plugin compiles static shapes only, and this model has dynamic inputs "
                          "(x [1, 3, '?', '?'])")
    assert "reshape" in why
    assert OpenVINOExecutor.rejects(static, "NPU", ExecutorOptions()) is None
    assert OpenVINOExecutor.rejects(dynamic, "CPU", ExecutorOptions()) is None


def test_the_selector_reports_the_static_shape_rule_on_a_machine_with_an_npu(models):
    _, dynamic = models
    facts = MachineFacts(installed={"openvino": "2026.4.1", "onnxruntime": "1.31.1", "litert": "2.3.0"},
                         devices_present=frozenset({"CPU", "NPU"}))
    ranking = rank([dynamic], runtimes(), facts, lambda r, m, d, o: executor_class(r).rejects(m, d, o),
                   ExecutorOptions())
    reasons = ranking.rejection_reasons()
    assert "static shapes only" in reasons["openvino:NPU@f16 [dynamic.onnx]"]  # the NPU computes in f16
    assert "openvino:CPU" in [c.name for c in ranking.candidates]


@without("NPU")
def test_loading_on_the_npu_here_says_there_is_none(models):
    static, _ = models
    with pytest.raises(edgeaccel.NoExecutorError, match="no NPU device found on this machine"):
        edgeaccel.load(static.path, executor="openvino", device="NPU")


@without("NPU")
def test_openvino_npu_availability_here():
    available = OpenVINOExecutor.availability("NPU")
    assert not available
    assert available.reason.startswith("no Intel NPU on this machine")
    assert f"OpenVINO sees no NPU device here (it sees {', '.join(available_devices())})" in available.reason
    assert "linux-npu-driver" in available.fix


def test_openvino_npu_availability_on_an_npu_laptop_tree(tmp_path):
    intel_laptop_with_npu(tmp_path)
    here = OpenVINOExecutor.availability("NPU", root=tmp_path)
    # the tree has the NPU; this machine's OpenVINO cannot reach it, and says what would make it
    assert here.reason.startswith("Intel NPU (Meteor Lake) accel0 is here and usable, but OpenVINO sees no NPU")
    assert "intel-level-zero-npu" in here.fix
    denied = OpenVINOExecutor.availability("NPU", root=tmp_path, identity=STRANGER)
    assert denied.reason.startswith("Intel NPU (Meteor Lake) accel0: this user cannot read and write "
                                    "/dev/accel/accel0 (group render, mode 0660)")
    assert "usermod -aG render" in denied.fix


@without("GPU")
def test_openvino_gpu_availability_here():
    available = OpenVINOExecutor.availability("GPU")
    assert not available and available.reason.startswith("no Intel GPU on this machine")


def test_litert_npu_is_planned_and_says_what_blocks_it_here():
    available = LiteRTExecutor.availability("NPU")
    assert not available and "not driven by edgeaccel yet" in available.reason
    dispatch = [p for parts in vendor_libraries().values() for p in parts["dispatch"]]
    if dispatch:  # ai-edge-litert 2.3.0 ships Intel's; its state here (loads or why not) is in the answer
        assert "dispatch library" in available.reason
    assert "executor='openvino', device='NPU'" in available.fix
    litert = runtimes()["litert"]
    assert litert.target("NPU").planned and "NPU" not in litert.devices
