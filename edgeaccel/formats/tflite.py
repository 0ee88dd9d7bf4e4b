"""TFLite flatbuffers read without a runtime: tensors, operators, buffers, and the model description.

Field indices follow tensorflow/compiler/mlir/lite/schema/schema.fbs (Model, SubGraph, Tensor, Operator, ...).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ModelValidationError
from ..modelinfo import Quantization, TensorSpec
from . import flatbuf
from .tflite_ops import BUILTIN_OPS

FILE_IDENTIFIER = b"TFL3"
EDGETPU_CUSTOM_OP = "edgetpu-custom-op"
CUSTOM = 32  # BuiltinOperator.CUSTOM

# TensorType -> numpy dtype; None where numpy has no exact match (such a tensor cannot be fed from numpy).
TENSOR_TYPES: dict[int, tuple[str, np.dtype | None]] = {
    0: ("float32", np.dtype(np.float32)),
    1: ("float16", np.dtype(np.float16)),
    2: ("int32", np.dtype(np.int32)),
    3: ("uint8", np.dtype(np.uint8)),
    4: ("int64", np.dtype(np.int64)),
    5: ("string", np.dtype(object)),
    6: ("bool", np.dtype(np.bool_)),
    7: ("int16", np.dtype(np.int16)),
    8: ("complex64", np.dtype(np.complex64)),
    9: ("int8", np.dtype(np.int8)),
    10: ("float64", np.dtype(np.float64)),
    11: ("complex128", np.dtype(np.complex128)),
    12: ("uint64", np.dtype(np.uint64)),
    13: ("resource", None),
    14: ("variant", None),
    15: ("uint32", np.dtype(np.uint32)),
    16: ("uint16", np.dtype(np.uint16)),
    17: ("int4", None),
    18: ("bfloat16", None),
    19: ("int2", None),
    20: ("uint4", None),
    21: ("float8_e4m3fn", None),
    22: ("float8_e5m2", None),
}


@dataclass(frozen=True)
class TflTensor:
    name: str
    shape: tuple[int, ...]
    shape_signature: tuple[int, ...]  # -1 marks a dynamic dimension; equals shape when absent
    type: int
    buffer: int
    quantization: Quantization | None
    zero_points_raw: tuple[int, ...]  # as stored (int64), for range checks before they are trusted
    is_variable: bool
    sparse: bool
    name_is_utf8: bool = True


@dataclass(frozen=True)
class TflOperator:
    opcode_index: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    intermediates: tuple[int, ...]
    options_type: int = 0  # BuiltinOptions union type (0: none)
    subgraph_refs: tuple[int, ...] = ()  # subgraphs this operator runs (WHILE, IF, CALL_ONCE, StableHLO regions)
    num_splits: int | None = None  # SplitOptions / SplitVOptions.num_splits, where present
    has_options: bool = False  # the options table itself is there (a type without a table reads as defaults)


# Control flow: the options union type -> the int fields of that options table that name a subgraph.
# (schema.fbs: IfOptions 92, WhileOptions 93, CallOnceOptions 103, CallOptions 16.)
SUBGRAPH_FIELDS = {92: (0, 1), 93: (0, 1), 103: (0,), 16: (0,)}
# BuiltinOptions2 (StableHLO): While 15, Composite 21, Reduce 6, Sort 14, Scatter 7, ReduceWindow 13; Case 23
# holds a vector of branch indices in field 0.
SUBGRAPH_FIELDS_2 = {15: (0, 1), 21: (1,), 6: (1,), 14: (2,), 7: (6,), 13: (5,)}
CASE_OPTIONS_2 = 23
SPLIT_OPTIONS = (35, 79)  # SplitOptions, SplitVOptions: num_splits is field 0 of both (77 is MirrorPadOptions)
# Builtin control-flow operators and the options type each must carry: without it LiteRT reads subgraph
# index 0 (the main graph) and recurses into itself.
CONTROL_FLOW_OPTIONS = {"IF": 92, "WHILE": 93, "CALL_ONCE": 103, "CALL": 16}


@dataclass(frozen=True)
class TflSubgraph:
    name: str
    tensors: tuple[TflTensor, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    operators: tuple[TflOperator, ...]


@dataclass(frozen=True)
class TflSignature:
    """A SignatureDef: the names a signature runner gives a subgraph's tensors (tensor indices of that subgraph)."""

    key: str
    subgraph: int
    inputs: tuple[tuple[str, int], ...]
    outputs: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class TflModel:
    version: int
    opcodes: tuple[str, ...]  # builtin name, or the custom op's own name
    custom_opcodes: frozenset[int]
    subgraphs: tuple[TflSubgraph, ...]
    buffer_sizes: tuple[int, ...]  # bytes of data each buffer holds (inline or by offset)
    buffer_ranges: tuple[tuple[int, int], ...]  # (start, size) of each buffer's data within the file
    file_size: int
    signatures: tuple[TflSignature, ...] = ()

    @property
    def primary(self) -> TflSubgraph:
        return self.subgraphs[0]

    @property
    def custom_ops(self) -> tuple[str, ...]:
        return tuple(sorted({self.opcodes[i] for i in self.custom_opcodes}))


def looks_like_tflite(head: bytes) -> bool:
    return len(head) >= 8 and head[4:8] == FILE_IDENTIFIER


def parse(buf: bytes) -> TflModel:
    """Walk the whole flatbuffer. Raises ModelValidationError on anything out of bounds."""
    try:
        return _parse(buf)
    except flatbuf.FlatBufferError as exc:
        raise ModelValidationError(
            f"not a well-formed TFLite flatbuffer: {exc}",
            hint="the file is truncated or corrupted; export or download it again",
        ) from exc


def _parse(buf: bytes) -> TflModel:
    model = flatbuf.root(buf)
    opcodes, custom = [], set()
    for i, oc in enumerate(model.tables(1)):
        code = max(oc.scalar(0, "b", 0), oc.scalar(3, "i", 0))
        if code == CUSTOM:
            custom.add(i)
            opcodes.append(oc.string(1) or "<unnamed custom op>")
        elif 0 <= code < len(BUILTIN_OPS):
            opcodes.append(BUILTIN_OPS[code])
        else:
            opcodes.append(f"UNKNOWN_BUILTIN_{code}")
    sizes, ranges = [], []
    for b in model.tables(4):
        start, n = b.vector_span(0, 1)
        if n:
            sizes.append(n)
            ranges.append((start, n))
        else:
            offset, size = b.scalar(1, "Q", 0), b.scalar(2, "Q", 0)
            sizes.append(size if offset > 1 else 0)  # offset 1 marks "no data" in the large-model layout
            ranges.append((offset, size) if offset > 1 else (0, 0))
    subgraphs = tuple(_subgraph(sg) for sg in model.tables(2))
    if not subgraphs:
        raise ModelValidationError("the TFLite model has no subgraph", hint="the file is not a usable model")
    return TflModel(
        version=model.scalar(0, "I", 0),
        opcodes=tuple(opcodes),
        custom_opcodes=frozenset(custom),
        subgraphs=subgraphs,
        buffer_sizes=tuple(sizes),
        buffer_ranges=tuple(ranges),
        file_size=len(buf),
        signatures=tuple(_signature(sig) for sig in model.tables(7)),
    )


def _signature(sig: flatbuf.Table) -> TflSignature:
    def maps(index: int) -> tuple[tuple[str, int], ...]:
        return tuple((m.string(0), m.scalar(1, "I", 0)) for m in sig.tables(index))

    return TflSignature(sig.string(2), sig.scalar(4, "I", 0), maps(0), maps(1))


def signature_aliases(model: TflModel) -> dict | None:
    """The primary subgraph's signature names, by input and output position: what LiteRT's signature runner
    calls them ('x', 'output_0'), where the tensors are named 'serving_default_x:0', 'StatefulPartitionedCall:0'.
    None without a signature for subgraph 0."""
    sig = next((s for s in model.signatures if s.subgraph == 0), None)
    if sig is None:
        return None
    sg = model.primary

    def by_position(maps, indices) -> dict[str, int]:
        where = {t: k for k, t in enumerate(indices)}
        return {name: where[t] for name, t in maps if name and t in where}

    return {"key": sig.key, "inputs": by_position(sig.inputs, sg.inputs),
            "outputs": by_position(sig.outputs, sg.outputs)}


def _ints(table: flatbuf.Table, index: int) -> tuple[int, ...]:
    return tuple(int(v) for v in table.numbers(index, "<i4"))


def _subgraph(sg: flatbuf.Table) -> TflSubgraph:
    tensors = tuple(_tensor(t) for t in sg.tables(0))
    operators = tuple(
        TflOperator(op.scalar(0, "I", 0), _ints(op, 1), _ints(op, 2), _ints(op, 8), op.scalar(3, "B", 0),
                    _subgraph_refs(op), _num_splits(op), op.table(4) is not None)
        for op in sg.tables(3)
    )
    return TflSubgraph(sg.string(4), tensors, _ints(sg, 1), _ints(sg, 2), operators)


def _num_splits(op: flatbuf.Table) -> int | None:
    if op.scalar(3, "B", 0) not in SPLIT_OPTIONS:
        return None
    options = op.table(4)
    return options.scalar(0, "i", 0) if options is not None else None


def _subgraph_refs(op: flatbuf.Table) -> tuple[int, ...]:
    refs: list[int] = []
    fields = SUBGRAPH_FIELDS.get(op.scalar(3, "B", 0))
    options = op.table(4) if fields else None
    if options is not None and fields:
        refs.extend(options.scalar(f, "i", 0) for f in fields)
    kind2 = op.scalar(11, "B", 0)
    fields2 = SUBGRAPH_FIELDS_2.get(kind2)
    options2 = op.table(12) if fields2 or kind2 == CASE_OPTIONS_2 else None
    if options2 is not None:
        if kind2 == CASE_OPTIONS_2:
            refs.extend(int(v) for v in options2.numbers(0, "<i4"))
        elif fields2:
            refs.extend(options2.scalar(f, "i", 0) for f in fields2)
    return tuple(refs)


def _tensor(t: flatbuf.Table) -> TflTensor:
    try:
        t.raw_string(3).decode("utf-8")
        utf8 = True
    except UnicodeDecodeError:
        utf8 = False
    shape = _ints(t, 0)
    signature = _ints(t, 7) if t.has(7) else shape
    quant: Quantization | None = None
    zps: tuple[int, ...] = ()
    q = t.table(4)
    if q is not None:
        scales = q.numbers(2, "<f4")
        zps = tuple(int(z) for z in q.numbers(3, "<i8"))
        if len(scales):
            axis = q.scalar(6, "i", 0) if len(scales) > 1 else None
            safe_zps = tuple(max(min(z, 2**31 - 1), -(2**31)) for z in zps) or (0,) * len(scales)
            quant = Quantization(tuple(float(s) for s in scales), safe_zps, axis)
    return TflTensor(
        name=t.string(3),
        shape=shape,
        shape_signature=signature,
        type=t.scalar(1, "b", 0),
        buffer=t.scalar(2, "I", 0),
        quantization=quant,
        zero_points_raw=zps,
        is_variable=bool(t.scalar(5, "B", 0)),
        sparse=t.has(6),
        name_is_utf8=utf8,
    )


def tensor_spec(t: TflTensor) -> TensorSpec:
    _, dtype = TENSOR_TYPES.get(t.type, (f"type{t.type}", None))
    if len(t.shape_signature) != len(t.shape):  # signature and shape disagree in rank: trust the signature
        dims = tuple(None if s < 0 else int(s) for s in t.shape_signature)
    else:
        dims = tuple(None if s < 0 else int(d) for d, s in zip(t.shape, t.shape_signature, strict=True))
    quant = t.quantization
    if quant is not None and all(s == 0 for s in quant.scale):
        quant = None  # LiteRT writes scale 0 for "not quantized"
    return TensorSpec(t.name, dims, dtype if dtype is not None else np.dtype(object), quant)


def type_name(type_code: int) -> str:
    return TENSOR_TYPES.get(type_code, (f"type{type_code}", None))[0]
