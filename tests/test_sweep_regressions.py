"""Regressions found by tools/sweep_models.py: models unlike the shared ones that edgeaccel refused, or ran with
answers other than the raw runtime's. Each model is built here, small, and compared with the raw runtime."""

from __future__ import annotations

import numpy as np
import pytest

import edgeaccel
from onnx_models import save
from tflite_edit import one_op_model

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _raw_ort(path, feed):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feed)


def _scalar_model(path):
    """x (dynamic length) and a scalar s -> sum(x * s), a scalar."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Mul", ["x", "s"], ["m"]), helper.make_node("ReduceSum", ["m"], ["y"], keepdims=0)]
    return save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"]),
                        helper.make_tensor_value_info("s", TensorProto.FLOAT, [])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])], {}, path)


@pytest.mark.parametrize("kwargs", [{"executor": "openvino"}, {"executor": "onnxruntime", "isolate": True},
                                    {"executor": "openvino", "isolate": True}])
@pytest.mark.slow
def test_scalar_inputs_and_outputs_stay_scalars(tmp_path, kwargs):
    """np.ascontiguousarray makes a 0-d array 1-d: a scalar output came back from the isolated worker with
    shape (1,), and OpenVINO refused a scalar input of a model with dynamic inputs."""
    path = _scalar_model(tmp_path / "scalar.onnx")
    x, s = np.arange(5, dtype=np.float32), np.array(0.5, np.float32)
    (expected,) = _raw_ort(path, {"x": x, "s": s})
    with edgeaccel.load(path, **kwargs) as model:
        (got,) = model.run([x, s])
    assert got.shape == () and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def _shapeless(path, nodes, inits=None, external=False):
    """A graph whose input x and output y declare a type but no shape (unknown rank), as ONNX GraphSurgeon
    writes them; onnx.checker refuses those, ONNX Runtime runs them."""
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(nodes, "shapeless", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    if external:
        onnx.save(model, path, save_as_external_data=True, location=path.name + ".data", size_threshold=16)
    else:
        onnx.save(model, path)
    return path


@pytest.mark.parametrize("external", [False, True])
def test_graph_io_without_shape_loads_and_accepts_any_rank(tmp_path, external):
    from onnx import helper

    bias = np.linspace(-1, 1, 64, dtype=np.float32)
    path = _shapeless(tmp_path / "m.onnx", [helper.make_node("Add", ["x", "b"], ["s"]),
                                            helper.make_node("Relu", ["s"], ["y"])], {"b": bias}, external)
    assert (tmp_path / "m.onnx.data").is_file() == external
    with edgeaccel.load(path) as model:
        assert model.inputs[0].unranked and model.inputs[0].is_dynamic
        for shape in ((64,), (3, 64), (2, 1, 64)):
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            (expected,) = _raw_ort(path, {"x": x})
            np.testing.assert_array_equal(model.run(x)[0], expected)


def test_graph_io_without_shape_is_still_checked(tmp_path):
    """The checker's refusals other than the missing shape still hold: a one-input Conv (which crashes OpenVINO's
    reader) and a type error found by strict shape inference."""
    from onnx import helper

    from edgeaccel.errors import ModelValidationError

    conv = _shapeless(tmp_path / "conv.onnx", [helper.make_node("Conv", ["x"], ["y"])])
    with pytest.raises(ModelValidationError, match="checker refused"):
        edgeaccel.load(conv)
    mixed = _shapeless(tmp_path / "mixed.onnx", [helper.make_node("Add", ["x", "i"], ["y"])],
                       {"i": np.arange(3, dtype=np.int64)})
    with pytest.raises(ModelValidationError, match="checker refused"):
        edgeaccel.load(mixed)


@pytest.mark.shared
@pytest.mark.parametrize("scale, refused", [(4e-7, False), (3.6e-7, True)])
def test_tiny_activation_scales_refused_only_where_litert_crashes(tmp_path, scale, refused):
    """Random-weight MobileNetV3Small and EfficientNetB0 quantized to int8 have activation scales 1e5 apart
    around one operator, and LiteRT runs them: a cap on that ratio refused them. What crashes is narrower: a
    conv whose requantization scale input x filter / output reaches 256 (XNNPACK's limit; movenet's conv 25 ->
    its output tensor 199 at scale 3.6e-7 is 263 and dies with 'double free'; at 4e-7, 237, it runs, with a
    ratio of 1.7e5 to the next ADD's output scale)."""
    from ai_edge_litert.interpreter import Interpreter

    from conftest import MODELS
    from edgeaccel.errors import ModelValidationError
    from tflite_edit import edit

    def change(model, schema):
        model.subgraphs[0].tensors[199].quantization.scale = np.array([scale], np.float32)

    path = edit(MODELS / "movenet_single_pose_lightning_ptq.tflite", tmp_path / "movenet.tflite", change)
    if refused:
        with pytest.raises(ModelValidationError, match="requantization scale"):
            edgeaccel.load(path)
        return
    raw = Interpreter(model_path=str(path))
    raw.allocate_tensors()
    d = raw.get_input_details()[0]
    x = np.random.default_rng(0).integers(0, 256, d["shape"]).astype(d["dtype"])
    raw.set_tensor(d["index"], x)
    raw.invoke()
    expected = raw.get_tensor(raw.get_output_details()[0]["index"])
    with edgeaccel.load(path, executor="litert") as model:
        np.testing.assert_array_equal(model.run(x)[0], expected)


def _mirror_pad_model(path, signature=False):
    """x [1, 4] float -> MIRROR_PAD (REFLECT, paddings [[0, 0], [1, 2]]) -> y [1, 7]; with ``signature``, a
    SignatureDef names them 'values' and 'output_0'."""
    def options(schema):
        o = schema.MirrorPadOptionsT()
        o.mode = schema.MirrorPadMode.REFLECT
        return "MirrorPadOptions", o

    tensors = [("x", [1, 4], "FLOAT32", None), ("paddings", [2, 2], "INT32", np.array([[0, 0], [1, 2]], np.int32)),
               ("y", [1, 7], "FLOAT32", None)]
    return one_op_model(path, "MIRROR_PAD", tensors, [0, 1], [2], [0], [2], options,
                        ({"values": 0}, {"output_0": 2}) if signature else None)


def test_mirror_pad_is_not_read_as_a_split(tmp_path):
    """MirrorPadOptions (union type 77) was taken for SplitVOptions (79): its mode read as num_splits, and every
    MIRROR_PAD (tf.pad with mode REFLECT/SYMMETRIC) was refused as 'declares 0 splits but has 1 outputs'."""
    path = _mirror_pad_model(tmp_path / "mirror_pad.tflite")
    x = np.arange(4, dtype=np.float32)[None]
    with edgeaccel.load(path, executor="litert") as model:
        np.testing.assert_array_equal(model.run(x)[0], [[1, 0, 1, 2, 3, 2, 1]])


def test_string_outputs_come_back_from_the_isolated_worker(tmp_path):
    """A string output is an object array, which the worker's reply could not carry: the worker's reply thread
    died and the caller saw 'killed by SIGKILL'. Strings now travel as bytes with their lengths."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Gather", ["words", "i"], ["picked"]), helper.make_node("Identity", ["words"], ["same"])]
    path = save(nodes, [helper.make_tensor_value_info("words", TensorProto.STRING, [3]),
                        helper.make_tensor_value_info("i", TensorProto.INT64, [2])],
                [helper.make_tensor_value_info("picked", TensorProto.STRING, [2]),
                 helper.make_tensor_value_info("same", TensorProto.STRING, [3])], {}, tmp_path / "strings.onnx")
    words, i = np.array(["alpha", "", "gämma"], dtype=object), np.array([2, 0], np.int64)
    expected = _raw_ort(path, {"words": words, "i": i})
    with edgeaccel.load(path, isolate=True) as model:
        got = model.run([words, i])
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == object and g.shape == e.shape and g.tolist() == e.tolist()


def test_wire_carries_bytes_strings_and_refuses_other_objects():
    import socket

    from edgeaccel.isolation import wire

    a, b = socket.socketpair()
    with a, b:
        arrays = [np.array([b"x", b"", b"\xff\x00"], dtype=object).reshape(1, 3), np.array(b"ab"),
                  np.array(["u", "v"]), np.array(7, np.int64)]
        wire.send_json(a, {"ok": True}, arrays)
        _, got = wire.recv_json(b, 1 << 20)
        assert got[0].dtype == object and got[0].tolist() == [[b"x", b"", b"\xff\x00"]]
        for g, e in zip(got[1:], arrays[1:], strict=True):
            assert g.dtype == e.dtype and g.shape == e.shape and (g == e).all()
        with pytest.raises(TypeError, match="arrays of strings or bytes"):
            wire.send_json(a, {"ok": True}, [np.array([1, "x"], dtype=object)])


def test_openvino_ports_renamed_by_openvino_take_the_ports_no_name_claimed():
    """A spec OpenVINO renamed fell back to its own position, which another spec may have claimed by name:
    two outputs read from one port. And where OpenVINO drops an output (a TFLite model's constant output),
    the error names it."""
    from edgeaccel.errors import ModelLoadError
    from edgeaccel.executors.openvino import OpenVINOExecutor
    from edgeaccel.modelinfo import TensorSpec

    class Port:
        def __init__(self, *names):
            self.names = set(names)

        def get_names(self):
            return self.names

    specs = [TensorSpec(n, (1,), np.dtype(np.float32)) for n in ("a", "b", "c")]
    assert OpenVINOExecutor._match([Port("renamed"), Port("a"), Port("b")], specs) == [1, 2, 0]
    assert OpenVINOExecutor._match([Port("c"), Port("b"), Port("a", "a:0")], specs) == [2, 1, 0]
    with pytest.raises(ModelLoadError, match=r"none for \['c'\]"):
        OpenVINOExecutor._match([Port("a"), Port("b")], specs)


def test_string_inputs_accept_numpy_str_arrays(tmp_path):
    """np.array(["a", "b"]) is how strings are written in numpy (dtype <U1): ONNX Runtime and LiteRT take it,
    edgeaccel refused it ('expects object, got <U1')."""
    from onnx import TensorProto, helper

    path = save([helper.make_node("Identity", ["s"], ["y"])],
                [helper.make_tensor_value_info("s", TensorProto.STRING, [2])],
                [helper.make_tensor_value_info("y", TensorProto.STRING, [2])], {}, tmp_path / "sid.onnx")
    words = np.array(["a", "bé"])
    (expected,) = _raw_ort(path, {"s": words})
    with edgeaccel.load(path) as model:
        assert model.run(words)[0].tolist() == expected.tolist() == ["a", "bé"]


def _batch_conv(path, spatial):
    """x [N, 8, H, W] -> Conv 3x3 (16) -> Relu -> MaxPool 2 -> Conv 1x1 (16) -> GlobalAveragePool: NCHWc code at
    ORT_ENABLE_ALL. ``spatial``: H, W as numbers (only the batch is dynamic) or names."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(1)
    nodes = [helper.make_node("Conv", ["x", "W1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r"]), helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2]),
             helper.make_node("Conv", ["p", "W2"], ["c2"], kernel_shape=[1, 1]),
             helper.make_node("GlobalAveragePool", ["c2"], ["y"])]
    return save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8, *spatial])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16, 1, 1])],
                {"W1": rng.standard_normal((16, 8, 3, 3)).astype(np.float32),
                 "W2": rng.standard_normal((16, 16, 1, 1)).astype(np.float32)}, path)


@pytest.mark.parametrize("spatial, guard", [((12, 12), False), (("H", "W"), True)])
def test_dynamic_models_run_at_ort_default_level(tmp_path, spatial, guard):
    """Every dynamic model ran at ORT_ENABLE_EXTENDED (runtime facts: ALL + a dynamic spatial input smaller than a
    window -> SIGFPE), so its answers differed from a plain InferenceSession's (2.3e-5 on this conv stack;
    tf2onnx conv with a dynamic batch: 1.5e-8). A dynamic batch alone cannot shrink a window's input; a
    dynamic H/W runs at ALL for the sizes a WindowGuard proves safe (tests/test_guards.py: the size that kills
    raw ORT takes an EXTENDED session instead)."""
    path = _batch_conv(tmp_path / "conv.onnx", spatial)
    with edgeaccel.load(path, executor="onnxruntime", cache=False) as model:
        assert model.executor.details["graph_optimization"] == "ORT_ENABLE_ALL"
        assert model.executor.details["window_guard"] is guard
        sizes = [(1, (12, 12)), (3, (12, 12))] + ([(2, (9, 14))] if guard else [])
        for batch, hw in sizes:
            x = np.random.default_rng(batch).standard_normal((batch, 8, *hw)).astype(np.float32)
            (expected,) = _raw_ort(path, {"x": x})
            np.testing.assert_array_equal(model.run(x)[0], expected)


def test_openvino_on_a_tflite_file_named_otherwise_says_why(tmp_path):
    """edgeaccel reads the format from the bytes and LiteRT runs the file under any name; OpenVINO picks its
    TFLite reader by the extension, and refused such a file with only its frontend list."""
    from edgeaccel.errors import ModelLoadError

    path = _mirror_pad_model(tmp_path / "model.bin")
    with edgeaccel.load(path) as model:
        assert model.executor.runtime == "litert"
    with pytest.raises(ModelLoadError) as caught:
        edgeaccel.load(path, executor="openvino", strict=True)
    assert "*.tflite" in caught.value.hint


def _string_gather_model(path):
    """words (string, dynamic length) -> GATHER [0, 0] -> first (string [2])."""
    tensors = [("words", [1], "STRING", None, [-1]), ("idx", [2], "INT32", np.array([0, 0], np.int32)),
               ("first", [2], "STRING", None)]
    return one_op_model(path, "GATHER", tensors, [0, 1], [2], [0], [2],
                        lambda schema: ("GatherOptions", schema.GatherOptionsT()))


def test_dynamic_string_input_takes_a_new_length_on_each_run(tmp_path):
    """LiteRT forgets a string input's shape signature once it is set, so the strict resize edgeaccel used
    refused the second length ('ResizeInputTensorStrict only allows mutating unknown dimensions'), where a
    plain interpreter resizes (a tf.lookup table model: string keys of any count)."""
    path = _string_gather_model(tmp_path / "strings.tflite")
    with edgeaccel.load(path, executor="litert") as model:
        for n in (3, 5, 2):
            words = np.array([b"a", b"b", b"c", b"d", b"e"][:n], dtype=object)
            assert model.run(words)[0].tolist() == [b"a", b"a"]


def test_ir_parameter_of_dynamic_rank_is_unranked(tmp_path):
    """An IR Parameter with shape="..." has a dynamic rank; it was read as one dynamic dimension (rank 1)."""
    ov = pytest.importorskip("openvino")
    from openvino import opset13 as ops

    from edgeaccel.formats import describe

    a = ops.parameter(ov.PartialShape.dynamic(), ov.Type.f32, name="a")
    ov.save_model(ov.Model([ops.relu(a)], [a], "dynamic_rank"), str(tmp_path / "m.xml"))
    (spec,) = describe(tmp_path / "m.xml").inputs
    assert spec.unranked and spec.is_dynamic and spec.shape == ()


def test_flex_model_says_it_needs_the_flex_delegate(tmp_path):
    """A model converted with SELECT_TF_OPS holds Flex custom ops that ai-edge-litert cannot run; the refusal
    said 'the model may be corrupted or need a newer LiteRT'."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    from edgeaccel.errors import UnsupportedModelError

    model = schema.ModelT()
    model.version = 3
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.CUSTOM
    code.customCode = b"FlexMatrixDeterminant"
    model.operatorCodes = [code]
    model.buffers = [schema.BufferT(), schema.BufferT(), schema.BufferT()]
    sg = schema.SubGraphT()
    for name, buffer in (("x", 1), ("det", 2)):
        t = schema.TensorT()
        t.name, t.shape, t.type, t.buffer = name.encode(), [3, 3] if name == "x" else [], 0, buffer
        sg.tensors = [*(sg.tensors or []), t]
    sg.inputs, sg.outputs = [0], [1]
    op = schema.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = 0, [0], [1]
    sg.operators = [op]
    model.subgraphs = [sg]
    builder = flatbuffers.Builder(0)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    path = tmp_path / "flex.tflite"
    path.write_bytes(bytes(builder.Output()))
    with pytest.raises(UnsupportedModelError, match="Flex delegate") as caught:
        edgeaccel.load(path, executor="litert")
    assert "SELECT_TF_OPS" in caught.value.hint


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["onnx", "ir"])
def test_openvino_cache_follows_a_model_rewritten_at_the_same_path(tmp_path, fmt):
    """OpenVINO keys a blob compiled from a path by the path and the second of its modification time: a model
    rewritten at the same path within a second (a script writing models one after another) was answered by
    the previous model's blob."""
    ov = pytest.importorskip("openvino")
    from onnx_models import small_conv

    x = np.ones((1, 3, 16, 16), np.float32)
    source = tmp_path / "m.onnx"
    path = source if fmt == "onnx" else tmp_path / "m.xml"
    answers = []
    for seed in (0, 1):
        small_conv(source, seed=seed)
        if fmt == "ir":
            ov.save_model(ov.convert_model(str(source)), str(path), compress_to_fp16=False)
        (expected,) = _raw_ort(source, {"x": x})
        with edgeaccel.load(path, executor="openvino", cache_dir=tmp_path / "cache") as model:
            answers.append(model.run(x)[0])
        np.testing.assert_allclose(answers[-1], expected, rtol=1e-4, atol=1e-5)
    assert not np.allclose(answers[0], answers[1])


@pytest.mark.parametrize("isolate", [False, True])
def test_tflite_signature_names_reach_inputs_and_outputs(tmp_path, isolate):
    """LiteRT's signature runner names a Keras model's tensors 'keras_tensor' and 'output_0'; the tensors
    themselves are 'serving_default_keras_tensor:0' and 'StatefulPartitionedCall_1:0'. run() took only the
    latter, so a dict keyed as the signature runner keys it, or out['output_0'], failed."""
    from ai_edge_litert.interpreter import Interpreter

    from edgeaccel.errors import InputNameError

    path = _mirror_pad_model(tmp_path / "sig.tflite", signature=True)
    x = np.arange(4, dtype=np.float32)[None]
    expected = Interpreter(model_path=str(path)).get_signature_runner()(values=x)
    with edgeaccel.load(path, executor="litert", isolate=isolate) as model:
        assert [t.name for t in model.inputs] == ["x"] and model.outputs[0].name == "y"
        out = model.run({"values": x})
        np.testing.assert_array_equal(out["output_0"], expected["output_0"])
        np.testing.assert_array_equal(out["y"], out["output_0"])
        assert list(out.as_dict()) == ["y"]
        np.testing.assert_array_equal(model.run({"x": x})[0], expected["output_0"])
        with pytest.raises(InputNameError, match="twice"):
            model.run({"x": x, "values": x})
        with pytest.raises(InputNameError, match="signature name"):
            model.run({"nope": x})


def _declared(path, nodes, output_shape, value_info=(), inits=None):
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(nodes, "declared", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, output_shape)],
                              [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()],
                              value_info=list(value_info))
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), path)
    return path


@pytest.mark.parametrize("case", ["output", "value_info", "output rank"])
def test_declared_shapes_that_inference_contradicts_are_hints(tmp_path, case):
    """A stale declared shape (an output declared [2, 4] for a [2, 3] result, an intermediate declared [2, 5])
    made the strict checker refuse models that ONNX Runtime and OpenVINO run: they take declarations as hints."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Abs", ["h"], ["y"])]
    output, value_info = {"output": ([2, 4], ()), "output rank": ([6], ()),
                          "value_info": ([2, 3], [helper.make_tensor_value_info("h", TensorProto.FLOAT, [2, 5])])}[case]
    path = _declared(tmp_path / "m.onnx", nodes, output, value_info)
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    (expected,) = _raw_ort(path, {"x": x})
    for executor in ("onnxruntime", "openvino"):
        with edgeaccel.load(path, executor=executor) as model:
            np.testing.assert_allclose(model.run(x)[0], expected, rtol=0, atol=1e-7)


def test_other_errors_still_refuse_beside_a_contradicted_declaration(tmp_path):
    from onnx import helper

    from edgeaccel.errors import ModelValidationError

    path = _declared(tmp_path / "m.onnx", [helper.make_node("Add", ["x", "i"], ["y"])], [2, 4],
                     inits={"i": np.ones(3, np.int64)})
    with pytest.raises(ModelValidationError, match="checker refused"):
        edgeaccel.load(path)


def _reshape_to_scalar_model(path):
    """x [1] float -> RESHAPE with a [0]-shaped int32 target (an empty buffer: no elements) -> y, a scalar:
    what the converter writes for tf.reshape(x, [])."""
    tensors = [("x", [1], "FLOAT32", None), ("shape", [0], "INT32", None), ("y", [], "FLOAT32", None)]
    return one_op_model(path, "RESHAPE", tensors, [0, 1], [2], [0], [2])


def test_constant_without_elements_is_a_constant(tmp_path):
    """A [0]-shaped constant has an empty buffer because it has no data (tf.reshape(x, []), tf.zeros([0]) as a
    while loop's start): it was refused as 'neither a model input, a constant with data, nor produced'."""
    path = _reshape_to_scalar_model(tmp_path / "to_scalar.tflite")
    with edgeaccel.load(path, executor="litert") as model:
        got = model.run(np.array([2.5], np.float32))[0]
    assert got.shape == () and got == 2.5


def test_empty_filter_is_still_refused(tmp_path):
    """The allowance above must not let an emptied filter through (fuzz seed 82: OpenVINO SIGFPE)."""
    from tflite_edit import edit, float_fc

    from edgeaccel.errors import ModelValidationError

    def empty_weights(model, schema):
        weights = model.subgraphs[0].tensors[1]
        weights.shape = [3, 0]
        model.buffers[weights.buffer].data = None

    path = edit(float_fc(tmp_path / "fc.tflite"), tmp_path / "fc_empty.tflite", empty_weights)
    with pytest.raises(ModelValidationError, match="empty filter"):
        edgeaccel.load(path)


@pytest.mark.parametrize("isolate", [False, True])
def test_sequence_output_stays_a_list(tmp_path, isolate):
    """An ONNX sequence output is a list of arrays from ONNX Runtime; the isolated worker sent it as one stacked
    array (shape (3, 1, 2) for three (1, 2) items), and repr() of the outputs raised AttributeError."""
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("SplitToSequence", ["x"], ["seq"], axis=0)], "seq",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2])],
                              [helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None)])
    path = tmp_path / "seq.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9), path)
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    (expected,) = _raw_ort(path, {"x": x})
    with edgeaccel.load(path, isolate=isolate) as model:
        out = model.run(x, check_finite=True)
    assert isinstance(out[0], list) and "list of 3" in repr(out)
    for g, e in zip(out[0], expected, strict=True):
        np.testing.assert_array_equal(g, e)


def test_shapeless_input_and_a_contradicted_declaration_together(tmp_path):
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Abs", ["h"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              value_info=[helper.make_tensor_value_info("h", TensorProto.FLOAT, [2, 5])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), path)
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    with edgeaccel.load(path) as model:
        np.testing.assert_array_equal(model.run(x)[0], _raw_ort(path, {"x": x})[0])
