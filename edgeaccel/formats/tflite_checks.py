"""Semantic checks on a parsed TFLite model, for what LiteRT's flatbuffer verifier lets through and then
crashes on (../shared/FINDINGS.md): indices out of range, -1 on a required operator input, a constant pointed
at an empty or short buffer, absurd quantization, and declared sizes that would exhaust memory.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ModelValidationError
from .tflite import CONTROL_FLOW_OPTIONS, TENSOR_TYPES, TflModel, TflSubgraph, TflTensor, type_name
from .tflite_ops import OPTIONS_TYPE

MAX_RANK = 16
DEFAULT_MAX_TENSOR_BYTES = 4 << 30  # a single declared tensor above 4 GiB is not an edge model
# All declared tensors of a subgraph together (the shared models declare at most 31 MB): LiteRT plans one
# arena from these, and a file that declares many tensors just under the single cap would otherwise
# grow the process until the OOM killer ends it (FINDINGS: huge declared tensors).
DEFAULT_MAX_TOTAL_BYTES = 16 << 30

# Operator inputs that LiteRT kernels read with GetOptionalInputTensor (index -1 means "absent"), from the
# kernels in tensorflow/lite/kernels (conv.cc, depthwise_conv.cc, fully_connected.cc, transpose_conv.cc,
# conv3d*.cc, svdf.cc, lsh_projection.cc, pad.cc, reshape.cc, lstm_shared.h, bidirectional_sequence_*.cc).
# Every other input of a builtin must be present: a kernel that reads a required -1 dereferences tensor -1
# (FINDINGS: SIGSEGV in allocate_tensors). Too lenient here means a crash; too strict means a valid model
# refused, so each entry follows the kernel's own "// Optional" markers.
_BIAS_2 = frozenset({2})
# LSTM (lstm_shared.h): input-to-input and recurrent-to-input weights (CIFG), peepholes 9-11, input gate bias,
# projection 16-17 and the layer-norm coefficients 20-23 are optional; the input, the forget/cell/output
# weights and biases and the two state tensors are not.
_LSTM_OPTIONAL = frozenset({1, 5, 9, 10, 11, 12, 16, 17, 20, 21, 22, 23})
OPTIONAL_INPUTS: dict[str, frozenset[int]] = {
    "CONV_2D": _BIAS_2,
    "DEPTHWISE_CONV_2D": _BIAS_2,
    "FULLY_CONNECTED": _BIAS_2,
    "CONV_3D": _BIAS_2,
    "TRANSPOSE_CONV": frozenset({3}),
    "CONV_3D_TRANSPOSE": frozenset({3}),
    "SVDF": frozenset({3}),
    "PADV2": _BIAS_2,  # constant_values
    # Not RESHAPE: its kernel reads a second input with GetInput, so a -1 there is dereferenced (fuzz: SIGSEGV
    # on keras_lstm with RESHAPE input 1 = -1). A reshape without a shape tensor has one input, not a -1.
    "LSTM": _LSTM_OPTIONAL,
    "UNIDIRECTIONAL_SEQUENCE_LSTM": _LSTM_OPTIONAL,
    # forward 1-17, backward 18-34 (same layout shifted by 17), states 35-38, aux input and weights 39-47
    "BIDIRECTIONAL_SEQUENCE_LSTM": _LSTM_OPTIONAL - {20, 21, 22, 23} | {i + 17 for i in _LSTM_OPTIONAL if i < 18}
    | frozenset(range(39, 48)),
    # aux input and the forward/backward aux weights
    "BIDIRECTIONAL_SEQUENCE_RNN": frozenset({12, 13, 14}),
}
# Operators that LiteRT runs with zeroed parameters when their options table is absent, and crashes on
# (measured by stripping each operator's options in the shared models: SPLIT dies with SIGSEGV; CONV_2D,
# pools, PACK, ARG_MAX and others fail cleanly; ADD, MUL, SOFTMAX, MEAN run with defaults).
OPTIONS_REQUIRED = frozenset({"SPLIT", "SPLIT_V", *CONTROL_FLOW_OPTIONS})

# Operators whose output has the shape of their first input. A file whose declared shapes disagree across one
# of them was edited after conversion, and kernels further on assert on ranks instead of failing cleanly
# (fuzz: keras_lstm with its input declared rank 4 -> QUANTIZE -> the LSTM kernel aborts with SIGABRT).
SHAPE_PRESERVING = frozenset({
    "QUANTIZE", "DEQUANTIZE", "LOGISTIC", "TANH", "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "ELU",
    "LEAKY_RELU", "HARD_SWISH", "GELU", "ABS", "NEG", "EXP", "LOG", "SQRT", "RSQRT", "SQUARE", "SIN", "COS",
    "FLOOR", "CEIL", "ROUND", "SIGN", "CAST", "SOFTMAX", "LOG_SOFTMAX", "L2_NORMALIZATION",
    "LOCAL_RESPONSE_NORMALIZATION", "ZEROS_LIKE", "ONES_LIKE", "LOGICAL_NOT",
})

# Operators that only compute on numbers: a string, resource or variant tensor among their inputs or outputs is a
# corrupted file (fuzz: the LSTM's output retyped to RESOURCE, VARIANT or STRING -> SIGSEGV in LiteRT).
NUMERIC_ONLY = frozenset({
    "CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "CONV_3D", "CONV_3D_TRANSPOSE", "FULLY_CONNECTED",
    "BATCH_MATMUL", "LSTM", "UNIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM", "RNN",
    "UNIDIRECTIONAL_SEQUENCE_RNN", "BIDIRECTIONAL_SEQUENCE_RNN", "SVDF", "ADD", "SUB", "MUL", "DIV",
    "SQUARED_DIFFERENCE", "AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D", "SOFTMAX", "LOG_SOFTMAX", "LOGISTIC",
    "TANH", "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "HARD_SWISH", "LEAKY_RELU", "PRELU", "ELU", "GELU",
    "QUANTIZE", "DEQUANTIZE", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "MEAN", "SUM", "REDUCE_PROD",
    "REDUCE_MAX", "REDUCE_MIN", "ARG_MAX", "ARG_MIN", "EXP", "LOG", "SQRT", "RSQRT", "POW", "ABS", "NEG",
    "FLOOR_DIV", "FLOOR_MOD", "MINIMUM", "MAXIMUM", "L2_NORMALIZATION", "LOCAL_RESPONSE_NORMALIZATION",
    "CUMSUM", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "PAD", "PADV2", "MIRROR_PAD",
})
_NON_NUMERIC = frozenset({5, 13, 14})  # string, resource, variant

# Per-tensor scales of the integer activations around one operator: LiteRT derives fixed-point multipliers
# from their ratios and aborts, or corrupts its heap, when a ratio is absurd (measured on movenet: one
# activation's scale set to 1e5 -> SIGABRT, to 1e-7 -> "double free or corruption"; the shared models' largest
# ratio is 489, this cap is 134 times that).
MAX_SCALE_RATIO = 2.0**16

# Integer types whose per-tensor scale divides in the kernels (output multipliers): a zero scale aborts
# LiteRT in Prepare (measured: SIGABRT on a uint8 ADD with scale 0).
_SCALED_TYPES = frozenset({3, 9, 7})  # uint8, int8, int16
_ZERO_POINT_RANGE = {3: (0, 255), 9: (-128, 127), 7: (-32768, 32767), 16: (0, 65535)}
_SUB_BYTE_BITS = {17: 4, 19: 2, 20: 4}


def check(model: TflModel, max_tensor_bytes: int = DEFAULT_MAX_TENSOR_BYTES, data=None) -> None:
    """Raise ModelValidationError naming the first problem found; return None for a sound model.

    data: the file's bytes, for the checks that read constant values (a RESHAPE's target shape)."""
    for i, (start, size) in enumerate(model.buffer_ranges):
        if size and start + size > model.file_size:
            _fail(f"buffer {i} claims {size} bytes at offset {start}, past the end of the {model.file_size}-byte file")
    for s, sg in enumerate(model.subgraphs):
        _check_subgraph(model, s, sg, max_tensor_bytes, data)
    _check_subgraph_calls(model)


def _fail(message: str) -> None:
    raise ModelValidationError(
        f"TFLite model is malformed: {message}",
        hint="the file is corrupted or was produced by a broken tool; it was refused before any runtime read it",
    )


def _check_subgraph(model: TflModel, s: int, sg: TflSubgraph, max_tensor_bytes: int, data=None) -> None:
    n = len(sg.tensors)
    where = f"subgraph {s}"
    for kind, indices in (("input", sg.inputs), ("output", sg.outputs)):
        for i in indices:
            if not 0 <= i < n:
                _fail(f"{where} {kind} refers to tensor {i}, but there are {n} tensors")
    for i in sg.inputs:
        if _has_data(model, sg.tensors[i]):
            # LiteRT maps constants read-only from the file: feeding one as an input writes into that mapping
            # (fuzz: keras_lstm with a weight tensor listed as a model input -> SIGSEGV in set_tensor)
            _fail(f"{where} input {i} ({sg.tensors[i].name!r}) is a constant with data, not a tensor to feed")
    total = 0
    for t_index, t in enumerate(sg.tensors):
        total += _check_tensor(model, f"{where} tensor {t_index} ({t.name!r})", t, max_tensor_bytes)
    if total > DEFAULT_MAX_TOTAL_BYTES:
        _fail(f"{where} declares {total / 2**30:.1f} GiB of tensors in all, above the "
              f"{DEFAULT_MAX_TOTAL_BYTES >> 30} GiB cap")

    produced = set(sg.inputs) | {i for i, t in enumerate(sg.tensors) if t.is_variable}
    for o_index, op in enumerate(sg.operators):
        if not 0 <= op.opcode_index < len(model.opcodes):
            _fail(f"{where} operator {o_index} uses opcode {op.opcode_index} of {len(model.opcodes)}")
        name = model.opcodes[op.opcode_index]
        custom = op.opcode_index in model.custom_opcodes
        optional = OPTIONAL_INPUTS.get(name, frozenset())
        what = f"{where} operator {o_index} ({name})"
        if not custom:
            _check_options(what, name, op.options_type)
            if op.num_splits is not None and op.num_splits != len(op.outputs):
                # fuzz: SPLIT with num_splits 1048576 and one output -> SIGSEGV in LiteRT
                _fail(f"{what} declares {op.num_splits} splits but has {len(op.outputs)} outputs")
        for pos, i in enumerate(op.inputs):
            if i == -1:
                if not custom and pos not in optional:
                    _fail(f"{what} input {pos} is absent (-1) but {name} requires it")
                continue
            if not 0 <= i < n:
                _fail(f"{what} input {pos} refers to tensor {i}, but there are {n} tensors")
            if i not in produced and not custom and not _has_data(model, sg.tensors[i]):
                _fail(
                    f"{what} input {pos} reads tensor {i} ({sg.tensors[i].name!r}), which is neither a model "
                    "input, a constant with data, nor produced by an earlier operator"
                )
        for pos, i in enumerate((*op.outputs, *op.intermediates)):
            if not 0 <= i < n:
                _fail(f"{what} output {pos} refers to tensor {i}, but there are {n} tensors")
        for i in op.outputs:
            if sg.tensors[i].is_variable:
                # variable tensors are state that stateful ops update in place (LSTM, SVDF); as an ordinary
                # output one crashes LiteRT (fuzz: SOFTMAX output marked variable -> SIGSEGV)
                _fail(f"{what} writes tensor {i} ({sg.tensors[i].name!r}), which is marked variable (state)")
        if name == "DEPTHWISE_CONV_2D" and len(op.inputs) == 2 and op.inputs[0] >= 0 \
                and sg.tensors[op.inputs[0]].type in _SCALED_TYPES:
            # measured: a quantized depthwise conv with two inputs (no bias slot at all) -> SIGSEGV in LiteRT;
            # CONV_2D says "has_bias was not true" and a -1 bias fails cleanly
            _fail(f"{what} is quantized but has no bias input")
        if name in NUMERIC_ONLY:
            for i in (*op.inputs, *op.outputs):
                if i >= 0 and sg.tensors[i].type in _NON_NUMERIC:
                    _fail(f"{what} computes on numbers but tensor {i} is {type_name(sg.tensors[i].type)}")
        if not custom:
            _check_scale_ratio(model, what, sg, op)
        if name == "RESHAPE" and len(op.inputs) > 1 and op.inputs[1] >= 0:
            _check_reshape_target(model, what, sg.tensors[op.inputs[1]], data, max_tensor_bytes)
        if name in SHAPE_PRESERVING and op.inputs and op.outputs and op.inputs[0] >= 0 and not custom:
            _check_same_shape(what, sg.tensors[op.inputs[0]], sg.tensors[op.outputs[0]])
        produced.update(op.outputs)
        produced.update(op.intermediates)
    for i in sg.outputs:
        if i not in produced and not _has_data(model, sg.tensors[i]):
            # nothing writes it: LiteRT hands back uninitialised memory, or for a string tensor no memory at all
            # (fuzz: a model whose only operator was deleted -> SIGSEGV in get_tensor)
            _fail(f"{where} output {i} ({sg.tensors[i].name!r}) is produced by no operator")


def _check_scale_ratio(model: TflModel, what: str, sg: TflSubgraph, op) -> None:
    scales = []
    for i in (*op.inputs, *op.outputs):
        if i < 0:
            continue
        t = sg.tensors[i]
        q = t.quantization
        if t.type in _SCALED_TYPES and q is not None and len(q.scale) == 1 and q.scale[0] > 0 \
                and not _has_data(model, t):
            scales.append(q.scale[0])
    if len(scales) > 1 and max(scales) / min(scales) > MAX_SCALE_RATIO:
        _fail(f"{what} mixes activation scales {min(scales):.3g} and {max(scales):.3g}: a ratio above "
              f"{MAX_SCALE_RATIO:.0f} is not a real quantization")


def _constant_ints(model: TflModel, t: TflTensor, data) -> np.ndarray | None:
    """The values of an int32/int64 constant, copied out of the file; None when it has none."""
    if data is None or t.type not in (2, 4) or not 0 <= t.buffer < len(model.buffer_ranges):
        return None
    start, size = model.buffer_ranges[t.buffer]
    dtype = np.dtype("<i4") if t.type == 2 else np.dtype("<i8")
    if not size or size % dtype.itemsize:
        return None
    return np.frombuffer(data, dtype, count=size // dtype.itemsize, offset=start).astype(np.int64)


def _check_reshape_target(model: TflModel, what: str, t: TflTensor, data, max_tensor_bytes: int) -> None:
    """A constant target shape must be a shape: fuzz: RESHAPE pointed at a 20-value bias vector (negative
    and 5-digit "dimensions") -> SIGSEGV in LiteRT."""
    values = _constant_ints(model, t, data)
    if values is None:
        return
    if len(t.shape) != 1 or len(values) > MAX_RANK:
        _fail(f"{what} takes a target shape of {len(values)} values in a tensor of shape {list(t.shape)}")
    if (values < -1).any() or (values == -1).sum() > 1:
        _fail(f"{what} target shape {values.tolist()} has a dimension below -1 or more than one -1")
    if math.prod(int(v) for v in values if v > 0) > max_tensor_bytes:
        _fail(f"{what} target shape {values.tolist()} asks for more elements than the size cap")


def _check_same_shape(what: str, a: TflTensor, b: TflTensor) -> None:
    static = -1 not in a.shape_signature and -1 not in b.shape_signature
    if static and tuple(a.shape) != tuple(b.shape):
        _fail(f"{what} maps shape {list(a.shape)} to {list(b.shape)}, but its output has its input's shape")


def _check_options(what: str, name: str, options_type: int) -> None:
    """An options table of another operator's type is read as this operator's parameters, or as none: the
    file was corrupted (converters write the right type, or none for all-default options). Fuzz: SPLIT given
    CONCATENATION's options crashed LiteRT with SIGSEGV."""
    wanted = OPTIONS_TYPE.get(name)
    if options_type and wanted is not None and options_type != wanted:
        _fail(f"{what} carries options of type {options_type}, but {name} takes type {wanted}")
    if not options_type and name in OPTIONS_REQUIRED:
        extra = ", so it names no subgraph" if name in CONTROL_FLOW_OPTIONS else ""
        _fail(f"{what} lacks its options{extra}")


def _check_subgraph_calls(model: TflModel) -> None:
    """Subgraph indices of control-flow operators in range, and no subgraph reaching itself: LiteRT has no
    recursion, so a cycle recurses until the stack overflows."""
    n = len(model.subgraphs)
    calls: dict[int, set[int]] = {}
    for s, sg in enumerate(model.subgraphs):
        for o, op in enumerate(sg.operators):
            for ref in op.subgraph_refs:
                if not 0 <= ref < n:
                    _fail(f"subgraph {s} operator {o} runs subgraph {ref}, but there are {n} subgraphs")
                calls.setdefault(s, set()).add(ref)
    state: dict[int, int] = {}  # 1: on the current path, 2: done

    def visit(s: int) -> None:
        state[s] = 1
        for t in calls.get(s, ()):
            if state.get(t) == 1:
                _fail(f"subgraph {s} runs subgraph {t}, which leads back to {s} (recursion)")
            if state.get(t) is None:
                visit(t)
        state[s] = 2

    for s in list(calls):
        if s not in state:
            visit(s)


def _has_data(model: TflModel, t: TflTensor) -> bool:
    return 0 <= t.buffer < len(model.buffer_sizes) and model.buffer_sizes[t.buffer] > 0


def _check_tensor(model: TflModel, what: str, t: TflTensor, max_tensor_bytes: int) -> int:
    """Check one tensor; return its declared size in bytes."""
    if t.type not in TENSOR_TYPES:
        _fail(f"{what} has unknown type code {t.type}")
    if not t.name_is_utf8:
        # LiteRT's get_input_details() and OpenVINO's get_names() raise UnicodeDecodeError on such a name
        _fail(f"{what} has a name that is not valid UTF-8")
    if not 0 <= t.buffer < max(len(model.buffer_sizes), 1):  # buffer 0 is the empty sentinel even when absent
        _fail(f"{what} refers to buffer {t.buffer}, but there are {len(model.buffer_sizes)} buffers")
    if len(t.shape) > MAX_RANK or len(t.shape_signature) > MAX_RANK:
        _fail(f"{what} has rank {len(t.shape)}, above {MAX_RANK}")
    if any(d < 0 for d in t.shape):
        _fail(f"{what} has a negative dimension in its shape {list(t.shape)}")
    if any(d < -1 for d in t.shape_signature):
        _fail(f"{what} has a dimension below -1 in its shape signature {list(t.shape_signature)}")
    count = math.prod(t.shape)
    dtype = TENSOR_TYPES[t.type][1]
    bits = _SUB_BYTE_BITS.get(t.type) or (dtype.itemsize * 8 if dtype is not None and dtype.kind != "O" else 8)
    nbytes = (count * bits + 7) // 8
    if nbytes > max_tensor_bytes:
        _fail(f"{what} declares {list(t.shape)} = {nbytes / 2**30:.1f} GiB, above the {max_tensor_bytes >> 20} MiB cap")
    data = model.buffer_sizes[t.buffer] if t.buffer < len(model.buffer_sizes) else 0
    if data and not t.sparse and t.type not in (5, 13, 14) and data < nbytes:
        _fail(f"{what} is a {type_name(t.type)} constant of shape {list(t.shape)} ({nbytes} bytes) "
              f"but its buffer {t.buffer} holds {data}")
    _check_quantization(what, t)
    return nbytes


def _check_quantization(what: str, t: TflTensor) -> None:
    q = t.quantization
    if q is None:
        return
    scales = np.asarray(q.scale, dtype=np.float64)
    if not np.all(np.isfinite(scales)) or np.any(scales < 0):
        _fail(f"{what} has a quantization scale that is negative, NaN or infinite")
    if len(scales) == 1 and t.type in _SCALED_TYPES and scales[0] == 0:
        _fail(f"{what} is {type_name(t.type)} quantized with scale 0")
    if t.zero_points_raw and len(t.zero_points_raw) not in (1, len(q.scale)):
        _fail(f"{what} has {len(q.scale)} scales but {len(t.zero_points_raw)} zero points")
    lo, hi = _ZERO_POINT_RANGE.get(t.type, (-(2**31), 2**31 - 1))
    if any(not lo <= z <= hi for z in t.zero_points_raw):
        _fail(f"{what} is {type_name(t.type)} with a zero point outside [{lo}, {hi}]")
    if len(q.scale) > 1:
        axis = q.axis or 0
        if not 0 <= axis < len(t.shape):
            _fail(f"{what} is quantized per axis {axis} but has rank {len(t.shape)}")
        if t.shape[axis] != len(q.scale):
            _fail(f"{what} has {len(q.scale)} per-axis scales for a dimension of {t.shape[axis]}")
