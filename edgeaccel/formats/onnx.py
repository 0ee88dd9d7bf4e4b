"""ONNX ModelProto read with the wire-format reader: graph inputs/outputs, nodes, initializers.

Field numbers follow onnx/onnx.proto. The ``onnx`` package (the full checker) is used by validation when it
is installed; describing a model never needs it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from ..errors import ModelValidationError
from ..modelinfo import Quantization, TensorSpec
from . import protobuf as pb

# TensorProto.DataType -> numpy dtype (None: no numpy equivalent to feed)
ELEM_TYPES: dict[int, tuple[str, np.dtype | None]] = {
    1: ("float32", np.dtype(np.float32)),
    2: ("uint8", np.dtype(np.uint8)),
    3: ("int8", np.dtype(np.int8)),
    4: ("uint16", np.dtype(np.uint16)),
    5: ("int16", np.dtype(np.int16)),
    6: ("int32", np.dtype(np.int32)),
    7: ("int64", np.dtype(np.int64)),
    8: ("string", np.dtype(object)),
    9: ("bool", np.dtype(np.bool_)),
    10: ("float16", np.dtype(np.float16)),
    11: ("float64", np.dtype(np.float64)),
    12: ("uint32", np.dtype(np.uint32)),
    13: ("uint64", np.dtype(np.uint64)),
    14: ("complex64", np.dtype(np.complex64)),
    15: ("complex128", np.dtype(np.complex128)),
    16: ("bfloat16", None),
}


@dataclass
class OnnxValue:
    name: str
    elem_type: int = 0
    dims: tuple[int | str | None, ...] | None = None  # int, symbolic name, or None (unknown); None: no shape


@dataclass
class OnnxInitializer:
    name: str
    dims: tuple[int, ...]
    data_type: int
    external: dict[str, str] = field(default_factory=dict)  # location, offset, length when stored outside
    raw: tuple[int, int] | None = None  # span of raw_data in the file
    float_data: tuple[int, int] | None = None
    int32_data: tuple[int, int] | None = None
    int64_data: tuple[int, int] | None = None


@dataclass
class OnnxNode:
    op_type: str
    domain: str
    inputs: list[str]
    outputs: list[str]


@dataclass
class OnnxModel:
    ir_version: int
    opsets: dict[str, int]
    producer: str
    inputs: list[OnnxValue]
    outputs: list[OnnxValue]
    nodes: list[OnnxNode]
    initializers: dict[str, OnnxInitializer]
    has_functions: bool

    @property
    def external_locations(self) -> set[str]:
        return {i.external["location"] for i in self.initializers.values() if "location" in i.external}


def looks_like_onnx(buf) -> bool:
    """True when the bytes parse as protobuf with ModelProto's ir_version and graph fields."""
    try:
        numbers = {(n, w) for n, w, _ in pb.fields(buf)}
    except pb.ProtobufError:
        return False
    return (1, pb.VARINT) in numbers and (7, pb.LENGTH) in numbers


def parse(buf) -> OnnxModel:
    try:
        return _parse(buf)
    except pb.ProtobufError as exc:
        raise ModelValidationError(
            f"not a well-formed ONNX protobuf: {exc}", hint="the file is truncated or corrupted; export it again"
        ) from exc


def _parse(buf) -> OnnxModel:
    ir_version, opsets, producer, graph, functions = 0, {}, "", None, False
    for num, wire, val in pb.fields(buf):
        if num == 1 and wire == pb.VARINT:
            ir_version = val
        elif num == 2 and wire == pb.LENGTH:
            producer = pb.text(buf, val)
        elif num == 7 and wire == pb.LENGTH:
            graph = val
        elif num == 8 and wire == pb.LENGTH:
            domain, version = "", 0
            for n2, w2, v2 in pb.fields(buf, *val):
                if n2 == 1 and w2 == pb.LENGTH:
                    domain = pb.text(buf, v2)
                elif n2 == 2 and w2 == pb.VARINT:
                    version = pb.signed(v2)
            opsets[domain] = version
        elif num == 25:
            functions = True
    if graph is None:
        raise ModelValidationError("the ONNX model has no graph", hint="export the model again")
    inputs, outputs, nodes, inits = [], [], [], {}
    for num, wire, val in pb.fields(buf, *graph):
        if wire != pb.LENGTH:
            continue
        if num == 1:
            nodes.append(_node(buf, val))
        elif num == 5:
            init = _initializer(buf, val)
            inits[init.name] = init
        elif num == 11:
            inputs.append(_value_info(buf, val))
        elif num == 12:
            outputs.append(_value_info(buf, val))
    # Before IR 4, initializers were also listed as graph inputs; they are not inputs the caller feeds.
    inputs = [v for v in inputs if v.name not in inits]
    return OnnxModel(ir_version, opsets, producer, inputs, outputs, nodes, inits, functions)


def _node(buf, span) -> OnnxNode:
    node = OnnxNode("", "", [], [])
    for num, wire, val in pb.fields(buf, *span):
        if wire != pb.LENGTH:
            continue
        if num == 1:
            node.inputs.append(pb.text(buf, val))
        elif num == 2:
            node.outputs.append(pb.text(buf, val))
        elif num == 4:
            node.op_type = pb.text(buf, val)
        elif num == 7:
            node.domain = pb.text(buf, val)
    return node


def _initializer(buf, span) -> OnnxInitializer:
    name, dims, dtype, ext, spans = "", [], 0, {}, {}
    for num, wire, val in pb.fields(buf, *span):
        if num == 1:
            dims.extend(pb.packed_varints(buf, val) if wire == pb.LENGTH else [pb.signed(val)])
        elif num == 2 and wire == pb.VARINT:
            dtype = val
        elif num == 8 and wire == pb.LENGTH:
            name = pb.text(buf, val)
        elif num == 13 and wire == pb.LENGTH:
            key, value = string_entry(buf, val)
            ext[key] = value
        elif wire == pb.LENGTH and num in (4, 5, 7, 9):
            spans[num] = val
    return OnnxInitializer(
        name, tuple(dims), dtype, ext, spans.get(9), spans.get(4), spans.get(5), spans.get(7)
    )


def _value_info(buf, span) -> OnnxValue:
    value = OnnxValue("")
    for num, wire, val in pb.fields(buf, *span):
        if num == 1 and wire == pb.LENGTH:
            value.name = pb.text(buf, val)
        elif num == 2 and wire == pb.LENGTH:
            for n2, w2, v2 in pb.fields(buf, *val):
                if n2 == 1 and w2 == pb.LENGTH:  # TypeProto.tensor_type
                    _tensor_type(buf, v2, value)
    return value


def _tensor_type(buf, span, value: OnnxValue) -> None:
    for num, wire, val in pb.fields(buf, *span):
        if num == 1 and wire == pb.VARINT:
            value.elem_type = val
        elif num == 2 and wire == pb.LENGTH:
            dims = []
            for n2, w2, v2 in pb.fields(buf, *val):
                if n2 != 1 or w2 != pb.LENGTH:
                    continue
                dim: int | str | None = None
                for n3, w3, v3 in pb.fields(buf, *v2):
                    if n3 == 1 and w3 == pb.VARINT:
                        dim = pb.signed(v3)
                    elif n3 == 2 and w3 == pb.LENGTH:
                        dim = pb.text(buf, v3)
                dims.append(dim)
            value.dims = tuple(dims)


def scalar_value(buf, init: OnnxInitializer) -> list[float] | None:
    """The values of a small initializer stored inside the file (scales, zero points), else None."""
    dtype = ELEM_TYPES.get(init.data_type, ("", None))[1]
    count = int(np.prod(init.dims)) if init.dims else 1
    if dtype is None or count > 4096 or init.external:
        return None
    if init.raw is not None:
        start, end = init.raw
        if end - start != count * dtype.itemsize:
            return None
        return np.frombuffer(bytes(buf[start:end]), dtype=dtype.newbyteorder("<")).astype(float).tolist()
    if init.float_data is not None:
        start, end = init.float_data
        return list(struct.unpack_from(f"<{(end - start) // 4}f", buf, start))
    for span in (init.int32_data, init.int64_data):
        if span is not None:
            return [float(v) for v in pb.packed_varints(buf, span)]
    return None


def tensor_specs(buf, model: OnnxModel) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    """Graph inputs and outputs; the quantization of a uint8/int8 edge comes from its Q/DQ neighbour."""
    consumers: dict[str, OnnxNode] = {}
    producers: dict[str, OnnxNode] = {}
    for node in model.nodes:
        for name in node.inputs:
            consumers.setdefault(name, node)
        for name in node.outputs:
            producers[name] = node

    def through_layout(name: str, step: dict[str, OnnxNode], forward: bool) -> OnnxNode | None:
        # tf2onnx puts a Transpose (NHWC->NCHW) between a uint8 input and its DequantizeLinear; layout ops
        # move values without changing them, so the quantization seen past them is the edge's own.
        node = step.get(name)
        for _ in range(4):
            if node is None or node.op_type not in _LAYOUT_OPS:
                return node
            nxt = node.outputs[0] if forward and node.outputs else node.inputs[0] if node.inputs else ""
            node = step.get(nxt)
        return node

    def spec(value: OnnxValue, node: OnnxNode | None, role: str) -> TensorSpec:
        dtype = ELEM_TYPES.get(value.elem_type, ("", None))[1]
        dims = tuple(d if isinstance(d, int) and d >= 0 else None for d in (value.dims or ()))
        quant = None
        if node is not None and node.op_type == role and len(node.inputs) >= 2:
            quant = _qparams(buf, model, node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else "")
        # no shape field at all: the rank is unknown (ONNX GraphSurgeon and hand-made graphs leave it out), not
        # a scalar, which is an empty shape
        return TensorSpec(value.name, dims, dtype if dtype is not None else np.dtype(object), quant,
                          unranked=value.dims is None)

    ins = tuple(spec(v, through_layout(v.name, consumers, True), "DequantizeLinear") for v in model.inputs)
    outs = tuple(spec(v, through_layout(v.name, producers, False), "QuantizeLinear") for v in model.outputs)
    return ins, outs


_LAYOUT_OPS = frozenset({"Transpose", "Reshape", "Identity", "Squeeze", "Unsqueeze", "Flatten"})


def _qparams(buf, model: OnnxModel, scale_name: str, zp_name: str) -> Quantization | None:
    scale_init = model.initializers.get(scale_name)
    scales = scalar_value(buf, scale_init) if scale_init else None
    if not scales or len(scales) != 1:
        return None
    zp_init = model.initializers.get(zp_name) if zp_name else None
    zps = scalar_value(buf, zp_init) if zp_init else [0.0]
    if not zps or len(zps) != 1:
        return None
    return Quantization((float(scales[0]),), (int(zps[0]),))


def string_entry(buf, span) -> tuple[str, str]:
    """An ONNX StringStringEntryProto (key 1, value 2): external-data locations, ``metadata_props``."""
    key = value = ""
    for num, wire, val in pb.fields(buf, *span):
        if num == 1 and wire == pb.LENGTH:
            key = pb.text(buf, val)
        elif num == 2 and wire == pb.LENGTH:
            value = pb.text(buf, val)
    return key, value
