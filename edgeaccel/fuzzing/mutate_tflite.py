"""Structure-aware TFLite mutations: the file stays a valid flatbuffer (it passes LiteRT's verifier), but an
index, shape, buffer, quantization parameter, option or opcode is wrong. These are the mutants that crashed
LiteRT in docs/runtime-facts.md; byte flips rarely produce them.

Uses the object API of ``ai_edge_litert.schema_py_generated`` (``ModelT``) and ``flatbuffers`` to re-pack.
"""

from __future__ import annotations

import math
import random

import numpy as np

INT32_EDGES = (-(2**31), -2, -1, 0, 1, 2, 3, 255, 256, 65535, 2**20, 2**31 - 1)


def mutate(data: bytes, rng: random.Random, count: int | None = None) -> tuple[bytes, list[str]]:
    """Apply 1..3 structural mutations to a .tflite (``count`` to fix it); return the re-packed mutant."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromPackedBuf(data, 0)
    done = []
    for _ in range(count or rng.randint(1, 3)):
        mutator = rng.choice(_MUTATORS)
        try:
            what = mutator(model, rng)
        except (IndexError, ValueError):  # nothing of that kind in this model (no quantization, no options)
            what = None
        if what:
            done.append(what)
    builder = flatbuffers.Builder(len(data) + 4096)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output()), done


def _edge(rng: random.Random, n: int) -> int:
    """An index on an edge for a table of ``n`` entries: -1, n, n+1, a random valid one, or an extreme."""
    return rng.choice((-1, n, n + 1, rng.randrange(max(n, 1)), rng.choice(INT32_EDGES)))


def _sg(model, rng):
    return rng.choice(model.subgraphs)


def _op(model, rng):
    sg = _sg(model, rng)
    return sg, rng.choice(sg.operators)


def _tensor(model, rng):
    sg = _sg(model, rng)
    k = rng.randrange(len(sg.tensors))
    return sg, k, sg.tensors[k]


def _as_list(values) -> list:
    return [] if values is None else [int(v) for v in values]


def op_input(model, rng):
    sg, op = _op(model, rng)
    inputs = _as_list(op.inputs)
    k = rng.randrange(len(inputs))
    inputs[k] = _edge(rng, len(sg.tensors))
    op.inputs = inputs
    return f"operator input {k} = {inputs[k]}"


def op_output(model, rng):
    sg, op = _op(model, rng)
    outputs = _as_list(op.outputs)
    k = rng.randrange(len(outputs))
    outputs[k] = _edge(rng, len(sg.tensors))
    op.outputs = outputs
    return f"operator output {k} = {outputs[k]}"


def op_drop_input(model, rng):
    _, op = _op(model, rng)
    inputs = _as_list(op.inputs)
    del inputs[rng.randrange(len(inputs))]
    op.inputs = inputs
    return f"operator loses an input ({len(inputs)} left)"


def op_add_input(model, rng):
    sg, op = _op(model, rng)
    op.inputs = [*_as_list(op.inputs), rng.choice((-1, rng.randrange(len(sg.tensors))))]
    return f"operator gains input {op.inputs[-1]}"


def op_opcode_index(model, rng):
    _, op = _op(model, rng)
    op.opcodeIndex = rng.choice((len(model.operatorCodes), rng.randrange(len(model.operatorCodes)), 2**31 - 1))
    return f"operator opcode index = {op.opcodeIndex}"


def opcode_builtin(model, rng):
    code = rng.choice(model.operatorCodes)
    new = rng.randrange(0, 210)
    code.builtinCode = new
    code.deprecatedBuiltinCode = min(new, 127)
    return f"opcode becomes builtin {new}"


def op_options(model, rng):
    _, op = _op(model, rng)
    opts = op.builtinOptions
    fields = [k for k, v in vars(opts).items() if isinstance(v, (int, float, np.integer, np.ndarray, list))] \
        if opts is not None else []
    if not fields or rng.random() < 0.15:
        op.builtinOptionsType = rng.randrange(1, 130)
        op.builtinOptions = None
        return f"operator options type = {op.builtinOptionsType}, no options"
    name = rng.choice(fields)
    old = getattr(opts, name)
    if isinstance(old, (np.ndarray, list)):
        values = _as_list(old) or [0]
        values[rng.randrange(len(values))] = rng.choice(INT32_EDGES)
        setattr(opts, name, values)
    elif isinstance(old, float):
        setattr(opts, name, rng.choice((0.0, -1.0, float("nan"), float("inf"), 1e30)))
    elif isinstance(old, bool):
        setattr(opts, name, not old)
    else:
        setattr(opts, name, rng.choice((-1, 0, 2, 3, 7, 127, 255) if _is_byte_field(name) else INT32_EDGES))
    return f"option {type(opts).__name__}.{name} = {getattr(opts, name)}"


def _is_byte_field(name: str) -> bool:
    # enum fields are stored in one byte: the packer refuses values outside -128..127
    return name in ("padding", "fusedActivationFunction", "weightsFormat", "kernelType", "combinerType",
                    "outType", "outputType", "idxOutType", "inDataType", "outDataType", "type", "mode",
                    "quantizedBiasType", "reduceType")


def op_delete(model, rng):
    sg = _sg(model, rng)
    k = rng.randrange(len(sg.operators))
    del sg.operators[k]
    return f"operator {k} deleted"


def op_duplicate(model, rng):
    sg = _sg(model, rng)
    k = rng.randrange(len(sg.operators))
    import copy

    sg.operators.insert(rng.randrange(len(sg.operators) + 1), copy.deepcopy(sg.operators[k]))
    return f"operator {k} duplicated"


def op_swap(model, rng):
    sg = _sg(model, rng)
    a, b = rng.randrange(len(sg.operators)), rng.randrange(len(sg.operators))
    sg.operators[a], sg.operators[b] = sg.operators[b], sg.operators[a]
    return f"operators {a} and {b} swapped"


def tensor_buffer(model, rng):
    _, k, t = _tensor(model, rng)
    empty = [i for i, b in enumerate(model.buffers) if b.data is None or len(b.data) == 0]
    t.buffer = rng.choice((len(model.buffers), rng.randrange(len(model.buffers)), 0, 2**31 - 1,
                           rng.choice(empty) if empty else 0))
    return f"tensor {k} buffer = {t.buffer}"


def tensor_shape(model, rng):
    _, k, t = _tensor(model, rng)
    shape = _as_list(t.shape)
    action = rng.randrange(4)
    if action == 0 and shape:
        shape[rng.randrange(len(shape))] = rng.choice((0, 1, -1, 2, 3, 1000, 65536, 2**31 - 1))
    elif action == 1 and shape:
        del shape[rng.randrange(len(shape))]
    elif action == 2:
        shape.insert(rng.randrange(len(shape) + 1), rng.choice((1, 2, 7)))
    else:
        shape = rng.choice(([], [0], [2**16, 2**16], [1] * 20))
    t.shape = shape
    if rng.random() < 0.5:
        t.shapeSignature = list(shape)
    return f"tensor {k} shape = {shape}"


def tensor_signature(model, rng):
    _, k, t = _tensor(model, rng)
    signature = _as_list(t.shapeSignature if t.shapeSignature is not None else t.shape) or [1]
    signature[rng.randrange(len(signature))] = rng.choice((-1, -1, -2, 0))
    t.shapeSignature = signature
    return f"tensor {k} shape signature = {signature}"


def tensor_type(model, rng):
    _, k, t = _tensor(model, rng)
    t.type = rng.choice((*range(0, 23), 100, 127))
    return f"tensor {k} type = {t.type}"


def tensor_variable(model, rng):
    _, k, t = _tensor(model, rng)
    t.isVariable = not t.isVariable
    return f"tensor {k} variable = {t.isVariable}"


def quant_scale(model, rng):
    t = _quantized_tensor(model, rng)
    n = len(t.quantization.scale)
    value = rng.choice((0.0, -1.0, math.nan, math.inf, 1e30, 1e-30, -0.0))
    if rng.random() < 0.3:
        t.quantization.scale = np.full(rng.choice((1, 2, n + 1, 1000)), value, np.float32)
    else:
        t.quantization.scale = np.array(t.quantization.scale, np.float32)
        t.quantization.scale[rng.randrange(n)] = value
    return f"tensor {_name(t)} scale -> {value} (x{len(t.quantization.scale)})"


def quant_zero_point(model, rng):
    t = _quantized_tensor(model, rng)
    zps = np.array(t.quantization.zeroPoint if t.quantization.zeroPoint is not None else [0], np.int64)
    value = rng.choice((2**31 - 1, -(2**31), 2**40, -1, 256, -129, 65536))
    if len(zps):
        zps[rng.randrange(len(zps))] = value
    t.quantization.zeroPoint = zps if rng.random() < 0.8 else np.zeros(len(zps) + 3, np.int64)
    return f"tensor {_name(t)} zero point -> {value}"


def quant_dimension(model, rng):
    t = _quantized_tensor(model, rng)
    t.quantization.quantizedDimension = rng.choice((-1, 1, 3, 4, 100))
    return f"tensor {_name(t)} quantized dimension = {t.quantization.quantizedDimension}"


def _quantized_tensor(model, rng):
    tensors = [t for sg in model.subgraphs for t in sg.tensors
               if t.quantization is not None and t.quantization.scale is not None and len(t.quantization.scale)]
    return rng.choice(tensors)


def buffer_data(model, rng):
    full = [b for b in model.buffers if b.data is not None and len(b.data)]
    b = rng.choice(full)
    action = rng.randrange(3)
    if action == 0:
        b.data = b.data[: rng.randrange(len(b.data))]
    elif action == 1:
        b.data = None
    else:
        b.data = np.concatenate([b.data, np.zeros(rng.choice((1, 3, 4096)), np.uint8)])
    return f"buffer data resized to {0 if b.data is None else len(b.data)}"


def constant_values(model, rng):
    """An edge value inside a small int32/int64 constant (a reshape target, axes, paddings, perm, block sizes,
    gather indices): structure stays valid, the kernel gets a value it may trust."""
    small = [t for sg in model.subgraphs for t in sg.tensors
             if t.type in (2, 4) and 0 < t.buffer < len(model.buffers) and model.buffers[t.buffer].data is not None
             and 0 < len(model.buffers[t.buffer].data) <= 256]
    t = rng.choice(small)
    buffer = model.buffers[t.buffer]
    dtype = np.int32 if t.type == 2 else np.int64
    values = np.frombuffer(bytes(bytearray(buffer.data)), dtype).copy()
    if not len(values):
        raise ValueError
    k = rng.randrange(len(values))
    values[k] = rng.choice((-2, -1, 0, 1, 7, 65536, 2**31 - 1, -(2**31)))
    buffer.data = np.frombuffer(values.tobytes(), np.uint8)
    return f"constant {_name(t)}[{k}] = {values[k]}"


def subgraph_io(model, rng):
    sg = _sg(model, rng)
    which = rng.choice(("inputs", "outputs"))
    values = _as_list(getattr(sg, which))
    if values and rng.random() < 0.7:
        values[rng.randrange(len(values))] = _edge(rng, len(sg.tensors))
    elif values and rng.random() < 0.5:
        values = []
    else:
        values.append(rng.randrange(len(sg.tensors)))
    setattr(sg, which, values)
    return f"subgraph {which} = {values[:6]}"


def tensor_delete(model, rng):
    sg = _sg(model, rng)
    k = rng.randrange(len(sg.tensors))
    del sg.tensors[k]
    return f"tensor {k} deleted (later indices shift)"


_MUTATORS = (
    op_input, op_input, op_input, op_output, op_drop_input, op_add_input, op_opcode_index, opcode_builtin,
    op_options, op_options, op_delete, op_duplicate, op_swap, tensor_buffer, tensor_buffer, tensor_shape,
    tensor_shape, tensor_signature, tensor_type, tensor_variable, quant_scale, quant_zero_point, quant_dimension,
    buffer_data, buffer_data, subgraph_io, tensor_delete, constant_values, constant_values, constant_values,
)


def _name(t) -> str:
    name = t.name.decode("utf-8", "replace") if isinstance(t.name, bytes) else str(t.name)
    return repr(name[-40:])
