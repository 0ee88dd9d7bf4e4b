"""ONNX Runtime's accelerator devices without the accelerators: provider options built as documented,
ORT's silent fallback to the CPU caught with the real (CPU-only) onnxruntime, and an availability answer
that names what is missing here. Nothing here runs on a GPU or an NPU: the README lists that as unverified."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")

from conftest import MODELS, without  # noqa: E402
from edgeaccel import formats  # noqa: E402
from edgeaccel.errors import DeviceUnavailableError  # noqa: E402
from edgeaccel.executors.base import ExecutorOptions  # noqa: E402
from edgeaccel.executors.onnxruntime import OnnxRuntimeExecutor, provider_options  # noqa: E402
from edgeaccel.testing import intel_laptop_with_npu, x86_server_with_cuda_gpu  # noqa: E402
from onnx_models import small_conv  # noqa: E402

TRT, CUDA, OV, QNN = ("TensorrtExecutionProvider", "CUDAExecutionProvider", "OpenVINOExecutionProvider",
                      "QNNExecutionProvider")


@pytest.fixture(scope="module")
def conv(tmp_path_factory):
    return formats.describe(small_conv(tmp_path_factory.mktemp("ort") / "conv.onnx"))


def test_tensorrt_options_device_cache_and_precision(tmp_path):
    opts = ExecutorOptions(precision="f16", cache_dir=str(tmp_path))
    trt = provider_options(TRT, "TensorRT:1", opts)
    cache = tmp_path / "onnxruntime" / "tensorrt"
    assert trt == {"device_id": "1", "trt_engine_cache_enable": "True", "trt_engine_cache_path": str(cache),
                   "trt_timing_cache_enable": "True", "trt_timing_cache_path": str(cache),
                   "trt_fp16_enable": "True"}
    assert cache.is_dir()  # inside edgeaccel's cache, where cache.trim bounds it
    assert provider_options(CUDA, "TensorRT:1", opts) == {"device_id": "1"}
    int8 = provider_options(TRT, "TensorRT", ExecutorOptions(precision="int8"))
    assert int8 == {"device_id": "0", "trt_int8_enable": "True"}  # no cache_dir: no engine cache


def test_the_callers_provider_options_win_key_by_key():
    opts = ExecutorOptions(precision="f16", runtime_options={"provider_options": {
        TRT: {"trt_fp16_enable": False, "trt_max_workspace_size": 1 << 30}, CUDA: {"device_id": 3}}})
    assert provider_options(TRT, "TensorRT", opts) == {"device_id": "0", "trt_fp16_enable": "False",
                                                       "trt_max_workspace_size": str(1 << 30)}
    assert provider_options(CUDA, "CUDA:0", opts) == {"device_id": "3"}


def test_npu_providers_are_pointed_at_the_npu(tmp_path):
    ov = provider_options(OV, "NPU", ExecutorOptions(cache_dir=str(tmp_path)))
    assert ov == {"device_type": "NPU", "cache_dir": str(tmp_path / "onnxruntime" / "openvino-ep")}
    assert provider_options(QNN, "QNN", ExecutorOptions())["backend_path"] in ("libQnnHtp.so", "QnnHtp.dll")
    mine = ExecutorOptions(runtime_options={"provider_options": {QNN: {"backend_type": "htp"}}})
    assert provider_options(QNN, "QNN", mine) == {"backend_type": "htp"}  # the two are mutually exclusive


def test_a_bad_gpu_index_is_a_clear_error():
    with pytest.raises(ValueError, match="must be a GPU index such as CUDA:0"):
        provider_options(CUDA, "CUDA:first", ExecutorOptions())


@pytest.mark.filterwarnings("ignore:Specified provider:UserWarning")  # ORT's own warning, all it does
@pytest.mark.parametrize("device, provider", [("CUDA", CUDA), ("TensorRT", TRT), ("NPU", OV), ("QNN", QNN)])
def test_ort_silent_cpu_fallback_is_an_error(conv, device, provider):
    """This onnxruntime build lacks the provider: ORT only warns and runs on the CPU; edgeaccel refuses."""
    import onnxruntime

    if provider in onnxruntime.get_available_providers():
        pytest.skip(f"this onnxruntime build has {provider}: a build without it is needed to show its fallback")
    with pytest.raises(DeviceUnavailableError) as err:
        OnnxRuntimeExecutor(conv, device, ExecutorOptions())
    assert f"did not give this session {provider}: it fell back to ['CPUExecutionProvider']" in str(err.value)
    assert "edgeaccel probe" in err.value.hint


def test_the_cpu_session_still_works_beside_them(conv):
    executor = OnnxRuntimeExecutor(conv, "CPU", ExecutorOptions())
    try:
        assert executor.run([np.ones((1, 3, 16, 16), np.float32)])[0].shape == (1, 8)
        assert executor.info.details["providers"] == ["CPUExecutionProvider"]
        # ORT's own fallback is off: a GPU provider failing in run() would otherwise re-create the session on
        # the CPU behind the executor's back (it only prints to stdout)
        assert executor._session._enable_fallback is False
    finally:
        executor.close()


def test_int8_on_tensorrt_needs_a_quantized_model_or_a_table(conv):
    int8 = ExecutorOptions(precision="int8")
    assert "QDQ-quantized model" in OnnxRuntimeExecutor.rejects(conv, "TensorRT", int8)
    assert OnnxRuntimeExecutor.rejects(formats.describe(MODELS / "mobilenet_v2_1.0_224_quant.onnx"), "TensorRT",
                                       int8) is None
    table = ExecutorOptions(precision="int8", runtime_options={"provider_options": {
        TRT: {"trt_int8_calibration_table_name": "calibration.flatbuffers"}}})
    assert OnnxRuntimeExecutor.rejects(conv, "TensorRT", table) is None
    assert "through TensorRT only" in OnnxRuntimeExecutor.rejects(conv, "CUDA", ExecutorOptions(precision="f16"))


@without("CUDA", "NPU", "QNN")
@pytest.mark.parametrize("device, hardware, provider", [
    ("CUDA", "no NVIDIA GPU with its driver on this machine", CUDA),
    ("TensorRT", "no NVIDIA GPU with its driver on this machine", TRT),
    ("NPU", "no Intel NPU on this machine", OV),
    ("QNN", "no Qualcomm Hexagon NPU on this machine", QNN),
])
def test_availability_here_names_the_missing_hardware_and_provider(device, hardware, provider):
    available = OnnxRuntimeExecutor.availability(device)
    assert not available
    assert available.reason.startswith(hardware)
    assert f"this onnxruntime build (onnxruntime) has no {provider}" in available.reason
    assert "pip uninstall onnxruntime" in available.fix


@pytest.mark.parametrize("device, provider", [("DirectML", "DmlExecutionProvider"),
                                              ("CoreML", "CoreMLExecutionProvider")])
def test_availability_here_for_the_other_platforms_providers(device, provider):
    available = OnnxRuntimeExecutor.availability(device)
    assert not available and available.reason.startswith(f"this onnxruntime build (onnxruntime) has no {provider}")


def test_availability_on_a_gpu_server_tree_blames_only_the_build(tmp_path):
    import onnxruntime

    x86_server_with_cuda_gpu(tmp_path)
    available = OnnxRuntimeExecutor.availability("CUDA", root=tmp_path)
    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():  # a GPU build: the tree's GPU is enough
        assert available, available.reason
    else:
        assert not available and available.reason.startswith("this onnxruntime build (onnxruntime) has no "
                                                             "CUDAExecutionProvider")
    beyond = OnnxRuntimeExecutor.availability("CUDA:1", root=tmp_path)
    assert beyond.reason.startswith("CUDA:1 asks for GPU 1 (counting from 0) but 1 usable NVIDIA GPU is here")


def test_availability_on_an_npu_laptop_tree_for_an_account_without_the_render_group(tmp_path):
    from edgeaccel.hardware import Identity

    intel_laptop_with_npu(tmp_path)
    available = OnnxRuntimeExecutor.availability("NPU", root=tmp_path, identity=Identity(4242, frozenset({4242})))
    assert available.reason.startswith("Intel NPU (Meteor Lake) accel0: this user cannot read and write "
                                       "/dev/accel/accel0")
    assert "usermod -aG render" in available.fix


def test_unknown_devices(conv):
    assert "known: CPU, CUDA, TensorRT, NPU, QNN" in OnnxRuntimeExecutor.availability("ROCm").reason
    with pytest.raises(DeviceUnavailableError, match="unknown ONNX Runtime device 'ROCm'"):
        OnnxRuntimeExecutor(conv, "ROCm", ExecutorOptions())



def test_placement_counts_the_nodes_each_provider_took():
    """ORT puts what an accelerator's provider cannot run on the CPU without a word: the share is read back from
    the session (get_provider_graph_assignment_info), here on a real CPU session."""
    import onnxruntime as ort

    from edgeaccel.executors.onnxruntime import placement

    so = ort.SessionOptions()
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    session = ort.InferenceSession(str(MODELS / "mobilenet_v2_1.0_224_quant.onnx"), so,
                                   providers=["CPUExecutionProvider"])
    found = placement(session, "CPUExecutionProvider")
    if found is None:
        pytest.skip("this onnxruntime cannot report node placement (before 1.24)")
    assert found["accelerated_share"] == 1.0 and found["nodes_per_provider"]["CPUExecutionProvider"] > 50
    assert placement(session, "CUDAExecutionProvider")["accelerated_share"] == 0.0


def test_a_gpu_this_build_cannot_open_is_a_rejection_at_ranking_not_a_fallback_at_load(conv):
    """Seen on a GPU machine with the CPU-only onnxruntime: every load of an ONNX model warned twice ("fallback:
    onnxruntime:TensorRT failed at load: this onnxruntime build has no ...", the same for CUDA). The real
    machine's facts ask the runtime first; facts of another machine (unloadable=None) still rank the GPU."""
    import onnxruntime

    from edgeaccel.selection.selector import MachineFacts, rank

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this onnxruntime build has CUDA: the build without it is the case shown")
    runtimes = {"onnxruntime": OnnxRuntimeExecutor}
    present = frozenset({"CPU", "CUDA", "TensorRT"})
    elsewhere = MachineFacts({"onnxruntime": onnxruntime.__version__}, present)
    here = MachineFacts({"onnxruntime": onnxruntime.__version__}, present,
                        unloadable=lambda cls, device: cls.unloadable(device))
    assert {"onnxruntime:CUDA", "onnxruntime:TensorRT"} <= {c.name for c in rank([conv], runtimes, elsewhere, None,
                                                                                ExecutorOptions()).candidates}
    ranking = rank([conv], runtimes, here, None, ExecutorOptions())
    assert [c.name for c in ranking.candidates] == ["onnxruntime:CPU"]
    refused = {r.name: r for r in ranking.rejected}
    for device, provider in (("CUDA", CUDA), ("TensorRT", TRT)):
        assert refused[f"onnxruntime:{device}"].reason.startswith(f"this onnxruntime build (onnxruntime) has no "
                                                                  f"{provider}")
        assert "edgeaccel[gpu]" in refused[f"onnxruntime:{device}"].fix


@pytest.mark.slow  # two fresh interpreters
def test_ort_warnings_outside_sessions_stay_quiet_where_edgeaccel_imported_it(tmp_path):
    """ORT's process-wide logger printed a raw [W:onnxruntime ...] line during calibration on a GPU host. Where
    edgeaccel imports ORT, that logger prints errors only; an app that imported ORT first keeps its own setting.
    Seen through a session that inherits the default logger: an unused initializer is a warning."""
    import subprocess
    import sys

    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
                              [numpy_helper.from_array(np.ones(4, np.float32), "unused")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, tmp_path / "unused.onnx")
    session = f"import onnxruntime; onnxruntime.InferenceSession({str(tmp_path / 'unused.onnx')!r})"
    first_edgeaccel = "from edgeaccel.executors.onnxruntime import _ort; _ort(); " + session
    first_app = "import onnxruntime; from edgeaccel.executors.onnxruntime import _ort; _ort(); " + session
    quiet, loud = (subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
                   for code in (first_edgeaccel, first_app))
    assert quiet.returncode == loud.returncode == 0, quiet.stderr + loud.stderr
    assert "Removing initializer 'unused'" in loud.stderr and "[W:onnxruntime" not in quiet.stderr
