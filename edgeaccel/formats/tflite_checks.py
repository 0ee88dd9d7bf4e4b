"""Semantic checks on a parsed TFLite model, for what LiteRT's flatbuffer verifier lets through and then
crashes on (docs/runtime-facts.md): indices out of range, -1 on a required operator input, a constant pointed
at an empty or short buffer, absurd quantization, declared sizes that would exhaust memory, control flow
into missing or recursive subgraphs. Rules for particular operators live in tflite_op_rules.py.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ModelValidationError
from . import tflite_op_rules
from .tflite import TENSOR_TYPES, TflModel, TflSubgraph, TflTensor, type_name
from .tflite_op_rules import MAX_RANK
from .tflite_op_rules import SCALED_TYPES as _SCALED_TYPES
from .tflite_op_rules import has_data as _has_data

DEFAULT_MAX_TENSOR_BYTES = 4 << 30  # a single declared tensor above 4 GiB is not an edge model
# All declared tensors of a subgraph together (the shared models declare at most 31 MB): LiteRT plans one
# arena from these, and a file that declares many tensors just under the single cap would otherwise
# grow the process until the OOM killer ends it (runtime facts: huge declared tensors).
DEFAULT_MAX_TOTAL_BYTES = 16 << 30

# Operator inputs that LiteRT kernels read with GetOptionalInputTensor (index -1 means "absent"), from the
# kernels in tensorflow/lite/kernels (conv.cc, depthwise_conv.cc, fully_connected.cc, transpose_conv.cc,
# conv3d*.cc, svdf.cc, pad.cc, lstm_shared.h, bidirectional_sequence_*.cc; not reshape.cc or lsh_projection.cc,
# which read their last input with GetInput).
# Every other input of a builtin must be present: a kernel that reads a required -1 dereferences tensor -1
# (runtime facts: SIGSEGV in allocate_tensors). Too lenient here means a crash; too strict means a valid model
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
    written: dict[int, int] = {}  # tensor -> the operator that writes it
    for o_index, op in enumerate(sg.operators):
        if not 0 <= op.opcode_index < len(model.opcodes):
            _fail(f"{where} operator {o_index} uses opcode {op.opcode_index} of {len(model.opcodes)}")
        name = model.opcodes[op.opcode_index]
        custom = op.opcode_index in model.custom_opcodes
        optional = OPTIONAL_INPUTS.get(name, frozenset())
        what = f"{where} operator {o_index} ({name})"
        for pos, i in enumerate(op.inputs):
            if i == -1:
                if not custom and pos not in optional:
                    _fail(f"{what} input {pos} is absent (-1) but {name} requires it")
                continue
            if not 0 <= i < n:
                _fail(f"{what} input {pos} refers to tensor {i}, but there are {n} tensors")
            if i not in produced and not custom and not _has_data(model, sg.tensors[i]) \
                    and not _zero_elements(sg.tensors[i]):
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
            if _has_data(model, sg.tensors[i]):
                # constants are mapped read-only from the file (fuzz seed 91: a RESHAPE output pointed at a
                # weight buffer -> SIGSEGV when LiteRT writes it)
                _fail(f"{what} writes tensor {i} ({sg.tensors[i].name!r}), which is a constant with data")
            if i in written:
                # one writer per tensor: a second one overwrites the first's result (a wrong answer) and the
                # memory planner assumes one (fuzz seed 91: a duplicated operator in a crashing mutant)
                _fail(f"{what} writes tensor {i} ({sg.tensors[i].name!r}), which operator {written[i]} writes too")
            written[i] = o_index
        if not custom:
            problem = tflite_op_rules.check(model, sg, op, name, data, max_tensor_bytes)
            if problem:
                _fail(f"{what} {problem}")
        produced.update(op.outputs)
        produced.update(op.intermediates)
    for i in sg.outputs:
        if i not in produced and not _has_data(model, sg.tensors[i]):
            # nothing writes it: LiteRT hands back uninitialised memory, or for a string tensor no memory at all
            # (fuzz: a model whose only operator was deleted -> SIGSEGV in get_tensor)
            _fail(f"{where} output {i} ({sg.tensors[i].name!r}) is produced by no operator")


def _zero_elements(t: TflTensor) -> bool:
    """A constant with no elements (a [0]-shaped reshape target for a scalar, tf.zeros([0]) as a WHILE loop's
    initial value) has an empty buffer because it has no data: the converter writes it so and LiteRT runs it."""
    return 0 in t.shape and -1 not in t.shape_signature and not t.is_variable


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
    # A constant's buffer holds exactly its shape's bytes in every converter output we have (1,000+ constants
    # in the shared models). Shorter: kernels read past it. Longer: the shape was edited (fuzz seed 82: a
    # conv filter's shape set to [96, 1, 1, 0] over its 96-byte buffer -> OpenVINO dies with SIGFPE).
    # Sub-byte types may be stored packed or not, so only shorter is refused for them.
    exact = t.type not in _SUB_BYTE_BITS
    if data and not t.sparse and t.type not in (5, 13, 14) and (data < nbytes or exact and data != nbytes):
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
