"""compare_layers: per-layer error of a quantized model against its float origin, on real runtimes.

The check the issue states: corrupting one layer's weights in a copy of the quantized model moves THAT layer to
the top of the ranking (the layers after it inherit its error but do not add to it), while the intact model's
ranking does not put it first. Models: a small ONNX CNN built here with random weights and quantized by
`edgeaccel convert` (QDQ, ONNX Runtime; OpenVINO IR from it), and a Keras CNN converted to int8 TFLite (the
TensorFlow tests are skipped without the tensorflow extra).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from edgeaccel.convert import convert
from edgeaccel.errors import EdgeAccelError, ModelError, UnsupportedModelError
from edgeaccel.profiling.compare import LayerComparison, compare_layers
from conftest import IMAGES, MODELS
from onnx_models import save


def _cnn(path: Path, extra: bool = False, classes: int = 10, seed: int = 0) -> Path:
    """x [1,3,16,16] -> conv1 -> relu -> conv2 (stride 2) -> relu -> conv3 -> relu -> mean -> fc: random
    He-initialised weights (quantization error does not need a trained model). ``extra``: one more conv
    before the pooling, named so that nothing in the plain model has its name (a graph that differs)."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)

    def he(*shape):
        return (rng.standard_normal(shape) * np.sqrt(2 / np.prod(shape[1:]))).astype(np.float32)

    inits = {"w1": he(8, 3, 3, 3), "b1": np.full(8, 0.1, np.float32), "w2": he(16, 8, 3, 3),
             "b2": np.zeros(16, np.float32), "w3": he(16, 16, 3, 3), "b3": np.zeros(16, np.float32),
             "wf": he(classes, 16).T.copy(), "bf": np.zeros(classes, np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["conv1"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Relu", ["conv1"], ["relu1"]),
             helper.make_node("Conv", ["relu1", "w2", "b2"], ["conv2"], pads=[1, 1, 1, 1], strides=[2, 2],
                              name="conv2"),
             helper.make_node("Relu", ["conv2"], ["relu2"]),
             helper.make_node("Conv", ["relu2", "w3", "b3"], ["conv3"], pads=[1, 1, 1, 1], name="conv3"),
             helper.make_node("Relu", ["conv3"], ["relu3"])]
    last = "relu3"
    if extra:
        inits["wx"] = he(16, 16, 3, 3)
        nodes += [helper.make_node("Conv", ["relu3", "wx"], ["extra_conv"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", ["extra_conv"], ["extra_relu"])]
        last = "extra_relu"
    nodes += [helper.make_node("GlobalAveragePool", [last], ["pool"]),
              helper.make_node("Flatten", ["pool"], ["flat"]),
              helper.make_node("Gemm", ["flat", "wf", "bf"], ["logits"])]
    return save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, classes])], inits, path)


@pytest.fixture(scope="module")
def onnx_bundle(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cnn")
    source = _cnn(folder / "cnn.onnx")
    calib = np.random.default_rng(1).normal(0, 1, (24, 3, 16, 16)).astype(np.float32)
    np.save(folder / "calib.npy", calib)
    result = convert(source, "onnx-int8,openvino-int8", folder / "bundle", calibration=folder / "calib.npy")
    return result


def _artifact(result, target: str) -> Path:
    return next(a.path for a in result.artifacts if a.target == target)


def _corrupt_onnx_weights(src: Path, dest: Path, weight: str) -> Path:
    """A copy of a QDQ model whose int8 weights ``weight`` are scrambled (one conv broken, nothing else)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(src))
    init = next(i for i in model.graph.initializer if i.name == f"{weight}_quantized")
    values = numpy_helper.to_array(init)
    scrambled = np.random.default_rng(0).permutation(values.reshape(-1)).reshape(values.shape)
    init.CopyFrom(numpy_helper.from_array(scrambled.astype(values.dtype), init.name))
    onnx.save(model, str(dest))
    return dest


def _layer(result: LayerComparison, name: str):
    return next(r for r in result.rows if r.name == name)


@pytest.mark.slow
def test_bundle_compares_every_layer_on_its_calibration_samples(onnx_bundle):
    result = compare_layers(onnx_bundle.out)
    assert result.runtimes == {"quantized": "onnxruntime", "float": "onnxruntime"}
    assert Path(result.model).name == "cnn_int8.onnx" and Path(result.float_model).name == "cnn_float.onnx"
    assert "calibration samples in bundle" in result.inputs_used and result.samples == 8
    names = [r.name for r in result.rows]
    # graph order, every activation of the float graph (the quantizer fused each Relu into its Conv)
    assert [n for n in names if n in ("x", "relu1", "relu2", "relu3", "pool", "flat", "logits")] == \
        ["x", "relu1", "relu2", "relu3", "pool", "flat", "logits"]
    assert all(u.startswith(("quantized: ", "float: ")) for u in result.unmatched)
    assert {u.split(" ")[1] for u in result.unmatched} >= {"conv1", "conv2", "conv3"}  # fused away: listed
    for row in result.rows:
        if row.op_type != "input":
            assert 15 < row.sqnr_db < 60 and 0 < row.rel_error < 0.2, row  # int8 error: real, but small
    conv2 = _layer(result, "relu2")
    assert conv2.inputs == ["relu1"] and conv2.added_by == "float op on quantized inputs"
    assert 0 < conv2.added_error < conv2.rel_error  # its own rounding, not what it inherited from relu1
    first = _layer(result, "x")  # the quantized input: nothing upstream, all its error is its own
    assert first.added_by == "minus worst input" and first.added_error == first.rel_error > 0
    data = json.loads(json.dumps(result.to_dict()))
    assert data["schema"] == "edgeaccel.compare/1" and len(data["rows"]) == len(result.rows)
    assert data["ranking"][0] == result.worst(1)[0].name
    lines = result.table_lines(top=3)
    assert "SQNR dB" in lines[1] and len([x for x in lines if x[:2] in ("1 ", "2 ", "3 ")]) == 3


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["onnxruntime", "openvino"])
def test_a_corrupted_conv_moves_to_the_top(onnx_bundle, tmp_path, executor):
    int8 = _artifact(onnx_bundle, "onnx-int8")
    intact = compare_layers(onnx_bundle.out, executor=executor)
    assert intact.worst(1)[0].name != "relu2", intact.table_lines()
    broken = _corrupt_onnx_weights(int8, tmp_path / "broken.onnx", "w2")
    if executor == "openvino":
        from edgeaccel.convert.openvino_ir import convert as to_ir

        broken = to_ir(broken, tmp_path / "broken.xml")
    result = compare_layers(broken, onnx_bundle.reference, onnx_bundle.calibration, executor=executor)
    assert result.runtimes["quantized"] == executor
    top = result.worst(3)
    assert top[0].name == "relu2", "\n".join(result.table_lines())
    assert top[0].added_error > 4 * max(r.added_error for r in result.rows if r.name != "relu2")
    # the next conv inherits the error (high cumulative error) but, run in float on the same broken inputs,
    # adds only its own rounding
    assert _layer(result, "relu3").rel_error > 0.3 and _layer(result, "relu3").added_error < 0.05


def test_openvino_ir_agrees_with_onnx_runtime(onnx_bundle):
    ort = compare_layers(onnx_bundle.out)
    ov = compare_layers(onnx_bundle.out, executor="openvino")
    assert ov.runtimes["quantized"] == "openvino" and Path(ov.model).suffix == ".xml"
    both = {r.name for r in ort.rows} & {r.name for r in ov.rows}
    assert {"relu1", "relu2", "relu3", "logits"} <= both
    for name in ("relu1", "relu3", "logits"):  # the same quantized graph: errors within rounding of each other
        assert _layer(ov, name).rel_error == pytest.approx(_layer(ort, name).rel_error, rel=0.25, abs=2e-3)


def test_another_graph_lists_what_did_not_match_and_compares_the_rest(onnx_bundle, tmp_path):
    other = _cnn(tmp_path / "cnn_extra.onnx", extra=True)
    result = compare_layers(_artifact(onnx_bundle, "onnx-int8"), other, onnx_bundle.calibration)
    assert "float: extra_relu (Relu 1x16x8x8)" in result.unmatched
    assert "float: extra_conv (Conv 1x16x8x8)" in result.unmatched
    assert {"relu1", "relu2", "relu3"} <= {r.name for r in result.rows}
    assert _layer(result, "relu3").rel_error < 0.2  # matched layers upstream of the difference still agree
    assert _layer(result, "pool").rel_error > 0.3  # after the extra conv the graphs compute other things
    assert any("not matched" in line for line in result.table_lines())


def test_without_common_names_layers_match_by_op_and_shape(onnx_bundle, tmp_path):
    """A float model whose values were all renamed (another exporter's names): the same layers are found by op
    type and shape in graph order, with the same figures as the match by name."""
    import onnx

    model = onnx.load(str(onnx_bundle.reference))
    renamed = {o: f"other_{i}" for i, n in enumerate(model.graph.node) for o in n.output}
    for node in model.graph.node:
        node.input[:] = [renamed.get(x, x) for x in node.input]
        node.output[:] = [renamed[x] for x in node.output]
    model.graph.output[0].name = renamed[model.graph.output[0].name]
    onnx.save(model, str(tmp_path / "renamed.onnx"))
    int8 = _artifact(onnx_bundle, "onnx-int8")
    by_name = compare_layers(int8, onnx_bundle.reference, onnx_bundle.calibration)
    by_op = compare_layers(int8, tmp_path / "renamed.onnx", onnx_bundle.calibration)
    assert {r.matched_by for r in by_op.rows if r.op_type != "input"} == {"op+shape"}
    assert [r.name for r in by_op.rows] == [r.name for r in by_name.rows]
    for a, b in zip(by_op.rows, by_name.rows, strict=True):
        assert a.rel_error == pytest.approx(b.rel_error, rel=1e-4) and a.float_name.startswith(("other_", "x"))


@pytest.mark.shared
def test_nothing_matching_is_an_error_with_a_hint(onnx_bundle, tmp_path):
    from onnx import TensorProto, helper

    unrelated = save([helper.make_node("AveragePool", ["x"], ["avg"], kernel_shape=[4, 4], strides=[4, 4]),
                      helper.make_node("Flatten", ["avg"], ["flat_avg"]),
                      helper.make_node("MatMul", ["flat_avg", "m"], ["out"])],
                     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                     [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 7])],
                     {"m": np.ones((48, 7), np.float32)}, tmp_path / "unrelated.onnx")
    with pytest.raises(ModelError) as err:
        compare_layers(_artifact(onnx_bundle, "onnx-int8"), unrelated)
    assert "no tensor of cnn_int8.onnx" in err.value.message and "edgeaccel convert" in err.value.hint
    with pytest.raises(ModelError, match="not one model"):  # inputs that differ are caught before any run
        compare_layers(_artifact(onnx_bundle, "onnx-int8"), MODELS / "mobilenet_v2_1.0_224_quant.onnx")


@pytest.mark.shared
def test_inputs_images_arrays_and_random(onnx_bundle):
    int8, ref = _artifact(onnx_bundle, "onnx-int8"), onnx_bundle.reference
    images = compare_layers(int8, ref, [IMAGES / "bird.png", IMAGES / "cat.png"])
    assert images.inputs_used == "2 images" and images.samples == 2
    arrays = np.random.default_rng(5).normal(0, 1, (3, 3, 16, 16)).astype(np.float32)
    stacked = compare_layers(int8, ref, [arrays], samples=2)
    assert stacked.samples == 2 and "arrays" in stacked.inputs_used
    randomly = compare_layers(int8, ref)  # no bundle, no inputs: seeded random data, and it says so
    assert "random" in randomly.inputs_used and randomly.samples == 8
    assert randomly.to_dict()["rows"] == compare_layers(int8, ref).to_dict()["rows"]  # deterministic
    asked = compare_layers(onnx_bundle.out, inputs=["random"], samples=2)  # even where calibration samples are
    assert "random inputs (seed 0) in the quantized input's range, as asked" in asked.inputs_used
    with pytest.raises(EdgeAccelError, match="takes 1x3x16x16"):
        compare_layers(int8, ref, [np.zeros((1, 16, 16, 3), np.float32)])


@pytest.mark.shared
def test_a_model_against_itself_is_exact_everywhere():
    """Several inputs and outputs, every tensor read back: the same values on both sides, nothing unmatched."""
    result = compare_layers(MODELS / "split_concat.tflite", MODELS / "split_concat.tflite", samples=2)
    assert len(result.rows) > 5 and not result.unmatched and "random" in result.inputs_used
    assert all(r.sqnr_db is None and r.rel_error == 0 and r.added_error == 0 for r in result.rows)
    assert any("is it quantized too?" in n for n in result.notes)  # an int8 "float" model cannot be cut


@pytest.mark.shared
def test_models_no_tensor_can_be_read_from_are_refused(onnx_bundle, tmp_path):
    with pytest.raises(UnsupportedModelError) as err:
        compare_layers(MODELS / "mobilenet_v1_0.25_128_quant_edgetpu.tflite",
                       MODELS / "mobilenet_v1_0.25_128_quant.tflite")
    assert "Edge TPU" in err.value.message and "without _edgetpu" in err.value.hint
    with pytest.raises(ModelError, match="names no float model"):
        compare_layers(_artifact(onnx_bundle, "onnx-int8"))
    with pytest.raises(ModelError, match="no per-layer capture for executor 'tensorrt'"):
        compare_layers(onnx_bundle.out, executor="tensorrt")


@pytest.mark.slow
@pytest.mark.shared
def test_int8_tflite_against_a_float_onnx_across_formats(tmp_path):
    """The shared int8 MobileNetV2 .tflite on LiteRT against a float ONNX of it (tf2onnx kept the TFLite names;
    here made by dequantizing the shared QDQ .onnx): NHWC against NCHW, fused ReLU6 against a separate Clip."""
    from edgeaccel.convert.onnx_dequantize import dequantize

    int8 = MODELS / "mobilenet_v2_1.0_224_quant.tflite"
    float_onnx = dequantize(MODELS / "mobilenet_v2_1.0_224_quant.onnx", tmp_path / "mnv2_float.onnx")
    intact = compare_layers(int8, float_onnx, [IMAGES / "bird.png"])
    assert intact.runtimes == {"quantized": "litert", "float": "onnxruntime"}
    assert any("cross-format" in n for n in intact.notes)
    assert len(intact.rows) > 60 and intact.rows[-1].rel_error < 0.05  # matched right: int8-sized errors
    assert max(r.rel_error for r in intact.rows) < 0.2
    out, weights = _conv_layers(int8)[10]
    assert intact.worst(1)[0].name != out
    broken = _corrupt_tflite_weights(int8, tmp_path / "broken.tflite", weights)
    result = compare_layers(broken, float_onnx, [IMAGES / "bird.png"])
    top, second = result.worst(2)
    assert top.name == out and top.added_error > 4 * second.added_error, "\n".join(result.table_lines())


# -- TFLite int8 from a Keras model (TensorFlow) ---------------------------------------------------------------

@pytest.fixture(scope="module")
def tflite_bundle(tmp_path_factory):
    pytest.importorskip("tensorflow", reason="needs the tensorflow extra (pip install -e '.[dev]' has it)")
    from convert_helpers import dataset, train_keras_cnn

    folder = tmp_path_factory.mktemp("keras")
    x, y = dataset(200, seed=1)
    train_keras_cnn(x, y, epochs=1).save(folder / "cnn.keras")
    np.save(folder / "calib.npy", x[:32])
    return convert(folder / "cnn.keras", "tflite-int8", folder / "bundle", calibration=folder / "calib.npy")


def _conv_layers(path: Path) -> list[tuple[str, str]]:
    """(output tensor name, weight tensor name) of each CONV_2D, in graph order (Keras numbers its layer
    names per process, so they are read from the model, not written here)."""
    from edgeaccel.executors.litert import interpreter_module

    interpreter = interpreter_module()[0].Interpreter(model_path=str(path))
    names = {d["index"]: d["name"] for d in interpreter.get_tensor_details()}
    return [(names[int(op["outputs"][0])], names[int(op["inputs"][1])])
            for op in interpreter._get_ops_details() if op["op_name"] == "CONV_2D"]


def _corrupt_tflite_weights(src: Path, dest: Path, tensor_name: str) -> Path:
    """A copy of an int8 .tflite with one weight tensor's bytes scrambled in the flatbuffer."""
    from edgeaccel.executors.litert import interpreter_module

    interpreter = interpreter_module()[0].Interpreter(model_path=str(src))
    detail = next(d for d in interpreter.get_tensor_details() if d["name"] == tensor_name)
    weights = interpreter.get_tensor(detail["index"])
    data = bytearray(src.read_bytes())
    at = data.find(weights.tobytes())
    assert at > 0 and data.find(weights.tobytes(), at + 1) < 0, "the weights' bytes must be found once"
    scrambled = np.random.default_rng(0).permutation(weights.reshape(-1)).reshape(weights.shape)
    data[at:at + weights.nbytes] = scrambled.astype(weights.dtype).tobytes()
    dest.write_bytes(bytes(data))
    return dest


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:__array__ implementation doesn't accept a copy:DeprecationWarning")
def test_tflite_int8_corrupted_conv_moves_to_the_top(tflite_bundle, tmp_path):
    intact = compare_layers(tflite_bundle.out)
    assert intact.runtimes == {"quantized": "litert", "float": "litert"}
    assert {r.added_by for r in intact.rows if r.op_type != "input"} == {"float op on quantized inputs"}
    assert not intact.unmatched  # the TFLite converter keeps the float model's tensor names
    int8 = _artifact(tflite_bundle, "tflite-int8")
    convs = _conv_layers(int8)
    assert [r.name for r in intact.rows if r.op_type == "CONV_2D"] == [out for out, _ in convs]
    for out, weights in convs:
        if intact.worst(1)[0].name == out:
            continue  # the one conv the intact model already ranks first proves nothing
        broken = _corrupt_tflite_weights(int8, tmp_path / "broken.tflite", weights)
        shutil.copy(tflite_bundle.calibration, tmp_path / "calib.npy")
        result = compare_layers(broken, tflite_bundle.reference, [tmp_path / "calib.npy"])
        top, second = result.worst(2)
        assert top.name == out and top.added_error > 4 * second.added_error, "\n".join(result.table_lines())


@pytest.mark.slow
def test_cli_profile_compare_on_a_bundle_table_json_and_plot(onnx_bundle, tmp_path, capsys):
    """`edgeaccel profile BUNDLE --compare` (no value: the bundle's own float reference), as a user types it."""
    from edgeaccel.cli import main

    assert main(["profile", str(onnx_bundle.out), "--compare", "--runs", "2", "--warmup", "0"]) == 0
    out = capsys.readouterr().out
    assert "whole model" in out and "per-layer error of cnn_int8.onnx against cnn_float.onnx" in out
    expected = compare_layers(onnx_bundle.out)
    top = next(line for line in out.splitlines() if line.startswith("1 "))
    assert expected.worst(1)[0].name in top  # the CLI ranks as the API does

    pytest.importorskip("matplotlib")
    png = tmp_path / "layers.png"
    assert main(["profile", str(onnx_bundle.out), "--compare", "--runs", "2", "--warmup", "0", "--json",
                 "--plot", str(png)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["compare"]["schema"] == "edgeaccel.compare/1"
    assert data["compare"]["ranking"][0] == expected.worst(1)[0].name
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
