"""Validation before any runtime sees a file. Each refusal is tied to the crash or wrong answer it prevents
(docs/runtime-facts.md or our fuzz campaigns), and every valid shared model still loads and runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import edgeaccel
from conftest import MODELS
from edgeaccel import formats
from edgeaccel.errors import ModelValidationError
from tflite_edit import edit, first_op, float_fc

pytestmark = pytest.mark.shared

CONV_2D, DEPTHWISE_CONV_2D, ADD, SPLIT, WHILE = 3, 4, 0, 49, 119
VALID = sorted(p.name for p in MODELS.glob("*.tflite")
               if not p.name.endswith("_edgetpu.tflite") and p.name != "model_invoking_error.tflite") \
    if MODELS.is_dir() else []
MOBILENET_V1 = MODELS / "mobilenet_v1_0.25_128_quant.tflite"
SPLIT_CONCAT = MODELS / "split_concat.tflite"
LSTM = MODELS / "keras_lstm_mnist_ptq.tflite"
MOVENET = MODELS / "movenet_single_pose_lightning_ptq.tflite"


@pytest.mark.parametrize("name", [*VALID, "mobilenet_v2_1.0_224_quant.onnx", "openvino/mobilenet_v2_1.0_224_quant.xml"])
def test_every_valid_shared_model_passes_validation_loads_and_runs(name):
    with edgeaccel.load(MODELS / name, strict=True) as model:
        outputs = model.run([np.zeros(s.shape, s.dtype) for s in model.inputs])
        assert len(outputs) == len(model.outputs)


def loads_in_litert(path) -> subprocess.CompletedProcess:
    """The raw runtime on the same file, in a child process: what would have happened without validation."""
    code = ("import sys; from ai_edge_litert.interpreter import Interpreter as I; "
            "i = I(model_path=sys.argv[1]); i.allocate_tensors(); i.invoke(); print('ok')")
    return subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60)


def test_optional_bias_absent_is_accepted_as_litert_does(tmp_path):
    # FULLY_CONNECTED reads its bias with GetOptionalInputTensor: -1 there is valid and must not be refused
    path = float_fc(tmp_path / "fc_no_bias.tflite", bias=False)
    assert loads_in_litert(path).returncode == 0
    x = np.array([[1, 2, 3, 4]], np.float32)
    with edgeaccel.load(path, executor="litert", strict=True) as model:
        np.testing.assert_allclose(model.run(x)[0], x @ (np.arange(12, dtype=np.float32).reshape(3, 4) / 10).T,
                                   rtol=1e-6)


def test_absent_bias_on_a_quantized_conv_is_a_clean_runtime_error(tmp_path):
    # The quantized CONV_2D kernel wants its bias after all; it says so cleanly, so validation lets LiteRT
    # decide (refusing -1 there would refuse valid float models) and the error arrives as an edgeaccel one.
    def drop_bias(model, schema):
        _, op = first_op(model, CONV_2D)
        op.inputs = [int(op.inputs[0]), int(op.inputs[1]), -1]

    path = edit(MOBILENET_V1, tmp_path / "no_bias.tflite", drop_bias)
    formats.describe(path)
    raw = loads_in_litert(path)
    assert raw.returncode == 1 and "optional but was expected" in raw.stderr
    with pytest.raises(edgeaccel.EdgeAccelError, match="optional but was expected"):
        edgeaccel.load(path, executor="litert", strict=True)


def _required_input_absent(model, schema):
    _, op = first_op(model, CONV_2D)
    op.inputs = [int(op.inputs[0]), -1, int(op.inputs[2])]  # the filter


def _input_past_the_tensors(model, schema):
    sg, op = first_op(model, DEPTHWISE_CONV_2D)
    op.inputs = [len(sg.tensors) + 5, *[int(i) for i in op.inputs[1:]]]


def _constant_on_empty_buffer(model, schema):
    sg, op = first_op(model, CONV_2D)
    sg.tensors[int(op.inputs[1])].buffer = 0  # the filter now has no data


def _zero_point_int32_max(model, schema):
    sg, op = first_op(model, CONV_2D)
    sg.tensors[int(op.outputs[0])].quantization.zeroPoint = np.array([2**31 - 1], np.int64)


def _zero_scale(model, schema):
    sg, op = first_op(model, CONV_2D)
    sg.tensors[int(op.outputs[0])].quantization.scale = np.array([0.0], np.float32)


def _short_buffer(model, schema):
    sg, op = first_op(model, CONV_2D)
    buffer = model.buffers[sg.tensors[int(op.inputs[1])].buffer]
    buffer.data = buffer.data[: len(buffer.data) // 2]


def _zero_dim_filter(model, schema):
    sg, op = first_op(model, CONV_2D)
    sg.tensors[int(op.inputs[1])].shape = [8, 3, 3, 0]  # fuzz seed 82: OpenVINO SIGFPE (LiteRT refuses)


def _huge_tensor(model, schema):
    sg, op = first_op(model, CONV_2D)
    sg.tensors[int(op.outputs[0])].shape = [1, 65536, 65536, 8]


def _many_large_tensors(model, schema):
    sg = model.subgraphs[0]
    convs = [op for op in sg.operators if op.opcodeIndex == first_op(model, CONV_2D)[1].opcodeIndex]
    for op in convs[:6]:  # 6 x 3 GiB: each under the single-tensor cap, 18 GiB together
        sg.tensors[int(op.outputs[0])].shape = [1, 1024, 1024, 3072]


def _non_utf8_name(model, schema):
    model.subgraphs[0].tensors[int(model.subgraphs[0].outputs[0])].name = b"out\xff\xfe"


def _while_into_missing_subgraph(model, schema):
    code = schema.OperatorCodeT()
    code.builtinCode, code.deprecatedBuiltinCode = WHILE, WHILE
    model.operatorCodes.append(code)
    op = model.subgraphs[0].operators[0]
    op.opcodeIndex = len(model.operatorCodes) - 1
    op.builtinOptionsType = schema.BuiltinOptions.WhileOptions
    op.builtinOptions = schema.WhileOptionsT()
    op.builtinOptions.condSubgraphIndex, op.builtinOptions.bodySubgraphIndex = 0, 7


def _while_without_options(model, schema):
    _while_into_missing_subgraph(model, schema)
    op = model.subgraphs[0].operators[0]
    op.builtinOptionsType, op.builtinOptions = 0, None  # LiteRT then reads subgraph 0: itself


def _while_into_itself(model, schema):
    _while_into_missing_subgraph(model, schema)
    model.subgraphs[0].operators[0].builtinOptions.bodySubgraphIndex = 0


def _reshape_shape_absent(model, schema):
    _, op = first_op(model, schema.BuiltinOperator.RESHAPE)
    op.inputs = [int(op.inputs[0]), -1]


def _concat_becomes_split(model, schema):
    # fuzz: the last CONCATENATION run as SPLIT with ConcatenationOptions -> SIGSEGV in LiteRT
    model.subgraphs[0].operators[2].opcodeIndex = 1


def _split_without_options(model, schema):
    _, op = first_op(model, SPLIT)
    op.builtinOptionsType, op.builtinOptions = 0, None


def _split_options_type_only(model, schema):
    _, op = first_op(model, SPLIT)
    op.builtinOptions = None  # the type stays SplitOptions (fuzz seed 93: SIGSEGV)


def _split_count(model, schema):
    _, op = first_op(model, SPLIT)
    op.builtinOptions.numSplits = 1048576  # fuzz: SIGSEGV


def _output_variable(model, schema):
    sg = model.subgraphs[0]
    sg.tensors[int(sg.operators[-2].outputs[0])].isVariable = True  # fuzz: SOFTMAX output as state, SIGSEGV


def _input_rank_changed(model, schema):
    model.subgraphs[0].tensors[0].shape = [1, 28, 28, 2]  # fuzz: LSTM kernel asserts on the rank, SIGABRT


def _reshape_to_biases(model, schema):
    _, op = first_op(model, schema.BuiltinOperator.RESHAPE)
    op.inputs = [int(op.inputs[0]), 2]  # fuzz: a 20-value int32 bias as the target shape, SIGSEGV


def _unproduced_output(model, schema):
    del model.subgraphs[0].operators[-1]  # the last CONCATENATION: its output is still a model output


def _depthwise_two_inputs(model, schema):
    _, op = first_op(model, DEPTHWISE_CONV_2D)
    op.inputs = [int(op.inputs[0]), int(op.inputs[1])]  # fuzz seed 80: SIGSEGV


def _quantize_to_strided_slice(model, schema):
    code = model.operatorCodes[model.subgraphs[0].operators[0].opcodeIndex]
    code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.STRIDED_SLICE  # fuzz seed 83


def _bias_as_state(model, schema):
    t = model.subgraphs[0].tensors[4]  # std.constant6, a gate bias of the LSTM
    t.isVariable = True
    model.buffers[t.buffer].data = None  # fuzz seed 85: SIGSEGV


def _lstm_output_int32(model, schema):
    model.subgraphs[0].tensors[24].type = schema.TensorType.INT32  # fuzz seed 13: free(): invalid pointer


def _output_on_weights(model, schema):
    model.subgraphs[0].tensors[25].buffer = 12  # fuzz seed 91: the RESHAPE output on a weight buffer, SIGSEGV


def _two_writers(model, schema):
    import copy

    ops = model.subgraphs[0].operators
    ops.insert(4, copy.deepcopy(ops[3]))  # the FULLY_CONNECTED twice


def _assign_without_resource(model, schema):

    code = model.operatorCodes[0]  # fuzz seed 91: the custom op turned ASSIGN_VARIABLE, duplicated: SIGSEGV
    code.builtinCode, code.deprecatedBuiltinCode = schema.BuiltinOperator.ASSIGN_VARIABLE, 127
    ops = model.subgraphs[0].operators
    ops[0].inputs = [0, 0]
    ops[0].outputs = []


def _lstm_output_resource(model, schema):
    model.subgraphs[0].tensors[24].type = schema.TensorType.RESOURCE  # fuzz: SIGSEGV


def _lstm_input_gate_bias_absent(model, schema):
    _, op = first_op(model, schema.BuiltinOperator.UNIDIRECTIONAL_SEQUENCE_LSTM)
    op.inputs = np.array([*op.inputs[:12], -1, *op.inputs[13:]], np.int32)  # fuzz seed 99: with input-to-input weights present, SIGSEGV in LiteRT


def _scale_ratio_high(model, schema):
    model.subgraphs[0].tensors[199].quantization.scale = np.array([1e5], np.float32)  # SIGABRT


def _scale_ratio_low(model, schema):
    model.subgraphs[0].tensors[199].quantization.scale = np.array([1e-7], np.float32)  # double free


def _constant_as_input(model, schema):
    model.subgraphs[0].inputs = [0, 10]  # fuzz: set_tensor into a read-only weight, SIGSEGV


# (edit, words in the refusal, the source model): what LiteRT does to these files is in docs/runtime-facts.md
# (SIGSEGV on -1 / out-of-range inputs and empty buffers, SIGABRT on INT32_MAX zero points) and in the
# fuzz campaigns (SIGABRT on a zero scale, UnicodeDecodeError on names, unbounded recursion on WHILE 0).
REFUSED = {
    "required input -1": (_required_input_absent, "input 1 is absent", MOBILENET_V1),
    "input index past the tensors": (_input_past_the_tensors, "refers to tensor", MOBILENET_V1),
    "constant on an empty buffer": (_constant_on_empty_buffer, "neither a model input, a constant", MOBILENET_V1),
    "zero point INT32_MAX": (_zero_point_int32_max, "zero point outside", MOBILENET_V1),
    "zero scale": (_zero_scale, "scale 0", MOBILENET_V1),
    "buffer shorter than the shape": (_short_buffer, "holds", MOBILENET_V1),
    "filter shape with a 0 over its data": (_zero_dim_filter, "holds", MOBILENET_V1),
    "huge declared tensor": (_huge_tensor, "GiB", MOBILENET_V1),
    "many large declared tensors": (_many_large_tensors, "in all", MOBILENET_V1),
    "non-UTF-8 tensor name": (_non_utf8_name, "UTF-8", SPLIT_CONCAT),
    "WHILE into a missing subgraph": (_while_into_missing_subgraph, "runs subgraph 7", SPLIT_CONCAT),
    "WHILE without options": (_while_without_options, "lacks its options", SPLIT_CONCAT),
    "WHILE into itself": (_while_into_itself, "recursion", SPLIT_CONCAT),
    "RESHAPE shape input -1": (_reshape_shape_absent, "input 1 is absent", MODELS / "keras_lstm_mnist_ptq.tflite"),
    "options of another operator": (_concat_becomes_split, "carries options of type", SPLIT_CONCAT),
    "SPLIT without options": (_split_without_options, "lacks its options", SPLIT_CONCAT),
    "SPLIT with an options type but no table": (_split_options_type_only, "lacks its options", SPLIT_CONCAT),
    "SPLIT count differs from its outputs": (_split_count, "splits but has 6 outputs", SPLIT_CONCAT),
    "operator output marked variable": (_output_variable, "marked variable", LSTM),
    "input rank edited after conversion": (_input_rank_changed, "maps shape", LSTM),
    "constant listed as a model input": (_constant_as_input, "is a constant with data", LSTM),
    "RESHAPE to a vector of biases": (_reshape_to_biases, "target shape", LSTM),
    "output that nothing produces": (_unproduced_output, "produced by no operator", SPLIT_CONCAT),
    "LSTM output retyped to a resource": (_lstm_output_resource, "computes on numbers", LSTM),
    "QUANTIZE turned STRIDED_SLICE": (_quantize_to_strided_slice, "has 1 inputs, but STRIDED_SLICE takes 4", LSTM),
    "LSTM bias marked variable, buffer emptied": (_bias_as_state, "not a state input", LSTM),
    "operator output on a weight buffer": (_output_on_weights, "is a constant with data", LSTM),
    "int8 LSTM with an int32 output": (_lstm_output_int32, "keeps its input's type", LSTM),
    "LSTM input gate bias -1 beside input weights": (_lstm_input_gate_bias_absent, "no input gate bias", LSTM),
    "tensor written by two operators": (_two_writers, "writes too", LSTM),
    "ASSIGN_VARIABLE without a resource": (_assign_without_resource, "resource handle", MODELS / "model_invoking_error.tflite"),
    "quantized depthwise conv without a bias slot": (_depthwise_two_inputs, "no bias input", MOBILENET_V1),
    "activation scale 1e5 among 0.04s": (_scale_ratio_high, "output multiplier below 1", MOVENET),
    "activation scale 1e-7 among 0.04s": (_scale_ratio_low, "requantization scale", MOVENET),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_broken_tflite_is_refused_before_any_runtime(case, tmp_path):
    change, words, source = REFUSED[case]
    path = edit(source, tmp_path / "broken.tflite", change)
    with pytest.raises(ModelValidationError, match=words) as err:
        edgeaccel.load(path)
    assert err.value.hint


def test_zero_scale_really_crashes_litert(tmp_path):
    """The check is not hypothetical: the raw runtime dies on this file (SIGABRT in Prepare)."""
    def zero_scale_on_add(model, schema):
        sg, op = first_op(model, ADD)
        sg.tensors[int(op.outputs[0])].quantization.scale = np.array([0.0], np.float32)

    path = edit(MODELS / "deeplabv3_mnv2_dm05_pascal_quant.tflite", tmp_path / "z.tflite", zero_scale_on_add)
    assert loads_in_litert(path).returncode < 0
    with pytest.raises(ModelValidationError, match="scale 0"):
        formats.describe(path)


# -- ONNX external data ---------------------------------------------------------------------------------------
def _external_model(folder, location="weights.bin"):
    """The zoo MLP with its initializers stored as external data at ``location``."""
    import onnx

    from edgeaccel.fuzzing import onnx_zoo

    folder.mkdir(parents=True, exist_ok=True)
    model = onnx_zoo.mlp()
    onnx.save_model(model, str(folder / "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    if location != "weights.bin":
        model = onnx.load(str(folder / "m.onnx"), load_external_data=False)
        for init in model.graph.initializer:
            for entry in init.external_data:
                if entry.key == "location":
                    entry.value = location
        onnx.save_model(model, str(folder / "m.onnx"))
    return folder / "m.onnx"


@pytest.mark.parametrize("executor", ["onnxruntime", "openvino"])
def test_external_data_inside_the_folder_loads(tmp_path, executor):
    path = _external_model(tmp_path / "model")
    info = formats.describe(path)
    assert info.extra_files == ((tmp_path / "model" / "weights.bin").resolve(),)
    with edgeaccel.load(path, executor=executor, strict=True) as model:
        out = model.run(np.ones((2, 16), np.float32))[0]
        assert out.shape == (2, 5) and np.allclose(out.sum(axis=1), 1, atol=1e-5)


def test_external_data_escapes_are_refused(tmp_path):
    model_dir = tmp_path / "model"
    path = _external_model(model_dir)
    outside = tmp_path / "weights.bin"
    shutil.copy(model_dir / "weights.bin", outside)
    for location in ("../weights.bin", str(outside), "sub/../../weights.bin"):
        _external_model(model_dir, location)
        with pytest.raises(ModelValidationError, match="leaves the model's folder"):
            edgeaccel.load(path)
    os.symlink(outside, model_dir / "link.bin")
    _external_model(model_dir, "link.bin")
    with pytest.raises(ModelValidationError, match="outside"):
        edgeaccel.load(path)
    _external_model(model_dir, "missing.bin")
    with pytest.raises(ModelValidationError, match="missing"):
        edgeaccel.load(path)


def test_onnx_conv_with_one_input_is_refused_before_openvino(tmp_path):
    """runtime facts: OpenVINO's read_model segfaults on a Conv with one input; the full checker refuses it."""
    import onnx

    from edgeaccel.fuzzing import onnx_zoo

    model = onnx_zoo.conv_dynamic()
    del model.graph.node[0].input[1:]
    onnx.save(model, str(tmp_path / "conv1.onnx"))
    with pytest.raises(ModelValidationError, match="checker|reads"):
        edgeaccel.load(tmp_path / "conv1.onnx", executor="openvino")


# -- OpenVINO IR ------------------------------------------------------------------------------------------------
def test_ir_constant_size_must_match_its_shape(tmp_path):
    xml = (MODELS / "openvino/mobilenet_v2_1.0_224_quant.xml").read_text()
    start = xml.index('size="') + len('size="')
    end = xml.index('"', start)
    (tmp_path / "m.xml").write_text(xml[:start] + str(int(xml[start:end]) + 4) + xml[end:])
    shutil.copy(MODELS / "openvino/mobilenet_v2_1.0_224_quant.bin", tmp_path / "m.bin")
    with pytest.raises(ModelValidationError, match="needs .* bytes but the XML gives it|reads bytes"):
        formats.describe(tmp_path / "m.xml")


def test_onnx_constant_that_asks_for_gigabytes_is_refused(tmp_path):
    """ConstantOfShape([100000, 100000]) passes onnx.checker; ORT and OpenVINO then try to allocate 37 GiB at
    load (measured under a 6 GiB RLIMIT_AS: both fail; without one the OOM killer decides)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("ConstantOfShape", ["s"], ["c"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])),
             helper.make_node("ReduceSum", ["c"], ["r"], keepdims=0), helper.make_node("Add", ["x", "r"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
                              initializer=[numpy_helper.from_array(np.array([100000, 100000], np.int64), "s")])
    model = helper.make_model(graph, ir_version=9, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)  # the checker alone lets it through
    onnx.save(model, str(tmp_path / "big.onnx"))
    with pytest.raises(ModelValidationError, match="37.3 GiB"):
        edgeaccel.load(tmp_path / "big.onnx")
