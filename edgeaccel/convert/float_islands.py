"""Which nodes of a float ONNX model stay float when the rest is quantized to int8, and why.

Quantizing a whole graph puts every tensor under one uint8 scale per tensor. That is harmless inside a
network body and destroys a model where one tensor carries values of very different magnitudes: a YOLOv8
export ends in a Concat of box coordinates (0..640 px) and class scores (0..1), and under one scale the
scores take two values. Ultralytics' int8 export and OpenVINO's NNCF keep such a head in float; this module
decides the same from the graph and measured ranges, for any model (never from one export's node names):

- head: everything after the last compute layers (Conv, MatMul, Gemm; a Conv reading a Softmax, as the DFL
  expectation does, counts as decode) on the way to the outputs: Sigmoid/Softmax, grid and anchor Add/Mul,
  Split/Slice/Reshape/Transpose, the Concat that feeds an output;
- joins: a node (Concat, Add, Sub, Max, ...) whose non-constant inputs' measured ranges differ by more
  than ``RANGE_FACTOR``, plus everything between it and the outputs when no compute layer is on that way
  (one that feeds a compute layer needs a single-scale input anyway: it goes to the sensitivity pass instead);
- user: names given with ``--keep-float`` (node or tensor names).

Ranges are measured by running the float model with ONNX Runtime on calibration samples, every intermediate
tensor exposed as an output. ``sensitivity.py`` then measures what the remaining candidates cost.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..errors import ConversionError

RANGE_FACTOR = 8.0  # inputs of one join whose ranges differ by more than this cannot share a uint8 scale
MAX_RANGE_SAMPLES = 32  # ranges of a float model settle within a few dozen samples
COMPUTE_OPS = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm", "Einsum", "LSTM", "GRU", "RNN", "Attention"})
# Ops whose output holds its inputs' values side by side or summed, under the output's one scale: a small-range
# input is lost in a large one's steps. Mul and Div are not among them: a product keeps its inputs' relative
# precision whatever their ranges (SiLU's x * sigmoid(x) is fine in int8).
JOIN_OPS = frozenset({"Concat", "Add", "Sub", "Sum", "Max", "Min", "Mean", "Where"})
_SHAPE_OPS = frozenset({"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity"})


@dataclass(frozen=True)
class KeptFloat:
    node: str
    op: str
    why: str

    def as_dict(self) -> dict:
        return {"node": self.node, "op": self.op, "why": self.why}


@dataclass
class TensorRange:
    low: float
    high: float
    std: float

    @property
    def span(self) -> float:
        return self.high - self.low


@dataclass
class FloatPlan:
    """The nodes kept float (in the order decided) and the measured ranges the decision used."""

    kept: list[KeptFloat] = field(default_factory=list)
    ranges: dict[str, TensorRange] = field(default_factory=dict)
    candidates: list[tuple[str, str]] = field(default_factory=list)  # (node, why) for the sensitivity pass
    notes: list[str] = field(default_factory=list)

    @property
    def nodes(self) -> list[str]:
        return [k.node for k in self.kept]

    def keep(self, node, why: str) -> None:
        if node.name not in self.nodes:
            self.kept.append(KeptFloat(node.name, node.op_type, why))


class Graph:
    """Producer and consumer maps of an ONNX graph, node order kept (ONNX graphs are topologically sorted)."""

    def __init__(self, model) -> None:
        self.model = model
        self.nodes = list(model.graph.node)
        self.by_name = {n.name: n for n in self.nodes}
        self.constants = {i.name for i in model.graph.initializer}
        self.constants |= {o for n in self.nodes if n.op_type == "Constant" for o in n.output}
        self.producer = {o: n for n in self.nodes for o in n.output if o}
        self.consumers: dict[str, list] = defaultdict(list)
        for n in self.nodes:
            for i in n.input:
                if i:
                    self.consumers[i].append(n)
        self.outputs = {o.name for o in model.graph.output}

    def successors(self, node) -> list:
        return [c for o in node.output for c in self.consumers.get(o, ())]

    def activations(self, node) -> list[str]:
        """The node's inputs that are computed at run time (not weights, constants or empty)."""
        return [i for i in node.input if i and i not in self.constants]

    def is_compute(self, node) -> bool:
        return node.op_type in COMPUTE_OPS and not self.is_decode_conv(node)

    def is_decode_conv(self, node) -> bool:
        """A Conv/MatMul reading a Softmax (through reshapes) is an expectation over a distribution (YOLOv8's
        DFL turns 16 bin probabilities into a distance with fixed weights 0..15): decode, not a learned layer."""
        if node.op_type not in COMPUTE_OPS:
            return False
        for name in self.activations(node):
            producer = self.producer.get(name)
            while producer is not None and producer.op_type in _SHAPE_OPS:
                producer = self.producer.get(producer.input[0])
            if producer is not None and producer.op_type == "Softmax":
                return True
        return False

    def compute_downstream(self) -> dict[str, bool]:
        """node name -> whether a compute layer lies on some way from it to the outputs (itself excluded)."""
        below: dict[str, bool] = {}
        for node in reversed(self.nodes):
            below[node.name] = any(self.is_compute(s) or below.get(s.name, False) for s in self.successors(node))
        return below

    def reaches_output(self) -> dict[str, bool]:
        reach: dict[str, bool] = {}
        for node in reversed(self.nodes):
            reach[node.name] = any(o in self.outputs for o in node.output) or any(
                reach.get(s.name, False) for s in self.successors(node))
        return reach

    def downstream_to_outputs(self, start) -> list:
        """``start`` and every node after it that leads to a graph output, in graph order."""
        reach = self.reaches_output()
        seen, todo = {start.name}, [start]
        while todo:
            for s in self.successors(todo.pop()):
                if s.name not in seen and reach.get(s.name):
                    seen.add(s.name)
                    todo.append(s)
        return [n for n in self.nodes if n.name in seen]


def name_nodes(model) -> int:
    """Give every unnamed node a unique name (op type and index): nodes_to_exclude and the manifest need one."""
    taken = {n.name for n in model.graph.node if n.name}
    named = 0
    for i, node in enumerate(model.graph.node):
        if not node.name:
            name = f"{node.op_type}_{i}"
            while name in taken:
                name += "_"
            node.name = name
            taken.add(name)
            named += 1
    return named


def plan(model, feeds: list[dict[str, np.ndarray]], keep_float=(), *, range_factor: float = RANGE_FACTOR,
         source_model=None) -> FloatPlan:
    """Decide the float islands of ``model`` (an onnx ModelProto whose nodes are all named)."""
    graph = Graph(model)
    result = FloatPlan()
    for node, why in resolve(graph, keep_float, source_model):
        result.keep(node, why)
    _head(graph, result)
    if feeds:
        result.ranges = measure_ranges(model, feeds[:MAX_RANGE_SAMPLES])
        _joins(graph, result, range_factor)
    return result


def resolve(graph: Graph, names, source_model=None) -> list[tuple[object, str]]:
    """Nodes for user-given node or tensor names; ConversionError for a name the model does not have."""
    found = []
    for name in names:
        node = graph.by_name.get(name) or graph.producer.get(name)
        if node is None:
            known = sorted(set(graph.by_name) | set(graph.producer))
            close = difflib.get_close_matches(name, known, n=5, cutoff=0.5)
            where = ""
            if source_model is not None and (name in {n.name for n in source_model.graph.node}
                                             or name in {o for n in source_model.graph.node for o in n.output}):
                where = " after ONNX Runtime's graph optimization (it was fused into a neighbour)"
            raise ConversionError(
                f"--keep-float {name!r}: the model has no node or tensor of that name{where}",
                hint=(f"close names: {', '.join(close)}" if close else
                      f"node names look like: {', '.join(sorted(graph.by_name)[:5])}")
                + "; Netron shows the float ONNX model's node names (`edgeaccel profile MODEL` per operator)")
        found.append((node, "--keep-float" if node.name == name else f"--keep-float {name} (its output)"))
    return found


def _head(graph: Graph, result: FloatPlan) -> None:
    below = graph.compute_downstream()
    reach = graph.reaches_output()
    last = [n for n in graph.nodes if graph.is_compute(n) and not below[n.name]]
    if not last:
        return
    in_head = set()
    todo = list(last)
    while todo:
        for s in graph.successors(todo.pop()):
            if s.name not in in_head and not graph.is_compute(s) and reach.get(s.name):
                in_head.add(s.name)
                todo.append(s)
    names = ", ".join(n.name for n in last[:4]) + (f" and {len(last) - 4} more" if len(last) > 4 else "")
    for node in graph.nodes:
        if node.name in in_head:
            result.keep(node, f"head: decode after the last compute layers ({names}) on the way to the outputs")


def measure_ranges(model, feeds: list[dict[str, np.ndarray]]) -> dict[str, TensorRange]:
    """min, max and standard deviation of every float intermediate tensor over ``feeds`` (ONNX Runtime)."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto

    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    try:
        exposed = onnx.shape_inference.infer_shapes(exposed)
    except Exception:  # noqa: BLE001 - without inferred types only the graph's own outputs are measured
        pass
    types = {v.name: v.type.tensor_type.elem_type for v in
             list(exposed.graph.value_info) + list(exposed.graph.output) + list(exposed.graph.input)}
    present = {o.name for o in exposed.graph.output}
    constants = {i.name for i in exposed.graph.initializer}
    for node in exposed.graph.node:
        if node.op_type == "Constant":
            continue
        for out in node.output:
            # a tensor of unknown type is left out: declared float, an int64 shape would fail the session
            if out and out not in present and out not in constants and types.get(out) == TensorProto.FLOAT:
                exposed.graph.output.append(onnx.helper.make_tensor_value_info(out, TensorProto.FLOAT, None))
                present.add(out)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # every tensor as named
    session = ort.InferenceSession(exposed.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    low: dict[str, float] = {}
    high: dict[str, float] = {}
    total: dict[str, float] = defaultdict(float)
    squares: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for feed in feeds:
        # graph inputs are joined too
        measured = list(zip(names, session.run(names, feed), strict=True)) + list(feed.items())
        for name, value in measured:
            value = np.asarray(value)
            if value.dtype.kind != "f" or not value.size:
                continue
            v = value.astype(np.float64, copy=False)
            low[name] = min(low.get(name, np.inf), float(v.min()))
            high[name] = max(high.get(name, -np.inf), float(v.max()))
            total[name] += float(v.sum())
            squares[name] += float(np.square(v).sum())
            count[name] += v.size
    ranges = {}
    for name in low:
        mean = total[name] / count[name]
        ranges[name] = TensorRange(low[name], high[name], float(np.sqrt(max(squares[name] / count[name] - mean ** 2,
                                                                            0.0))))
    return ranges


def join_mismatch(graph: Graph, node, ranges: dict[str, TensorRange]) -> float:
    """Widest over narrowest range among the node's run-time inputs (1.0 when fewer than two were measured)."""
    spans = [ranges[i].span for i in graph.activations(node) if i in ranges and ranges[i].span > 0]
    if len(spans) < 2:
        return 1.0
    return max(spans) / min(spans)


def _joins(graph: Graph, result: FloatPlan, factor: float) -> None:
    below = graph.compute_downstream()
    for node in graph.nodes:
        if node.op_type not in JOIN_OPS or node.name in result.nodes:
            continue
        ratio = join_mismatch(graph, node, result.ranges)
        if ratio <= factor:
            continue
        why = (f"joins tensors whose measured ranges differ {ratio:.0f}x (> {factor:g}x): "
               "one uint8 scale cannot hold both")
        if below[node.name]:
            result.candidates.append((node.name, why))  # a compute layer after it needs one scale anyway
            continue
        result.keep(node, why)
        for after in graph.downstream_to_outputs(node)[1:]:
            result.keep(after, f"between {node.name} (ranges {ratio:.0f}x apart) and the outputs")


def ranked_candidates(graph: Graph, result: FloatPlan, limit: int) -> list[tuple[str, str]]:
    """Nodes the sensitivity pass should try, most suspect first: range-mismatched joins that feed compute
    layers, then nodes whose output is coarsest under one uint8 scale (range / 255 against its spread)."""
    chosen = list(dict.fromkeys(result.candidates))
    scored = []
    for node in graph.nodes:
        if node.name in result.nodes or node.name in dict(chosen) or node.op_type == "Constant":
            continue
        out = next((o for o in node.output if o in result.ranges), None)
        if out is None:
            continue
        r = result.ranges[out]
        if r.span <= 0 or r.std <= 0:
            continue
        scored.append((r.span / 255 / r.std, node.name))
    scored.sort(reverse=True)
    for coarse, name in scored:
        if len(chosen) >= limit:
            break
        chosen.append((name, f"one uint8 step is {coarse:.2g} of its output's spread"))
    return chosen[:limit]
