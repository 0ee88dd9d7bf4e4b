"""The error a layer adds, measured directly: the float model's own ops for that layer, run on the QUANTIZED
model's values of the layers it reads, against the quantized layer's output. Downstream of a broken layer the
inputs are already wrong on both sides, so a layer that only inherits error adds almost none here.

This needs the float model's ops one layer at a time, which ONNX allows: every layer's segment (the float
nodes between the matched layers it reads and its own output, constants included) is copied, renamed, into
one ONNX model whose inputs are those layers' values, and ONNX Runtime runs all segments in one call per
sample. Float TFLite and OpenVINO models cannot be cut like this; there the added error is the layer's
relative error minus the worst of its inputs' (compare.py).
"""

from __future__ import annotations

import numpy as np

from ..modelinfo import Format, ModelInfo
from .compare_match import LayerGraph, Match

MAX_SEGMENT_NODES = 64  # a longer walk means the boundary was missed (unmatched branch): use the estimate


class LocalErrors:
    """Per row, summed over samples: the squared difference between the quantized layer's output and the float
    op(s) run on the quantized inputs, and the squared norm of the latter (what the layer should have given)."""

    def __init__(self, f_info: ModelInfo, f_graph: LayerGraph, matches: list[Match], segments: list) -> None:
        """``segments[k]``: (boundary matches, end match) for row k; the local value of row k is the end
        match's float op(s) run on the boundary matches' quantized values."""
        self.available = False
        self.note = ""
        self.err2 = np.zeros(len(segments))
        self.ref2 = np.zeros(len(segments))  # of the float op's output on the quantized inputs
        self._segments = segments
        if f_info.format is not Format.ONNX:
            self.note = (f"added error = a tensor's relative error minus the worst of its inputs' (the float model "
                         f"is {f_info.format.value}: its layers cannot be run one by one here)")
            return
        try:
            self._build(f_info, f_graph)
            self.available = True
        except Exception as exc:  # a graph this cannot cut (subgraphs, odd types): say so, use the estimate
            self.note = (f"added error = relative error minus the worst input's: the float layers could not be "
                         f"run on the quantized inputs ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})")

    def _build(self, f_info: ModelInfo, f_graph: LayerGraph) -> None:
        import onnx
        from onnx import TensorProto, helper

        from ..convert.onnx_util import fit_ir_version
        from ..executors.base import ExecutorOptions, default_threads
        from ..executors.onnxruntime import _ort, session_options

        model = onnx.load(str(f_info.path))
        graph = model.graph
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for n in graph.node
               for a in n.attribute):
            raise ValueError("the float model has control-flow subgraphs")
        producer = {o: n for n in graph.node for o in n.output}
        weights = {t.name for t in graph.initializer}
        graph_inputs = {i.name for i in graph.input} - weights
        nodes, inputs, outputs, self._feeds, self._ends = [], [], [], [], []
        used_inputs: set[str] = set()
        order = {id(n): i for i, n in enumerate(graph.node)}
        for k, (boundary, end) in enumerate(self._segments):
            stop = {_name(m): m for m in boundary}
            picked = _walk_back(_name(end), producer, stop, weights | graph_inputs, order)
            if picked is None:
                self._ends.append(None)
                continue
            tag = f"__seg{k}"

            def rename(name: str, tag=tag, stop=stop) -> str:
                if name in stop:  # fed with the quantized model's value, even where it is a graph input
                    return name + tag
                if not name or name in weights or name in graph_inputs:
                    return name
                return name + tag

            for node in picked:
                copy = helper.make_node(node.op_type, [rename(i) for i in node.input],
                                        [rename(o) for o in node.output], name=(node.name or node.op_type) + tag,
                                        domain=node.domain)
                copy.attribute.extend(node.attribute)
                nodes.append(copy)
                used_inputs.update(i for i in node.input if i in graph_inputs and i not in stop)
            for name, m in stop.items():
                if any(name in n.input for n in picked):
                    inputs.append(helper.make_tensor_value_info(rename(name), TensorProto.FLOAT, None))
                    self._feeds.append((rename(name), m))
            outputs.append(onnx.ValueInfoProto(name=rename(_name(end))))
            self._ends.append(rename(_name(end)))
        if not nodes:
            raise ValueError("no layer segment to run")
        self._graph_inputs = [i for i in graph.input if i.name in used_inputs]
        cut = helper.make_graph(nodes, "segments", [*self._graph_inputs, *inputs], outputs,
                                [t for t in graph.initializer])
        segment_model = helper.make_model(cut, opset_imports=list(model.opset_import))
        segment_model.ir_version = model.ir_version
        fit_ir_version(segment_model, f_info.path)
        self._session = _ort().InferenceSession(segment_model.SerializeToString(),
                                                session_options(default_threads(), ExecutorOptions()),
                                                providers=["CPUExecutionProvider"])
        self._fetch = [e for e in self._ends if e is not None]

    def add(self, q_values: dict, f_values: dict, f_feeds: dict) -> None:
        if not self.available:
            return
        feeds = {i.name: f_feeds[i.name] for i in self._graph_inputs}
        for name, m in self._feeds:
            feeds[name] = np.ascontiguousarray(m.align(q_values[m.quantized.read]), np.float32).reshape(
                f_values[m.float.read].shape)
        got = dict(zip(self._fetch, self._session.run(self._fetch, feeds)))
        for k, (_, end) in enumerate(self._segments):
            name = self._ends[k]
            if name is None:
                continue
            q = end.align(q_values[end.quantized.read]).astype(np.float64)
            want = got[name].astype(np.float64).reshape(q.shape)
            self.err2[k] += float(np.square(q - want).sum())
            self.ref2[k] += float(np.square(want).sum())

    def measured(self, k: int) -> bool:
        return self.available and self._ends[k] is not None

    def close(self) -> None:
        self._session = None


def _name(m: Match) -> str:
    """The float tensor's name in the ONNX file (the tap's id where the runtime kept no name)."""
    return m.float.read_name or m.float.read


def _walk_back(end: str, producer: dict, stop: dict, leaves: set[str], order: dict) -> list | None:
    """The nodes between the ``stop`` tensors (and constants, graph inputs) and ``end``, in graph order; None
    when ``end`` is itself a stop (nothing to run) or the walk grows past MAX_SEGMENT_NODES."""
    if end in stop or end not in producer:
        return None
    seen: dict[int, object] = {}
    pending = [end]
    while pending:
        name = pending.pop()
        if not name or name in stop or name in leaves or name not in producer:
            continue
        node = producer[name]
        if id(node) in seen:
            continue
        seen[id(node)] = node
        if len(seen) > MAX_SEGMENT_NODES:
            return None
        pending.extend(node.input)
    return sorted(seen.values(), key=lambda n: order[id(n)])
