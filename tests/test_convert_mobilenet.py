"""The quantized MobileNetV2 ONNX from ../shared/models, dequantized to float here, then requantized with
calibration on ../shared/images: the bird stays a chickadee on every artifact."""

from __future__ import annotations

import collections

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="the onnx extra is part of dev")

import edgeaccel  # noqa: E402
from conftest import IMAGES, MODELS, image_input  # noqa: E402
from edgeaccel.convert import check, convert  # noqa: E402
from edgeaccel.convert.onnx_dequantize import dequantize  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.shared]  # slow tier: quantizes MobileNetV2 (minutes)
QDQ_MODEL = MODELS / "mobilenet_v2_1.0_224_quant.onnx"
IMAGES_AND_LABELS = {"bird": "chickadee", "cat": "Egyptian cat", "grace_hopper": "military uniform"}


@pytest.fixture(scope="module")
def float_model(tmp_path_factory):
    return dequantize(QDQ_MODEL, tmp_path_factory.mktemp("deq") / "mobilenet_v2_float.onnx")


@pytest.fixture(scope="module")
def requantized(tmp_path_factory):
    out = tmp_path_factory.mktemp("requant")
    return convert(QDQ_MODEL, "onnx-int8,openvino-int8", out, calibration=IMAGES,
                   labels=MODELS / "imagenet_labels.txt", force=True)


def _top1(path, name, labels, **load) -> tuple[str, float]:
    with edgeaccel.load(path, **load) as model:
        scores = model.run(image_input(name, model.inputs[0]), dequantize=True)[0].reshape(-1)
    return labels[int(scores.argmax())], float(scores.max())


def test_dequantized_model_is_float_and_answers_like_the_original(float_model, labels):
    import onnx

    model = onnx.load(str(float_model))
    ops = collections.Counter(n.op_type for n in model.graph.node)
    assert not {"QuantizeLinear", "DequantizeLinear"} & set(ops)
    assert all(i.data_type == onnx.TensorProto.FLOAT for i in model.graph.initializer if len(i.dims) == 4)
    info = edgeaccel.describe(float_model)
    assert info.inputs[0].dtype == np.uint8  # the same pixels feed the original and its float twin
    assert info.outputs[0].dtype == np.float32
    for name, label in IMAGES_AND_LABELS.items():
        original, original_score = _top1(QDQ_MODEL, name, labels)
        deq, deq_score = _top1(float_model, name, labels)
        assert original == deq == label
        assert abs(original_score - deq_score) < 0.02  # the original's output is uint8, 1/256 steps


def test_requantized_bird_stays_a_chickadee(requantized, labels):
    for artifact in requantized.artifacts:
        executors = ["onnxruntime", "openvino"] if artifact.path.suffix == ".onnx" else ["openvino"]
        for executor in executors:
            label, score = _top1(artifact.path, "bird", labels, executor=executor)
            assert label == "chickadee", f"{artifact.path.name} on {executor}: {label} ({score:.2f})"
    with edgeaccel.load(requantized.out) as model:  # the bundle, as an application opens it
        assert labels[int(model.run(image_input("bird", model.inputs[0]), dequantize=True)[0].argmax())] == "chickadee"


def test_requantized_model_is_smaller_and_its_bundle_has_the_float_reference(requantized):
    reference = requantized.reference
    assert reference.name == "mobilenet_v2_1.0_224_quant_float.onnx"
    assert not edgeaccel.describe(reference).quantized
    onnx_int8 = next(a for a in requantized.artifacts if a.target == "onnx-int8")
    assert reference.stat().st_size / onnx_int8.size_bytes >= 3.0
    images = len(list(IMAGES.glob("*.png")))
    assert requantized.holdout_samples == 1 + (images - 5) // 5  # every 5th image held back
    assert requantized.calibration_samples == images - requantized.holdout_samples
    assert (requantized.out / "labels.txt").is_file()


def test_check_on_the_held_out_images(requantized):
    report = check(requantized.out, runs=2, executors=["onnxruntime"])
    row = report.row("mobilenet_v2_1.0_224_quant_int8.onnx", "onnxruntime")
    assert report.classifier and report.data_kind == "held-out" and row.samples == requantized.holdout_samples
    assert row.size_ratio >= 3.0
    report = check(requantized.out, runs=2, executors=["onnxruntime"], data=IMAGES)
    assert report.row("mobilenet_v2_1.0_224_quant_int8.onnx", "onnxruntime").top1_agreement >= 4 / 6


def test_selector_explains_its_choice_among_the_bundle_artifacts(cli, requantized):

    done = cli("explain", str(requantized.out), timeout=120)
    assert done.returncode == 0, done.stderr
    ranked, rejected = done.stdout.split("rejected")
    for artifact in requantized.artifacts:
        # an artifact whose post-conversion check failed (on one held-out image here: the grey mnist digit,
        # which 6 photos of calibration do not prepare it for) is listed with the reason, never ranked
        if requantized.check_of(artifact.path)["passed"] is False:
            assert f"{artifact.path.name}]: left out: it failed its check" in rejected
            assert artifact.path.name not in ranked
        else:
            assert artifact.path.name in ranked
