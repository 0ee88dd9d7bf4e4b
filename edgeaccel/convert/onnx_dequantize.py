"""QDQ ONNX -> float ONNX: recover a float model from a quantized one, to requantize it another way or to have a
float reference when only the quantized model was published.

- DequantizeLinear of a constant (weights, biases) is folded into a float initializer: (q - zero_point) * scale.
- Activation QuantizeLinear -> [Reshape/Transpose/...] -> DequantizeLinear chains are dropped: the float value
  flows straight through (the data-movement ops between them now move floats).
- A DequantizeLinear of a graph input (a uint8 image, say) becomes Cast -> Sub(zero_point) -> Mul(scale): the
  input keeps its integer type, so the same pixels feed the quantized original, this float model and any
  model requantized from it, and the preprocessing the quantized model had built in is kept exactly.
- A QuantizeLinear that produces a graph output is dropped: the output becomes the float value.

The weights are the quantized ones dequantized, so the float model answers like the original (not like the
float model it was once trained as); that is the right reference for requantization.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import ConversionError
from . import onnx_util

# Ops that only move or reshape data: a quantized tensor passing through them is still "the same value".
_MOVE_OPS = frozenset({"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity"})
_QDQ = frozenset({"QuantizeLinear", "DequantizeLinear"})


def dequantize(src: Path, out: Path) -> Path:
    onnx = onnx_util.import_onnx()
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(str(src))
    graph = model.graph
    consts = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            consts[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    _refuse_qoperator(graph, src)

    new_inits: dict[str, np.ndarray] = {}
    rename: dict[str, str] = {}  # tensor -> the float tensor that now carries its value
    float_of: dict[str, str] = {}  # quantized activation -> its float value
    kept = []
    outputs = {o.name for o in graph.output}
    for node in graph.node:
        node_inputs = [rename.get(i, i) for i in node.input]
        del node.input[:]
        node.input.extend(node_inputs)
        op = node.op_type
        if op == "DequantizeLinear" and node.input[0] in consts:
            new_inits[node.output[0]] = _dequantize_const(node, consts, src)
            continue
        if op == "QuantizeLinear":
            float_of[node.output[0]] = node.input[0]
            continue
        if op == "DequantizeLinear" and node.input[0] in float_of:
            rename[node.output[0]] = float_of[node.input[0]]
            continue
        if op == "DequantizeLinear":  # of a graph input (or of data derived from it by moves): explicit float math
            kept.extend(_explicit_dequantize(node, consts, helper, TensorProto, new_inits, src))
            continue
        if op in _MOVE_OPS and node.input and node.input[0] in float_of:
            node.input[0] = float_of[node.input[0]]
            float_of[node.output[0]] = node.output[0]
            kept.append(node)
            continue
        stray = [i for i in node.input if float_of.get(i, i) != i]  # a tensor still holding integers
        if stray:
            raise ConversionError(f"{src.name}: node {node.name or op} ({op}) reads the quantized tensor {stray[0]!r} "
                                  f"directly; only QDQ graphs can be dequantized here")
        kept.append(node)

    _rewire_outputs(graph, rename, float_of, outputs, kept, helper, TensorProto)
    used = {i for n in kept for i in n.input} | {o.name for o in graph.output}
    kept = [n for n in kept if not (n.op_type == "Constant" and n.output[0] not in used)]  # folded scales
    del graph.node[:]
    graph.node.extend(kept)
    old_inits = [i for i in graph.initializer if i.name in used and i.name not in new_inits]
    del graph.initializer[:]
    graph.initializer.extend(old_inits)
    graph.initializer.extend(numpy_helper.from_array(a, name) for name, a in new_inits.items() if name in used)
    del graph.value_info[:]  # types changed (uint8 -> float); shape inference rebuilds what a runtime needs
    left = sorted({n.op_type for n in graph.node} & _QDQ)
    if left:
        raise ConversionError(f"{src.name}: {', '.join(left)} nodes remain after dequantizing; the graph has a "
                              f"pattern this tool does not fold")
    return onnx_util.save(model, out)


def _refuse_qoperator(graph, src: Path) -> None:
    qops = sorted({n.op_type for n in graph.node if n.op_type.startswith("QLinear") or n.op_type in
                   ("ConvInteger", "MatMulInteger", "DynamicQuantizeLinear")})
    if qops:
        raise ConversionError(f"{src.name} is quantized in operator form ({', '.join(qops)}), not QDQ",
                              hint="dequantizing handles QuantizeLinear/DequantizeLinear graphs only")


def _dequantize_const(node, consts: dict, src: Path) -> np.ndarray:
    x = consts[node.input[0]]
    scale = _const(node, 1, consts, src).astype(np.float32)
    zero = _const(node, 2, consts, src) if len(node.input) > 2 and node.input[2] else np.zeros((), x.dtype)
    axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
    if scale.ndim == 1 and scale.size > 1 and x.ndim:
        shape = [1] * x.ndim
        shape[axis % x.ndim] = -1
        scale, zero = scale.reshape(shape), zero.reshape(shape)
    return ((x.astype(np.float32) - zero.astype(np.float32)) * scale).astype(np.float32)


def _explicit_dequantize(node, consts, helper, TensorProto, new_inits: dict, src: Path) -> list:
    scale = _const(node, 1, consts, src).astype(np.float32)
    zero = _const(node, 2, consts, src) if len(node.input) > 2 and node.input[2] else np.zeros((), np.float32)
    if scale.size != 1:
        raise ConversionError(f"{src.name}: DequantizeLinear {node.name!r} of a non-constant tensor is per-axis; "
                              f"only per-tensor parameters are handled")
    base = node.output[0]
    zero_name, scale_name = f"{base}__zero_point_f32", f"{base}__scale_f32"
    new_inits[zero_name] = np.asarray(zero, np.float32).reshape(())
    new_inits[scale_name] = scale.reshape(())
    return [
        helper.make_node("Cast", [node.input[0]], [f"{base}__f32"], to=TensorProto.FLOAT, name=f"{base}__cast"),
        helper.make_node("Sub", [f"{base}__f32", zero_name], [f"{base}__centered"], name=f"{base}__sub"),
        helper.make_node("Mul", [f"{base}__centered", scale_name], [base], name=f"{base}__scale"),
    ]


def _rewire_outputs(graph, rename: dict, float_of: dict, outputs: set, kept: list, helper, TensorProto) -> None:
    """A graph output that was a quantized tensor (or a DQ that was dropped) now reads the float value."""
    for out in graph.output:
        source = rename.get(out.name) or float_of.get(out.name)
        if source and source != out.name:
            kept.append(helper.make_node("Identity", [source], [out.name], name=f"{out.name}__float"))
        if source:
            out.type.tensor_type.elem_type = TensorProto.FLOAT


def _const(node, index: int, consts: dict, src: Path) -> np.ndarray:
    name = node.input[index]
    if name not in consts:
        raise ConversionError(f"{src.name}: {node.op_type} {node.name!r} takes its scale/zero point from "
                              f"{name!r}, which is not a constant")
    return np.asarray(consts[name])
