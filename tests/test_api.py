"""The Model API on the three CPU runtimes, against the known labels of the shared images (bird -> chickadee) and
the raw runtimes."""

from __future__ import annotations

import csv
import shutil

import numpy as np
import pytest

import edgeaccel
from conftest import MODELS, image_input
from edgeaccel.errors import (
    InputCountError,
    InputDTypeError,
    InputNameError,
    InputShapeError,
    ModelClosedError,
    UnsupportedFormatError,
    UnsupportedModelError,
)

pytestmark = pytest.mark.shared

MOBILENET = {
    "tflite-litert": ("mobilenet_v2_1.0_224_quant.tflite", {}),
    "tflite-openvino": ("mobilenet_v2_1.0_224_quant.tflite", {"executor": "openvino"}),
    "onnx-onnxruntime": ("mobilenet_v2_1.0_224_quant.onnx", {}),
    "onnx-openvino": ("mobilenet_v2_1.0_224_quant.onnx", {"executor": "openvino"}),
    "ir-openvino": ("openvino/mobilenet_v2_1.0_224_quant.xml", {}),
}
EXPECTED = {"bird": "chickadee", "cat": "Egyptian cat", "grace_hopper": "military uniform"}


@pytest.mark.parametrize("case", sorted(MOBILENET))
def test_mobilenet_v2_answers_on_every_executor(case, labels):
    name, kwargs = MOBILENET[case]
    with edgeaccel.load(MODELS / name, **kwargs) as model:
        assert model.executor.runtime == kwargs.get("executor", model.executor.runtime)
        assert model.executor.precision.endswith("f32") or "int8" in model.executor.precision
        for image, label in EXPECTED.items():
            scores = model.run(image_input(image, model.inputs[0]))[0]
            assert labels[int(np.argmax(scores))] == label


def test_default_choice_is_explained():
    with edgeaccel.load(MODELS / "mobilenet_v2_1.0_224_quant.tflite") as model:
        info = model.executor
        assert (info.runtime, info.device) == ("litert", "CPU")
        assert info.reason and info.threads >= 1
        assert "litert" in str(info) and "CPU" in str(info)
        assert model.fallbacks == ()


def test_openvino_runs_f32_unless_bf16_is_asked_for():
    with edgeaccel.load(MODELS / "mobilenet_v2_1.0_224_quant.onnx", executor="openvino") as model:
        assert model.executor.precision.endswith("f32")
    with edgeaccel.load(MODELS / "mobilenet_v2_1.0_224_quant.onnx", executor="openvino", precision="bf16") as model:
        assert model.executor.precision.endswith("bf16")  # this CPU has avx512_bf16 (runtime facts)


def test_movenet_matches_reference_keypoints():
    reference = list(csv.DictReader((MODELS / "movenet_single_pose_lightning_ptq_reference.csv").open()))
    with edgeaccel.load(MODELS / "movenet_single_pose_lightning_ptq.tflite") as model:
        keypoints = model.run(image_input("squat", model.inputs[0]))[0].reshape(17, 3)
    for row in reference:
        y, x, _ = keypoints[int(row["keypoint_id"])]
        assert abs(x - float(row["keypoint_x"])) < 0.05
        assert abs(y - float(row["keypoint_y"])) < 0.05


def test_lstm_reads_the_nine():
    with edgeaccel.load(MODELS / "keras_lstm_mnist_ptq.tflite") as model:
        assert int(np.argmax(model.run(image_input("mnist_nine", model.inputs[0]))[0])) == 9


def test_deeplab_finds_the_dog():
    with edgeaccel.load(MODELS / "deeplabv3_mnv2_dm05_pascal_quant.tflite") as model:
        classes = model.run(image_input("dog_segmentation", model.inputs[0]))[0]
    assert classes.shape == (1, 513, 513)
    assert (classes == 12).mean() > 0.2


def _split_concat_inputs(model, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, size=s.shape, dtype=np.uint8) for s in model.inputs]


def test_split_concat_equals_raw_litert_in_every_input_form():
    from ai_edge_litert.interpreter import Interpreter

    path = MODELS / "split_concat.tflite"
    raw = Interpreter(model_path=str(path))
    raw.allocate_tensors()
    with edgeaccel.load(path) as model:
        arrays = _split_concat_inputs(model)
        for detail, array in zip(raw.get_input_details(), arrays, strict=True):
            raw.set_tensor(detail["index"], array)
        raw.invoke()
        expected = [raw.get_tensor(d["index"]) for d in raw.get_output_details()]
        as_list = model.run(arrays)
        as_dict = model.run({s.name: a for s, a in zip(model.inputs, arrays, strict=True)})
        assert len(as_list) == 5
        for got_list, got_dict, want, spec in zip(as_list, as_dict, expected, model.outputs, strict=True):
            np.testing.assert_array_equal(got_list, want)
            np.testing.assert_array_equal(got_dict, want)
            np.testing.assert_array_equal(as_list[spec.name], want)
        assert set(as_list.as_dict()) == {s.name for s in model.outputs}


def test_split_concat_same_on_openvino():
    path = MODELS / "split_concat.tflite"
    with edgeaccel.load(path) as litert, edgeaccel.load(path, executor="openvino") as ov:
        arrays = _split_concat_inputs(litert, seed=3)
        for a, b in zip(litert.run(arrays), ov.run(arrays), strict=True):
            assert np.abs(a.astype(int) - b.astype(int)).max() <= 1


def test_quantize_and_dequantize_use_the_model_parameters():
    with edgeaccel.load(MODELS / "mobilenet_v2_1.0_224_quant.tflite") as model:
        q = model.inputs[0].quantization
        pixels = image_input("bird", model.inputs[0])
        real = (pixels.astype(np.float32) - q.zero_point[0]) * q.scale[0]
        raw = model.run(pixels)[0]
        from_float = model.run(real, quantize=True)[0]
        np.testing.assert_array_equal(raw, from_float)
        probs = model.run(pixels, dequantize=True)[0]
        assert probs.dtype == np.float32
        assert probs.sum() == pytest.approx(1.0, abs=0.05)


def test_input_errors_are_clear_and_precede_the_runtime():
    with edgeaccel.load(MODELS / "split_concat.tflite") as model:
        good = _split_concat_inputs(model)
        with pytest.raises(InputCountError, match="takes 3"):
            model.run(good[:2])
        with pytest.raises(InputCountError):
            model.run(good[0])
        with pytest.raises(InputNameError, match="nope"):
            model.run({"nope": good[0], **{s.name: a for s, a in zip(model.inputs, good, strict=True)}})
        with pytest.raises(InputDTypeError, match="quantize=True"):
            model.run([good[0].astype(np.float32), good[1], good[2]])
        with pytest.raises(InputShapeError, match="1x8x8x3"):
            model.run([good[0][:, :4], good[1], good[2]])
        with pytest.raises(InputShapeError, match="batch"):
            model.run([good[0][0], good[1], good[2]])
        # still usable after every refusal
        assert len(model.run(good)) == 5


def test_wrong_dtype_is_refused_on_openvino_which_would_convert_silently():
    with edgeaccel.load(MODELS / "mobilenet_v2_1.0_224_quant.onnx", executor="openvino") as model:
        with pytest.raises(InputDTypeError):
            model.run(np.zeros((1, 224, 224, 3), np.float64))


def test_non_contiguous_input_is_accepted():
    with edgeaccel.load(MODELS / "mobilenet_v2_1.0_224_quant.tflite") as model:
        pixels = image_input("bird", model.inputs[0])
        strided = np.asfortranarray(pixels)
        np.testing.assert_array_equal(model.run(strided)[0], model.run(pixels)[0])


def test_closed_model_refuses_to_run():
    model = edgeaccel.load(MODELS / "split_concat.tflite")
    arrays = _split_concat_inputs(model)
    model.close()
    model.close()  # idempotent
    with pytest.raises(ModelClosedError):
        model.run(arrays)


@pytest.mark.parametrize("name", ["mobilenet_v1_0.25_128_quant_edgetpu.tflite", "movenet_single_pose_lightning_ptq_edgetpu.tflite",
                                  "deeplabv3_mnv2_dm05_pascal_quant_edgetpu.tflite", "keras_lstm_mnist_ptq_edgetpu.tflite"])
def test_edgetpu_models_without_an_edgetpu_say_so(name):
    with pytest.raises(UnsupportedModelError, match="Edge TPU") as err:
        edgeaccel.load(MODELS / name)
    assert "CPU twin" in err.value.hint


def test_model_with_unknown_custom_op_is_a_clear_error():
    with pytest.raises(edgeaccel.EdgeAccelError, match="fake-op-double"):
        edgeaccel.load(MODELS / "model_invoking_error.tflite")


def test_onnx_bytes_named_tflite_run_as_onnx(tmp_path, labels):
    path = tmp_path / "mislabelled.tflite"
    shutil.copy(MODELS / "mobilenet_v2_1.0_224_quant.onnx", path)
    with edgeaccel.load(path) as model:
        assert model.info.format.value == "onnx"
        assert labels[int(np.argmax(model.run(image_input("bird", model.inputs[0]))[0]))] == "chickadee"


def test_text_named_tflite_is_refused(tmp_path):
    path = tmp_path / "notes.tflite"
    path.write_text("just some notes\n")
    with pytest.raises(UnsupportedFormatError):
        edgeaccel.load(path)


def test_pinning_an_executor_that_cannot_read_the_format_explains():
    with pytest.raises(edgeaccel.NoExecutorError, match="onnxruntime"):
        edgeaccel.load(MODELS / "split_concat.tflite", executor="onnxruntime")


def test_unknown_executor_name_is_a_value_error():
    with pytest.raises(ValueError, match="unknown executor"):
        edgeaccel.load(MODELS / "split_concat.tflite", executor="tensorrt-llm")
