"""The native TensorRT executor's decisions, tested here for real without TensorRT or a GPU: the refusal of an
engine from another TensorRT version (from its header, before deserializing) and of one built for another GPU
(from TensorRT's own error text), the ONNX twin it points to, the cache key of an engine built from ONNX, the
build options, availability on fake device trees, and the ONNX twin taking over in the selector and the loader
on a machine whose facts say TensorRT 10.3 and a GPU are there. Building, caching, loading and running an
engine need TensorRT on an NVIDIA GPU: unverified here (README).

Engines are TEST DATA in trtexec's header layout (see test_tensorrt_engine.py)."""

from __future__ import annotations

import pytest

import edgeaccel
from edgeaccel.errors import ConfigError, ConversionError
from edgeaccel.executors.base import ExecutorOptions
from edgeaccel.executors.tensorrt import TensorRTExecutor
from edgeaccel.executors.tensorrt_build import (
    BuildOptions,
    engine_cache_key,
    gpu_refusal,
    onnx_twin,
    same_release,
    version_refusal,
)
from edgeaccel.testing import x86_server_with_cuda_gpu
from test_tensorrt_engine import engine_bytes, write


class TensorRT103(TensorRTExecutor):
    """The TensorRT executor on a machine that has TensorRT 10.3.0.26 installed (a fact the selector is given, as
    test_selector gives its tables; nothing of TensorRT is emulated)."""

    @classmethod
    def installed(cls) -> str | None:
        return "10.3.0.26"


def test_version_refusal_says_both_versions_and_that_the_header_told():
    why = version_refusal("yolo.engine", "8.6.1.6", "10.3.0.26")
    assert why == ("yolo.engine was built by TensorRT 8.6.1.6, and this machine has TensorRT 10.3.0.26: an engine "
                   "runs only on the TensorRT version that built it (its header says so; it was not deserialized)")
    assert version_refusal("m.engine", "10.3.0.26", "10.3.0.30") is None  # another build of the same release
    assert same_release("10.3.0.26", "10.3.0.30") and not same_release("10.3.0.26", "10.4.0.26")
    assert version_refusal("m.engine", "unknown", "10.3.0.26") is None  # TensorRT decides, and says why
    assert version_refusal("m.engine", "8.6.1.6", None) is None
    assert version_refusal("m.engine", "8.6.1.6", "10.3.0.26", version_compatible=True) is None


def test_gpu_refusal_reads_tensorrt_s_own_words():
    logged = ["[runtime.cpp::deserializeCudaEngine] Error Code 6: API Usage Error (The engine plan file is generated "
              "on an incompatible device, expecting compute 8.6 got compute 8.7, please rebuild.)"]
    assert gpu_refusal("m.engine", logged, "Orin") == (
        "m.engine was built for a GPU of compute capability 8.6, and this GPU (Orin) is compute capability 8.7: an "
        "engine runs only on the GPU architecture it was built for")
    assert gpu_refusal("m.engine", ["Serialization assertion failed"]) is None


@pytest.mark.parametrize("engine, onnx, expected", [
    ("m.engine", "m.onnx", "m.onnx"),
    ("m_fp16.engine", "m.onnx", "m.onnx"),
    ("m_f16.engine", "m_float.onnx", "m_float.onnx"),  # edgeaccel convert's names
    ("m_int8.plan", "m_float.onnx", "m_float.onnx"),
    ("m.engine", "other.onnx", None),
])
def test_the_onnx_twin_beside_an_engine(tmp_path, engine, onnx, expected):
    (tmp_path / onnx).write_bytes(b"onnx")
    found = onnx_twin(tmp_path / engine)
    assert (found.name if found else None) == expected


def test_the_engine_cache_key_changes_with_everything_the_build_depends_on():
    base = dict(model_digest="a" * 64, gpu_name="NVIDIA H100 80GB HBM3", compute_capability="9.0",
                tensorrt="10.3.0.26", options=BuildOptions(precision="f16"))
    key = engine_cache_key(**base)
    assert key == engine_cache_key(**base) and len(key) == 32
    changes = [dict(model_digest="b" * 64), dict(gpu_name="NVIDIA L4"), dict(compute_capability="8.9"),
               dict(tensorrt="10.4.0.26"), dict(options=BuildOptions(precision="int8")),
               dict(options=BuildOptions(precision="f16", workspace_bytes=1 << 30)),
               dict(options=BuildOptions(precision="f16", shapes={"x": ((1, 3, 8, 8),) * 3})),
               dict(options=BuildOptions(precision="int8", int8_calibration=(([0.0],),)))]
    keys = {engine_cache_key(**{**base, **change}) for change in changes}
    assert key not in keys and len(keys) == len(changes)
    # how an engine is used is not part of what was built
    assert engine_cache_key(**{**base, "options": BuildOptions(precision="f16", version_compatible=True)}) == key


def test_build_options_are_checked():
    opts = BuildOptions.from_runtime_options({"tensorrt": {"workspace_bytes": 1 << 28,
                                                           "shapes": {"x": [[1, 3, 8, 8], [4, 3, 8, 8], [8, 3, 8, 8]]}}},
                                             "f16")
    assert opts.shapes == {"x": ((1, 3, 8, 8), (4, 3, 8, 8), (8, 3, 8, 8))} and opts.precision == "f16"
    with pytest.raises(ConfigError, match="unknown TensorRT option 'fp16'"):
        BuildOptions.from_runtime_options({"tensorrt": {"fp16": True}})
    with pytest.raises(ConfigError, match=r"shapes\['x'\] must be \(min, opt, max\) shapes"):
        BuildOptions.from_runtime_options({"tensorrt": {"shapes": {"x": [1, 3, 8, 8]}}})


def test_rejects_engine_precisions_versions_and_int8_without_qdq(tmp_path):
    from onnx_models import small_conv

    engine = edgeaccel.describe(write(tmp_path, "m.engine", engine_bytes((8, 6, 1, 6))))
    assert "precision was fixed when it was built" in TensorRT103.rejects(engine, "TensorRT",
                                                                          ExecutorOptions(precision="f16"))
    assert "built by TensorRT 8.6.1.6, and this machine has TensorRT 10.3.0.26" in TensorRT103.rejects(
        engine, "TensorRT", ExecutorOptions())
    compatible = ExecutorOptions(runtime_options={"tensorrt": {"version_compatible": True}})
    assert TensorRT103.rejects(engine, "TensorRT", compatible) is None
    same = edgeaccel.describe(write(tmp_path, "same.engine", engine_bytes((10, 3, 0, 26))))
    assert TensorRT103.rejects(same, "TensorRT", ExecutorOptions()) is None
    conv = edgeaccel.describe(small_conv(tmp_path / "conv.onnx"))
    assert "QDQ-quantized model" in TensorRT103.rejects(conv, "TensorRT", ExecutorOptions(precision="int8"))
    assert TensorRT103.rejects(conv, "TensorRT", ExecutorOptions(precision="f16")) is None
    assert "unknown TensorRT option" in TensorRT103.rejects(conv, "TensorRT", ExecutorOptions(
        runtime_options={"tensorrt": {"fp16": True}}))


def test_availability_on_trees(tmp_path):
    empty = TensorRTExecutor.availability("TensorRT", root=tmp_path)
    assert not empty and empty.reason.startswith("no NVIDIA GPU with its driver on this machine")
    assert "TensorRT is not installed" in empty.reason and "edgeaccel[tensorrt]" in empty.fix
    x86_server_with_cuda_gpu(tmp_path / "gpu")
    server = TensorRTExecutor.availability("TensorRT", root=tmp_path / "gpu")
    assert not server and server.reason.startswith("TensorRT is not installed")  # the GPU is there
    beyond = TensorRTExecutor.availability("TensorRT:1", root=tmp_path / "gpu")
    assert beyond.reason.startswith("TensorRT:1 asks for GPU 1 (counting from 0) but 1 usable NVIDIA GPU is here")
    assert "unknown TensorRT device 'CUDA'" in TensorRTExecutor.availability("CUDA").reason


def test_the_survey_and_the_registry_know_it_without_importing_tensorrt():
    from edgeaccel.executors.registry import installed_version, runtimes

    assert runtimes()["tensorrt"] is TensorRTExecutor and installed_version("tensorrt") is None
    survey = TensorRTExecutor.survey()
    assert not survey.installed and survey.reason == "TensorRT is not installed" and "tensorrt" in survey.fix


def test_the_twin_takes_over_from_an_engine_of_another_version_visibly(tmp_path):
    """A machine with TensorRT 10.3 and an NVIDIA GPU (its facts), handed an engine from TensorRT 8.6 and its ONNX
    twin: the engine is refused from its header, the twin runs (here on the CPU: the GPU candidates fail to
    load on this machine, each a FallbackEvent too) and the refusal is in model.fallbacks."""
    from edgeaccel.executors.onnxruntime import OnnxRuntimeExecutor
    from edgeaccel.loader import open_ranked
    from edgeaccel.selection.selector import MachineFacts, rank
    from onnx_models import small_conv

    if OnnxRuntimeExecutor.availability("CUDA"):
        pytest.skip("a real NVIDIA GPU with a GPU build of onnxruntime is here: its candidates would load")
    twin = edgeaccel.describe(small_conv(tmp_path / "conv.onnx"))
    engine = edgeaccel.describe(write(tmp_path, "conv.engine", engine_bytes((8, 6, 1, 6))))
    runtimes = {"onnxruntime": OnnxRuntimeExecutor, "tensorrt": TensorRT103}
    facts = MachineFacts({"onnxruntime": "1.24", "tensorrt": "10.3.0.26"}, frozenset({"CPU", "CUDA", "TensorRT"}))
    ranking = rank([engine, twin], runtimes, facts, None, ExecutorOptions())
    refused = {f"{r.name} [{r.artifact.path.name}]": r.reason for r in ranking.rejected}
    assert "built by TensorRT 8.6.1.6" in refused["tensorrt:TensorRT [conv.engine]"]
    names = [f"{c.name} [{c.artifact.path.name}]" for c in ranking.candidates]
    # the twin on the GPU through ONNX Runtime, or rebuilt by TensorRT itself, before the twin on the CPU
    assert {"onnxruntime:TensorRT [conv.onnx]", "tensorrt:TensorRT [conv.onnx]"} <= set(names[:-1])
    assert names[-1] == "onnxruntime:CPU [conv.onnx]"
    with open_ranked(ranking, ExecutorOptions()) as model:
        assert model.executor.name == "onnxruntime:CPU"
        events = {(f.stage, f.failed): f for f in model.fallbacks}
    select = events[("select", "tensorrt:TensorRT [conv.engine]")]
    assert "built by TensorRT 8.6.1.6" in select.error and select.replaced_by == "onnxruntime:CPU"
    assert ("load", "tensorrt:TensorRT") in events and ("load", "onnxruntime:TensorRT") in events


def test_convert_to_tensorrt_is_refused_here_before_any_work(tmp_path):
    from edgeaccel.convert import convert
    from onnx_models import small_conv

    model = small_conv(tmp_path / "conv.onnx")
    with pytest.raises(ConversionError) as info:
        convert(model, "onnx-float,tensorrt-f16", tmp_path / "out")
    why = TensorRTExecutor.availability("TensorRT").reason  # no GPU, or (on a GPU machine) no TensorRT
    assert f"build an engine on this machine's NVIDIA GPU, and here {why}" in info.value.message
    assert "edgeaccel[tensorrt]" in info.value.hint and "onnx-float / onnx-int8 here" in info.value.hint
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_an_engine_that_fits_ranks_before_its_twin_and_onnx_alone_goes_to_onnx_runtime_first(tmp_path):
    from edgeaccel.executors.onnxruntime import OnnxRuntimeExecutor
    from edgeaccel.profiles import get_profile
    from edgeaccel.selection.selector import MachineFacts, rank
    from onnx_models import small_conv

    twin = edgeaccel.describe(small_conv(tmp_path / "conv.onnx"))
    engine = edgeaccel.describe(write(tmp_path, "conv.engine", engine_bytes((10, 3, 0, 26))))
    runtimes = {"onnxruntime": OnnxRuntimeExecutor, "tensorrt": TensorRT103}
    facts = MachineFacts({"onnxruntime": "1.24", "tensorrt": "10.3.0.26"}, frozenset({"CPU", "CUDA", "TensorRT"}))
    for profile in (None, get_profile("jetson-orin-nano"), get_profile("x86-nvidia-gpu")):
        both = rank([engine, twin], runtimes, facts, None, ExecutorOptions(), profile=profile).candidates
        assert (both[0].runtime, both[0].artifact.path.name) == ("tensorrt", "conv.engine"), both
        alone = [c.runtime for c in rank([twin], runtimes, facts, None, ExecutorOptions(), profile=profile).candidates
                 if c.device == "TensorRT"]
        assert alone == ["onnxruntime", "tensorrt"]  # ONNX Runtime reads ONNX; TensorRT would build an engine
