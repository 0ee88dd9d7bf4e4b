"""Rules for single TFLite operators that LiteRT's kernels trust and crash on when they are broken: options of
the right type, split counts, bias slots, operand types, quantization scale ratios, constant reshape targets,
shapes through shape-preserving operators. Each rule names the crash that justified it.

``check`` returns what is wrong with one builtin operator (a phrase that follows its name), or None.
"""

from __future__ import annotations

import math

import numpy as np

from .tflite import CONTROL_FLOW_OPTIONS, TflModel, TflOperator, TflSubgraph, TflTensor, type_name
from .tflite_ops import OPTIONS_TYPE

MAX_RANK = 16
# Integer types whose per-tensor scale divides in the kernels (output multipliers): a zero scale aborts
# LiteRT in Prepare (measured: SIGABRT on a uint8 ADD with scale 0).
SCALED_TYPES = frozenset({3, 9, 7})  # uint8, int8, int16

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

# Fixed-point multipliers LiteRT derives from quantization scales, where a value out of range kills the process
# (measured on movenet by setting one activation's scale, and on small int8 models built for the purpose):
# - quantized ADD checks in Prepare that its output multiplier 2 * max(input scales) / (2**left_shift * output
#   scale) is below 1, and aborts the process when it is not (measured on int8 and int16 ADDs: SIGABRT at 1.1,
#   runs at 0.9; left_shift 20 for int8 and uint8, which share that code, 15 for int16). SUB computes its
#   multipliers otherwise and ran at every ratio tried (1e-6 to 1e8).
# - XNNPACK refuses a quantized CONV_2D / DEPTHWISE_CONV_2D whose requantization scale input * filter / output
#   is 256 or more, and its error path corrupts the heap ("double free or corruption", SIGABRT; measured on
#   movenet at 260-950, runs at 253). No model runs there: LiteRT fails cleanly at best.
# A plain cap on the ratio of scales around an operator refused valid models: random-weight MobileNetV3Small
# and EfficientNetB0 quantized to int8 have activations with scale ~1e-7 next to ~1e-2, and LiteRT runs them.
ADD_LEFT_SHIFT = {3: 20, 9: 20, 7: 15}
MAX_CONV_REQUANTIZATION = 256.0



# Input counts (min, max) and output count of common builtins, as their kernels expect them. The kernels check
# in Prepare, but XNNPACK and the kernels' own setup read the node's inputs before that (fuzz seed 83: a
# QUANTIZE turned STRIDED_SLICE with one input of four -> SIGSEGV in allocate_tensors, in one process of two).
_UNARY = ("ABS", "CEIL", "COS", "DEPTH_TO_SPACE", "DEQUANTIZE", "ELU", "EXP", "FLOOR", "GELU", "HARD_SWISH",
          "L2_NORMALIZATION", "LEAKY_RELU", "LOCAL_RESPONSE_NORMALIZATION", "LOG", "LOG_SOFTMAX", "LOGISTIC",
          "NEG", "QUANTIZE", "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "ROUND", "RSQRT", "SIN",
          "SOFTMAX", "SPACE_TO_DEPTH", "SQRT", "SQUARE", "TANH", "AVERAGE_POOL_2D", "MAX_POOL_2D",
          "L2_POOL_2D", "SQUEEZE", "CAST", "ZEROS_LIKE", "ONES_LIKE", "LOGICAL_NOT", "SIGN")
_BINARY = ("ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE", "POW", "FLOOR_DIV",
           "FLOOR_MOD", "PRELU", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "PAD", "MIRROR_PAD", "MEAN", "SUM",
           "REDUCE_PROD", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_ANY", "REDUCE_ALL", "TRANSPOSE", "BATCH_MATMUL",
           "ARG_MAX", "ARG_MIN", "GATHER", "GATHER_ND", "EXPAND_DIMS", "TILE", "BROADCAST_TO", "FILL", "LESS",
           "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL", "LOGICAL_AND", "LOGICAL_OR")
ARITY: dict[str, tuple[int, int, int | None]] = {
    **{name: (1, 1, 1) for name in _UNARY},
    **{name: (2, 2, 1) for name in _BINARY},
    "CONV_2D": (2, 3, 1), "DEPTHWISE_CONV_2D": (2, 3, 1), "FULLY_CONNECTED": (2, 3, 1),
    "TRANSPOSE_CONV": (3, 4, 1), "RESHAPE": (1, 2, 1), "PADV2": (2, 3, 1), "STRIDED_SLICE": (4, 4, 1),
    "SLICE": (3, 3, 1), "SPLIT": (2, 2, None), "SPLIT_V": (3, 3, None), "SELECT": (3, 3, 1),
    "SELECT_V2": (3, 3, 1), "TOPK_V2": (2, 2, 2), "UNPACK": (1, 1, None), "SHAPE": (1, 1, 1),
    "SPACE_TO_BATCH_ND": (3, 3, 1), "BATCH_TO_SPACE_ND": (3, 3, 1),
    # LSTM: the full kernel takes 20 or 24 inputs and gives 1 output, the basic kernel 5 and 4
    "LSTM": (5, 24, None), "UNIDIRECTIONAL_SEQUENCE_LSTM": (20, 24, 1),
    "VAR_HANDLE": (0, 0, 1), "READ_VARIABLE": (1, 1, 1), "ASSIGN_VARIABLE": (2, 2, 0), "HASHTABLE": (0, 0, 1),
    "HASHTABLE_FIND": (3, 3, 1), "HASHTABLE_IMPORT": (3, 3, 0), "HASHTABLE_SIZE": (1, 1, 1),
}


# Where a variable (state) tensor may be read: the state inputs of the stateful kernels. Elsewhere a kernel
# takes it for a constant or an activation (fuzz seed 85: an LSTM bias marked variable with its buffer
# emptied -> SIGSEGV in LiteRT).
STATE_INPUTS: dict[str, frozenset[int]] = {
    "LSTM": frozenset({18, 19}), "UNIDIRECTIONAL_SEQUENCE_LSTM": frozenset({18, 19}),
    "BIDIRECTIONAL_SEQUENCE_LSTM": frozenset({35, 36, 37, 38}), "SVDF": frozenset({4}), "RNN": frozenset({4}),
    "UNIDIRECTIONAL_SEQUENCE_RNN": frozenset({4}), "BIDIRECTIONAL_SEQUENCE_RNN": frozenset({5, 8}),
}


# LSTM gates: with input-to-input weights present (not CIFG) the kernels read the input gate bias without
# checking it exists (lstm.cc CheckInputTensorDimensions: input_gate_bias->dims). Fuzz seed 99: keras_lstm
# with input 12 = -1 -> SIGSEGV in LiteRT. (input-to-input weights, input gate bias) per direction.
INPUT_GATE: dict[str, tuple[tuple[int, int], ...]] = {
    "LSTM": ((1, 12),), "UNIDIRECTIONAL_SEQUENCE_LSTM": ((1, 12),),
    "BIDIRECTIONAL_SEQUENCE_LSTM": ((1, 12), (18, 29)),
}


# Resource operators take a resource handle first (fuzz seed 91: ASSIGN_VARIABLE handed a uint8 tensor as its
# handle -> SIGSEGV in LiteRT).
RESOURCE_FIRST = frozenset({"READ_VARIABLE", "ASSIGN_VARIABLE", "HASHTABLE_FIND", "HASHTABLE_IMPORT",
                            "HASHTABLE_SIZE"})


# Operators whose output has the type of their first input: data movement copies elements by the input's
# size, and the LSTM writes its output in its input's type (fuzz seed 13: an int8 LSTM's output retyped int32
# -> "free(): invalid pointer", SIGABRT).
TYPE_PRESERVING = frozenset({
    "UNIDIRECTIONAL_SEQUENCE_LSTM", "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "TRANSPOSE", "CONCATENATION",
    "AVERAGE_POOL_2D", "MAX_POOL_2D", "PAD", "PADV2", "MIRROR_PAD", "SPACE_TO_DEPTH", "DEPTH_TO_SPACE", "SLICE",
    "STRIDED_SLICE", "TILE", "BROADCAST_TO", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "RELU", "RELU6",
    "RELU_N1_TO_1", "LEAKY_RELU", "HARD_SWISH", "ABS", "NEG",
})


# The filter (weights) input of the operators that slide or multiply by one.
_FILTERED = {"CONV_2D": 1, "DEPTHWISE_CONV_2D": 1, "CONV_3D": 1, "FULLY_CONNECTED": 1, "TRANSPOSE_CONV": 1,
             "CONV_3D_TRANSPOSE": 1}


def has_data(model: TflModel, t: TflTensor) -> bool:
    return 0 <= t.buffer < len(model.buffer_sizes) and model.buffer_sizes[t.buffer] > 0


def check(model: TflModel, sg: TflSubgraph, op: TflOperator, name: str, data, max_tensor_bytes: int) -> str | None:
    arity = ARITY.get(name)
    if arity is not None:
        low, high, outputs = arity
        if not low <= len(op.inputs) <= high:
            wanted = str(low) if low == high else f"{low} to {high}"
            return f"has {len(op.inputs)} inputs, but {name} takes {wanted}"
        if outputs is not None and len(op.outputs) != outputs:
            return f"has {len(op.outputs)} outputs, but {name} gives {outputs}"
    if name in RESOURCE_FIRST and op.inputs and (op.inputs[0] < 0 or sg.tensors[op.inputs[0]].type != 13):
        return "takes a resource handle first, and its first input is not one"
    problem = _options(name, op.options_type if op.has_options else 0)
    if problem:
        return problem
    states = STATE_INPUTS.get(name, frozenset())
    for pos, i in enumerate(op.inputs):
        if i >= 0 and sg.tensors[i].is_variable and pos not in states:
            return f"reads variable (state) tensor {i} as its input {pos}, which is not a state input"
    for weights, bias in INPUT_GATE.get(name, ()):
        if len(op.inputs) > bias and op.inputs[weights] >= 0 and op.inputs[bias] < 0:
            return f"has input-to-input weights (input {weights}) but no input gate bias (input {bias})"
    if op.num_splits is not None and op.num_splits != len(op.outputs):
        # fuzz: SPLIT with num_splits 1048576 and six outputs -> SIGSEGV in LiteRT
        return f"declares {op.num_splits} splits but has {len(op.outputs)} outputs"
    tensors = sg.tensors
    if name == "DEPTHWISE_CONV_2D" and len(op.inputs) == 2 and op.inputs[0] >= 0 \
            and tensors[op.inputs[0]].type in SCALED_TYPES:
        # measured: a quantized depthwise conv with two inputs (no bias slot at all) -> SIGSEGV in LiteRT;
        # CONV_2D says "has_bias was not true" and a -1 bias fails cleanly
        return "is quantized but has no bias input"
    if name in NUMERIC_ONLY:
        for i in (*op.inputs, *op.outputs):
            if i >= 0 and tensors[i].type in _NON_NUMERIC:
                return f"computes on numbers but tensor {i} is {type_name(tensors[i].type)}"
    if name in TYPE_PRESERVING and op.inputs and op.inputs[0] >= 0:
        first = tensors[op.inputs[0]].type
        for i in op.outputs:
            if tensors[i].type != first:
                return f"turns {type_name(first)} into {type_name(tensors[i].type)}, but keeps its input's type"
    problem = _requantization(sg, op, name)
    if problem:
        return problem
    if name in _FILTERED and len(op.inputs) > _FILTERED[name] and op.inputs[_FILTERED[name]] >= 0 \
            and 0 in tensors[op.inputs[_FILTERED[name]]].shape:
        # fuzz seed 82: a conv filter's shape set to [96, 1, 1, 0] -> OpenVINO dies with SIGFPE
        return f"has an empty filter of shape {list(tensors[op.inputs[_FILTERED[name]]].shape)}"
    if name == "RESHAPE" and len(op.inputs) > 1 and op.inputs[1] >= 0:
        problem = _reshape_target(model, tensors[op.inputs[1]], data, max_tensor_bytes)
        if problem:
            return problem
    if name in SHAPE_PRESERVING and op.inputs and op.outputs and op.inputs[0] >= 0:
        return _same_shape(tensors[op.inputs[0]], tensors[op.outputs[0]])
    return None


def _options(name: str, options_type: int) -> str | None:
    """An options table of another operator's type is read as this operator's parameters, or as none: the
    file was corrupted (converters write the right type, or none for all-default options). Fuzz: SPLIT given
    CONCATENATION's options crashed LiteRT with SIGSEGV."""
    wanted = OPTIONS_TYPE.get(name)
    if options_type and wanted is not None and options_type != wanted:
        return f"carries options of type {options_type}, but {name} takes type {wanted}"
    if not options_type and name in OPTIONS_REQUIRED:
        extra = ", so it names no subgraph" if name in CONTROL_FLOW_OPTIONS else ""
        return f"lacks its options{extra}"
    return None


def _activation_scale(sg: TflSubgraph, i: int, types=SCALED_TYPES) -> float | None:
    """The per-tensor scale of quantized tensor ``i``, else None."""
    if i < 0:
        return None
    t = sg.tensors[i]
    q = t.quantization
    if t.type in types and q is not None and len(q.scale) == 1 and q.scale[0] > 0:
        return q.scale[0]
    return None


def _requantization(sg: TflSubgraph, op: TflOperator, name: str) -> str | None:
    if name == "ADD" and len(op.inputs) == 2 and len(op.outputs) == 1:
        out = sg.tensors[op.outputs[0]]
        shift = ADD_LEFT_SHIFT.get(out.type)
        a, b, c = (_activation_scale(sg, i) for i in (*op.inputs, op.outputs[0]))
        if shift is not None and a is not None and b is not None and c is not None:
            multiplier = 2 * max(a, b) / (2**shift * c)
            if multiplier >= 1:
                return (f"has input scales {a:.3g} and {b:.3g} for output scale {c:.3g}: "
                        f"LiteRT's quantized ADD needs an output multiplier below 1 (this one is {multiplier:.3g}) "
                        "and aborts the process otherwise")
    if name in ("CONV_2D", "DEPTHWISE_CONV_2D") and len(op.inputs) >= 2 and op.outputs:
        x, y = (_activation_scale(sg, i, frozenset({3, 9})) for i in (op.inputs[0], op.outputs[0]))
        w = sg.tensors[op.inputs[1]] if op.inputs[1] >= 0 else None
        if x is not None and y is not None and w is not None and w.quantization is not None \
                and len(w.quantization.scale):
            requantization = x * max(w.quantization.scale) / y
            if requantization >= MAX_CONV_REQUANTIZATION:
                return (f"has a requantization scale of {requantization:.3g} (input {x:.3g} x filter "
                        f"{max(w.quantization.scale):.3g} / output {y:.3g}): XNNPACK refuses {name} at "
                        f"{MAX_CONV_REQUANTIZATION:.0f} or more, and LiteRT has crashed on that path")
    return None


def _constant_ints(model: TflModel, t: TflTensor, data) -> np.ndarray | None:
    """The values of an int32/int64 constant, copied out of the file; None when it has none."""
    if data is None or t.type not in (2, 4) or not 0 <= t.buffer < len(model.buffer_ranges):
        return None
    start, size = model.buffer_ranges[t.buffer]
    dtype = np.dtype("<i4") if t.type == 2 else np.dtype("<i8")
    if not size or size % dtype.itemsize:
        return None
    return np.frombuffer(data, dtype, count=size // dtype.itemsize, offset=start).astype(np.int64)


def _reshape_target(model: TflModel, t: TflTensor, data, max_tensor_bytes: int) -> str | None:
    """A constant target shape must be a shape: fuzz: RESHAPE pointed at a 20-value bias vector (negative
    and 5-digit "dimensions") -> SIGSEGV in LiteRT."""
    values = _constant_ints(model, t, data)
    if values is None:
        return None
    if len(t.shape) != 1 or len(values) > MAX_RANK:
        return f"takes a target shape of {len(values)} values in a tensor of shape {list(t.shape)}"
    if (values < -1).any() or (values == -1).sum() > 1:
        return f"target shape {values.tolist()} has a dimension below -1 or more than one -1"
    if math.prod(int(v) for v in values if v > 0) > max_tensor_bytes:
        return f"target shape {values.tolist()} asks for more elements than the size cap"
    return None


def _same_shape(a: TflTensor, b: TflTensor) -> str | None:
    static = -1 not in a.shape_signature and -1 not in b.shape_signature
    if static and tuple(a.shape) != tuple(b.shape):
        return f"maps shape {list(a.shape)} to {list(b.shape)}, but its output has its input's shape"
    return None
