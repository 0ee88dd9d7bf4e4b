"""Layers of a tapped graph, and which layer of a quantized graph is which layer of its float origin.

A *layer* is one value of the model, whatever encodings it passes through: a Conv's float output, its
QuantizeLinear (integers) and DequantizeLinear (rounded floats) are one layer in a QDQ graph; so are a
TFLite QUANTIZE/DEQUANTIZE pair and an OpenVINO FakeQuantize with the value they re-encode. The value
compared is the layer's last readable one (the rounded value the next op reads); its op and the layers it
reads are those of the first real op in it.

Matching, as the converters leave the names:
1. by name, normalised: the suffixes that the ONNX QDQ tools and edgeaccel's own dequantizer add
   (``_QuantizeLinear_Output``, ``_DequantizeLinear_Output``, ``_QuantizeLinear_Input``, ``__f32``...) are
   stripped; the TFLite converter keeps the float model's names in the int8 model;
2. where names fail: by producing-op type (across formats: CONV_2D = Conv = Convolution) and shape, in graph
   order, between the layers already matched by name on either side.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .taps import Tap

_SUFFIXES = ("_QuantizeLinear_Output", "_DequantizeLinear_Output", "_QuantizeLinear_Input",
             "_DequantizeLinear_Input", "_quantized", "__f32", "__centered")

# op types across formats, by the name lowercased without underscores
_CANONICAL_OPS = {
    "conv2d": "conv", "depthwiseconv2d": "conv", "conv": "conv", "convolution": "conv",
    "groupconvolution": "conv", "fullyconnected": "matmul", "gemm": "matmul", "matmul": "matmul",
    "batchmatmul": "matmul", "maxpool2d": "maxpool", "maxpool": "maxpool", "averagepool2d": "avgpool",
    "averagepool": "avgpool", "avgpool": "avgpool", "globalaveragepool": "mean", "mean": "mean",
    "reducemean": "mean", "concatenation": "concat", "concat": "concat", "mul": "mul", "multiply": "mul",
    "sub": "sub", "subtract": "sub", "hardswish": "hswish", "hswish": "hswish", "relu6": "clip", "clip": "clip",
    "clamp": "clip", "minimum": "clip", "maximum": "clip", "logistic": "sigmoid", "sigmoid": "sigmoid",
    "transposeconv": "deconv",
    "convtranspose": "deconv", "convolutionbackpropdata": "deconv", "resizebilinear": "resize",
    "resize": "resize", "interpolate": "resize", "squeeze": "reshape", "unsqueeze": "reshape",
    "flatten": "reshape", "reshape": "reshape",
}  # OpenVINO decomposes Clip into Maximum + Minimum: the named Minimum is the Clip's output


def normalise(name: str) -> str:
    changed = True
    while changed:
        changed = False
        for suffix in _SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name, changed = name[: -len(suffix)], True
    return name


def canonical_op(op_type: str) -> str:
    key = op_type.lower().replace("_", "")
    return _CANONICAL_OPS.get(key, key)


@dataclass
class Layer:
    index: int  # position in its graph's order
    name: str  # the model's name for it (the first named tensor of the layer)
    op_type: str
    read: str  # tensor id whose value is compared
    shape: tuple[int, ...]
    names: frozenset[str]  # normalised names of all its tensors
    reads: tuple[str, ...]  # tensor ids its op read (resolved to layers by LayerGraph.inputs_of)
    members: frozenset[str] = field(default_factory=frozenset)
    read_name: str | None = None  # the model's name for the tensor read (ids are the runtime's own)


class LayerGraph:
    """The layers of one tapped graph, built from the tap's tensors and one run's values (their shapes)."""

    def __init__(self, tap: Tap, values: dict[str, np.ndarray]) -> None:
        self.tap = tap
        self._consumers: dict[int, list[Layer]] | None = None
        tensors = {t.id: t for t in tap.tensors}
        self._tensors = tensors
        root = {t.id: t.id for t in tap.tensors}

        def find(x: str) -> str:
            while root[x] != x:
                root[x] = root[root[x]]
                x = root[x]
            return x

        by_name: dict[str, str] = {}
        for t in tap.tensors:
            if t.passthrough and t.inputs and t.inputs[0] in root:
                root[find(t.id)] = find(t.inputs[0])
            if t.name is not None:
                key = normalise(t.name)
                first = by_name.get(key)
                # "x" and "x_DequantizeLinear_Output" are one value re-encoded; two tensors that both carry the
                # same plain name (TFLite does not forbid it) are not
                if first is not None and (t.name != key or tensors[first].name != key):
                    root[find(t.id)] = find(first)
                else:
                    by_name.setdefault(key, t.id)
        groups: dict[str, list] = {}
        for t in tap.tensors:
            groups.setdefault(find(t.id), []).append(t)
        self.layers: list[Layer] = []
        self.layer_of: dict[str, Layer] = {}
        order = {t.id: i for i, t in enumerate(tap.tensors)}
        for members in groups.values():
            named = [t for t in members if t.name is not None]
            readable = [t for t in members if t.id in values]
            if not named or not readable:
                continue  # an unnamed value inside a decomposed op, or one that carries no real number
            defining = next((t for t in members if not t.passthrough), members[0])
            read = readable[-1]
            layer = Layer(order[members[0].id], _display_name(defining, named), defining.op_type, read.id,
                          tuple(values[read.id].shape), frozenset(normalise(t.name) for t in named),
                          tuple(r for r in defining.inputs if r in tensors), frozenset(t.id for t in members),
                          read.name)
            self.layers.append(layer)
            for t in members:
                self.layer_of[t.id] = layer
        self.layers.sort(key=lambda layer: layer.index)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(n for layer in self.layers for n in layer.names)

    def consumers(self, layer: Layer) -> list[Layer]:
        """The layers that read ``layer`` (through unnamed values)."""
        if self._consumers is None:
            self._consumers = {}
            for other in self.layers:
                for up in self.inputs_of(other, lambda _: True):
                    self._consumers.setdefault(up.index, []).append(other)
        return self._consumers.get(layer.index, [])

    def inputs_of(self, layer: Layer, accept: Callable[[Layer], bool]) -> list[Layer]:
        """The nearest layers upstream of ``layer`` that ``accept`` takes, walking through the others."""
        found: list[Layer] = []
        seen: set[str] = set()
        stack = list(layer.reads)
        while stack:
            tid = stack.pop()
            if tid in seen:
                continue
            seen.add(tid)
            other = self.layer_of.get(tid)
            if other is not None and other is not layer and accept(other):
                if other not in found:
                    found.append(other)
                continue
            t = self._tensors.get(tid)
            if t is not None:
                stack.extend(t.inputs)
        return found


@dataclass
class Match:
    quantized: Layer
    float: Layer
    by: str  # "name" or "op+shape"
    align: Callable[[np.ndarray], np.ndarray]  # the quantized value in the float tensor's layout


def match_layers(q: LayerGraph, f: LayerGraph, cross_layout: str | None) -> tuple[list[Match], list[str]]:
    """Matches in the quantized graph's order, and a line for every layer of either side left unmatched."""
    taken: set[int] = set()
    by_name: dict[int, tuple[Layer, Callable]] = {}
    problems: dict[int, str] = {}
    for ql in q.layers:
        for fl in f.layers:
            if fl.index in taken or not ql.names & fl.names:
                continue
            align = aligner(ql.shape, fl.shape, cross_layout)
            if align is None:
                problems[ql.index] = f"same name as float {fl.name!r} but shape {_dims(ql.shape)} vs {_dims(fl.shape)}"
                continue
            if cross_layout == "q_nhwc":
                fl = _fused_activation(q, f, fl, ql) or fl
            by_name[ql.index] = (fl, align)
            taken.add(fl.index)
            break
    matches: list[Match] = []
    low = -1
    for pos, ql in enumerate(q.layers):
        if ql.index in by_name:
            fl, align = by_name[ql.index]
            matches.append(Match(ql, fl, "name", align))
            low = fl.index
            continue
        high = next((by_name[later.index][0].index for later in q.layers[pos + 1:] if later.index in by_name),
                    None)
        found = _by_op_and_shape(ql, f, taken, low, high, cross_layout)
        if found is not None:
            fl, align = found
            fl = _fused_activation(q, f, fl, ql) or fl
            matches.append(Match(ql, fl, "op+shape", align))
            taken.add(fl.index)
            low = fl.index
    matched_q = {m.quantized.index for m in matches}
    unmatched = [f"quantized: {_describe(layer)}" + (f" ({problems[layer.index]})" if layer.index in problems else "")
                 for layer in q.layers if layer.index not in matched_q]
    unmatched += [f"float: {_describe(layer)}" for layer in f.layers if layer.index not in taken]
    return matches, unmatched


ACTIVATIONS = frozenset({"relu", "clip", "sigmoid", "hswish", "tanh", "leakyrelu", "prelu", "elu", "gelu"})


def _fused_activation(q: LayerGraph, f: LayerGraph, fl: Layer, ql: Layer) -> Layer | None:
    """The float activation after ``fl`` where the quantized op has it fused: tf2onnx splits a TFLite op's
    fused ReLU into its own node and leaves the op's name on the value before it, and ONNX Runtime's quantizer
    fuses Conv + Relu into one Conv whose output is the Relu's. Not where the quantized graph has the
    activation as an op of its own after ``ql``."""
    if canonical_op(ql.op_type) in ACTIVATIONS or _activation_after(q, ql):
        return None
    after = _activation_after(f, fl)
    if after is not None and not after.names & q.names:
        return after
    return None


def _activation_after(graph: LayerGraph, layer: Layer) -> Layer | None:
    after = graph.consumers(layer)
    if len(after) == 1 and canonical_op(after[0].op_type) in ACTIVATIONS and after[0].shape == layer.shape:
        return after[0]
    return None


def _by_op_and_shape(ql: Layer, f: LayerGraph, taken: set[int], low: int, high: int | None,
                     cross_layout: str | None):
    op = canonical_op(ql.op_type)
    for fl in f.layers:
        if fl.index in taken or fl.index <= low or (high is not None and fl.index >= high):
            continue
        if canonical_op(fl.op_type) != op:
            continue
        align = aligner(ql.shape, fl.shape, cross_layout, exact_only=True)
        if align is not None:
            return fl, align
    return None


def aligner(q_shape: tuple, f_shape: tuple, cross_layout: str | None, exact_only: bool = False):
    """How a quantized value is laid out like the float one: as it is, NHWC -> NCHW (TFLite against ONNX or
    IR), or reshaped (same size, same format); None when they cannot be the same tensor.

    ``cross_layout``: None for two models of one format, "q_nhwc" when only the quantized one is TFLite,
    "f_nhwc" when only the float one is. A rank-4 shape that fits both ways (H = W = C) is taken as the
    formats lay it out (NHWC in TFLite, NCHW in ONNX and IR)."""
    q_shape, f_shape = tuple(q_shape), tuple(f_shape)
    if cross_layout and len(q_shape) == 4 and len(f_shape) == 4:
        to_nchw = (q_shape[0], q_shape[3], q_shape[1], q_shape[2])
        to_nhwc = (q_shape[0], q_shape[2], q_shape[3], q_shape[1])
        # an int8 TFLite (NHWC) against an ONNX/IR float model (NCHW), or the other way round
        if cross_layout == "q_nhwc" and to_nchw == f_shape:
            return lambda a: a.transpose(0, 3, 1, 2)
        if cross_layout == "f_nhwc" and to_nhwc == f_shape:
            return lambda a: a.transpose(0, 2, 3, 1)
    if q_shape == f_shape:
        return _same
    if not exact_only and not cross_layout and int(np.prod(q_shape)) == int(np.prod(f_shape)):
        return lambda a: a.reshape(f_shape)
    return None


def _display_name(defining, named) -> str:
    """The layer's name as the float model knows it: a QDQ tool renames the value it quantizes
    ("x_QuantizeLinear_Input") and gives the original name to the rounded value; that one is shown."""
    base = normalise(defining.name or named[0].name)
    return next((t.name for t in named if t.name == base), defining.name or named[0].name)


def _same(a: np.ndarray) -> np.ndarray:
    return a


def _dims(shape: tuple) -> str:
    return "x".join(str(d) for d in shape) or "scalar"


def _describe(layer: Layer) -> str:
    return f"{layer.name} ({layer.op_type} {_dims(layer.shape)})"


# What the ONNX and TFLite segment runners (compare_local.py, compare_local_tflite.py) share, kept here below both.
MAX_SEGMENT_NODES = 64  # a longer walk means the boundary was missed (unmatched branch): use the estimate


def boundary_value(m: Match, q_values: dict, f_values: dict) -> np.ndarray:
    """The quantized model's value of a boundary layer, laid out as the float tensor it replaces."""
    value = np.ascontiguousarray(m.align(q_values[m.quantized.read]), np.float32)
    return value.reshape(f_values[m.float.read].shape)
