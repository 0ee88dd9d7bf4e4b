"""Edges of `edgeaccel serve` below the protocols: a wrong input shape is the caller's 400 from our own check
(never a fallback through every executor and a 500), and loading a bundle says nothing about devices this
machine never had. Real runtimes on test-built ONNX models and the shared artifacts."""

from __future__ import annotations

import logging
import shutil
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import MODELS

pytest.importorskip("onnx")


def _serve_one(tmp_path, build, **options):
    from edgeaccel.serve.core import ServeCore, ServeOptions
    from edgeaccel.serve.repository import ModelRepository

    (tmp_path / "models").mkdir()
    build(tmp_path / "models" / "m.onnx")
    core = ServeCore(ModelRepository(tmp_path / "models"), ServeOptions(**options))
    return core, core.load("m")


def _conv_hw(path):
    from onnx_models import small_conv

    small_conv(path, dynamic=True)


def _matmul_k(path):
    from onnx import TensorProto, helper

    from onnx_models import save

    save([helper.make_node("MatMul", ["x", "W"], ["y"])],
         [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "k"])],
         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], {"W": np.ones((4, 3), np.float32)}, path)


@pytest.mark.parametrize("build, good, bad, words", [
    # 1x3xHxW into a 3x3 Conv: 2x2 is too small (ONNX Runtime refused it, OpenVINO answered zeros)
    (_conv_hw, (1, 3, 8, 8), (1, 3, 2, 2),
     "would be 1x8x0x0: an input is smaller than a kernel"),
    # x [1, k] @ W [4, 3]: k must be 4 (OpenVINO answered k=5 with no error)
    (_matmul_k, (1, 4), (1, 5), "Incompatible dimensions for matrix multiplication"),
], ids=["conv-too-small", "matmul-width"])
def test_a_size_the_graph_cannot_take_is_our_400_before_any_executor_runs(tmp_path, build, good, bad, words):
    from edgeaccel.serve.errors import ServeError

    core, served = _serve_one(tmp_path, build)  # every executor the policy holds (ONNX Runtime and OpenVINO)
    try:
        assert core.infer("m", {"x": np.ones(good, np.float32)}).result(30)
        runs = sum(s["runs"] for s in core.gate.snapshot().values())
        with pytest.raises(ServeError) as err:
            core.infer("m", {"x": np.ones(bad, np.float32)})  # refused as it is taken, not from its future
        assert err.value.status == 400 and err.value.grpc_code == "INVALID_ARGUMENT"
        assert "cannot take inputs of these shapes" in err.value.message and words in err.value.message
        assert sum(s["runs"] for s in core.gate.snapshot().values()) == runs  # no executor ran it
        assert not served.model.fallbacks
    finally:
        core.close()


def test_onnx_runtime_refusing_a_shape_at_run_is_the_callers_error_not_a_fallback(tmp_path):
    from onnx_models import small_conv

    import edgeaccel
    from edgeaccel.errors import InputShapeError

    small_conv(tmp_path / "conv.onnx", dynamic=True)
    with edgeaccel.load(tmp_path / "conv.onnx", executor="onnxruntime") as model:
        with pytest.raises(InputShapeError) as err:
            model.run(np.ones((1, 3, 2, 2), np.float32))
    assert "cannot run conv.onnx on inputs of this shape" in err.value.message
    assert "spatial sizes at least its kernels'" in err.value.hint


def test_dimensions_any_executor_fixes_are_checked_before_a_model_runs():
    from edgeaccel.modelinfo import TensorSpec
    from edgeaccel.serve.binding import check_fixed, fixed_dims
    from edgeaccel.serve.errors import ServeError

    dynamic = TensorSpec("x", (1, 3, None, None), np.dtype(np.float32))
    fixed = TensorSpec("x", (1, 3, 224, 224), np.dtype(np.float32))
    model = SimpleNamespace(inputs=[dynamic], slots=[SimpleNamespace(executor=SimpleNamespace(inputs=[dynamic])),
                                                     SimpleNamespace(executor=SimpleNamespace(inputs=[fixed]))])
    assert fixed_dims(model) == ((1, 3, 224, 224),)
    served = SimpleNamespace(name="m", batcher=None)
    check_fixed(served, "x", (1, 3, 224, 224), fixed_dims(model)[0])
    with pytest.raises(ServeError) as err:
        check_fixed(served, "x", (1, 3, 200, 224), fixed_dims(model)[0])
    assert err.value.status == 400 and "the model takes 1x3x224x224 (dimension 2 must be 224" in err.value.message


@pytest.mark.shared
def test_a_bundle_loads_without_warnings_about_devices_this_machine_never_had(tmp_path, caplog):
    import edgeaccel

    bundle = tmp_path / "mobilenet"
    bundle.mkdir()
    for name in ("mobilenet_v2_1.0_224_quant.tflite", "mobilenet_v2_1.0_224_quant.onnx"):
        shutil.copy(MODELS / name, bundle / name)
    for path in (MODELS / "openvino").iterdir():
        shutil.copy(path, bundle / path.name)
    with caplog.at_level(logging.WARNING, logger="edgeaccel"):
        with edgeaccel.load(bundle, calibrate=False) as model:
            assert not [f for f in model.fallbacks if f.stage == "select"]
            assert "passed over" not in model.executor.reason
    assert not [r for r in caplog.records if "passed over" in r.getMessage()]


@pytest.mark.shared
def test_an_edge_tpu_twin_that_cannot_run_here_is_still_said(tmp_path):
    import edgeaccel

    for name in ("mobilenet_v1_0.25_128_quant.tflite", "mobilenet_v1_0.25_128_quant_edgetpu.tflite"):
        shutil.copy(MODELS / name, tmp_path / name)
    with edgeaccel.load(tmp_path, calibrate=False) as model:
        if model.executor.device == "EdgeTPU":
            pytest.skip("this machine has an Edge TPU")
        (event,) = [f for f in model.fallbacks if f.stage == "select"]
    assert "mobilenet_v1_0.25_128_quant_edgetpu.tflite" in event.failed


def test_masks_encode_past_255_classes_and_instances_without_loss():
    import base64
    import io

    from PIL import Image

    from edgeaccel.serve.tasks import encode_mask

    def png(mask, background):  # the class ids as a client reads them back: each value less the offset
        encoded = encode_mask(mask, "png", background, [])
        with Image.open(io.BytesIO(base64.b64decode(encoded["data"]))) as image:
            return np.asarray(image).astype(np.int64) - encoded["offset"]

    classes = np.zeros((5, 7), np.int32)
    classes[1:3, 2:5], classes[4, 6] = 300, 2  # an id past 255: a 16-bit PNG
    np.testing.assert_array_equal(png(classes, 0), classes)
    instances = np.full((4, 4), -1)
    instances[0, 0], instances[3, 3] = 0, 1  # YOLO -seg: -1 where no instance is
    np.testing.assert_array_equal(png(instances, -1), instances)
    rle = encode_mask(instances, "rle", -1, [])["rle"]
    assert [(r["id"], r["counts"]) for r in rle] == [(0, [0, 1, 15]), (1, [15, 1])]


@pytest.mark.parametrize("seed", range(4))
def test_rle_of_every_id_from_one_pass_equals_each_ids_own_runs(seed):
    """rle_by_id against the plain way: each id's binary mask, column-major, its runs of 0s and 1s."""
    from edgeaccel.serve.tasks import rle_by_id

    def plain(binary):
        flat = binary.ravel(order="F")
        edges = np.flatnonzero(flat[1:] != flat[:-1]) + 1
        runs = np.diff(np.concatenate(([0], edges, [flat.size]))).tolist()
        return [0, *runs] if flat[0] else runs

    rng = np.random.default_rng(seed)
    for _ in range(50):
        mask = rng.integers(-1, 4, (int(rng.integers(1, 9)), int(rng.integers(1, 9))))
        mask = np.repeat(mask, int(rng.integers(1, 4)), axis=int(rng.integers(0, 2)))  # longer runs too
        ids = [-1, 0, 1, 2, 3, 7]  # 7: absent, one run of 0s
        assert rle_by_id(mask, ids) == [plain(mask == i) for i in ids]


@pytest.mark.parametrize("flags, words", [
    (["--task", "conv=track"], "--task conv=track: the task is one of classify, detect, segment, pose"),
    (["--task", "conv"], "--task takes MODEL=VALUE, not 'conv'"),
    (["--labels", "conv=no-such-labels.txt"], "--labels conv=no-such-labels.txt: no such file"),
    (["--task", "cnv=classify"], "--task names 'cnv', which the repository"),
    (["--threads", "0"], "--threads counts threads: 1 or more, not 0"),
], ids=["unknown-task", "no-model", "missing-labels", "unknown-model", "no-threads"])
def test_task_flags_are_checked_before_anything_loads(cli, tmp_path, flags, words):

    from onnx_models import small_conv


    small_conv(tmp_path / "conv.onnx")
    run = cli("serve", str(tmp_path), "--port", "0", "--grpc-port", "off", *flags, timeout=120)
    assert run.returncode != 0 and words in run.stderr, run.stderr


def test_threads_set_how_many_threads_a_run_takes_and_the_metadata_says_it(tmp_path):
    """`serve --threads N`: a lone request on N threads, concurrent ones on cores // N streams of N threads
    (the adaptive executor's two configurations), as RuntimeOptions(threads=N) does for load."""
    from edgeaccel.executors.executor_options import default_threads
    from edgeaccel.serve.describe import metadata
    from onnx_models import small_conv

    core, served = _serve_one(tmp_path, small_conv, policy="latency", threads=1, executor="onnxruntime")
    try:
        (info,) = served.model.executors.values()
        assert info.threads == 1
        if default_threads() > 1:  # one core: nothing to adapt, a single configuration
            assert info.details["adaptive"] and info.details["throughput_streams"] == default_threads()
            assert metadata(served, core.options)["parameters"]["streams"] == f"{default_threads()} x 1 thread"
        assert metadata(served, core.options)["parameters"]["threads"] == 1
        assert core.infer("m", {"x": np.ones((1, 3, 16, 16), np.float32)}).result(30)
    finally:
        core.close()
