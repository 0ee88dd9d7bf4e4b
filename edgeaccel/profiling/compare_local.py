"""The error a layer adds, measured directly: the float model's own ops for that layer, run on the QUANTIZED
model's values of the layers it reads, against the quantized layer's output. Downstream of a broken layer the
inputs are already wrong on both sides, so a layer that only inherits error adds almost none here.

This needs the float model's ops one layer at a time: every layer's segment (the float ops between the matched
layers it reads and its own output; constants shared) is copied, renamed, into one model whose inputs are those
layers' values, run once per sample: ONNX here (ONNX Runtime), TFLite in compare_local_tflite.py (LiteRT).
A float OpenVINO IR is not cut; there the added error is the layer's relative error minus the worst of its
inputs' (compare.py), and a note says so.
"""

from __future__ import annotations


from ..agreement.tensors import ErrorSums
from ..modelinfo import Format, ModelInfo
from .compare_match import MAX_SEGMENT_NODES, Match, boundary_value


class LocalErrors:
    """Per row, summed over samples: the squared difference between the quantized layer's output and the float
    op(s) run on the quantized inputs, and the squared norm of the latter (what the layer should have given)."""

    def __init__(self, f_info: ModelInfo, segments: list) -> None:
        """``segments[k]``: (boundary matches, end match) for row k; the local value of row k is the end
        match's float op(s) run on the boundary matches' quantized values."""
        self.note = ""
        # per row: the quantized layer's output against the float op's output on the quantized inputs
        self.sums = [ErrorSums() for _ in segments]
        self._segments = segments
        self._backend: _OnnxSegments | TfliteSegments | None = None
        if f_info.format not in (Format.ONNX, Format.TFLITE):
            self.note = (f"added error = a tensor's relative error minus the worst of its inputs' (the float model "
                         f"is {f_info.format.value}: its layers cannot be run one by one here)")
            return
        try:
            if f_info.format is Format.ONNX:
                self._backend = _OnnxSegments(f_info, segments)
            else:
                from .compare_local_tflite import TfliteSegments

                self._backend = TfliteSegments(f_info, segments)
        except Exception as exc:  # a graph this cannot cut (subgraphs, odd types): say so, use the estimate
            self.note = (f"added error = relative error minus the worst input's: the float layers could not be "
                         f"run on the quantized inputs ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})")
        self._measured = [e is not None for e in self._backend.ends] if self._backend else [False] * len(segments)


    def add(self, q_values: dict, f_values: dict, f_feeds: dict) -> None:
        if self._backend is None:
            return
        try:
            got = self._backend.run(q_values, f_values, f_feeds)
        except Exception as exc:  # the cut model took its build but not these values: use the estimate
            self._backend = None
            self._measured = [False] * len(self._segments)
            self.note = (f"added error = relative error minus the worst input's: the float layers could not be "
                         f"run on the quantized inputs ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})")
            return
        for k, (_, end) in enumerate(self._segments):
            if k not in got:
                continue
            q = end.align(q_values[end.quantized.read])
            self.sums[k].add(got[k].reshape(q.shape), q)

    def measured(self, k: int) -> bool:
        return self._measured[k]

    def close(self) -> None:
        self._backend = None  # its session or interpreter; the sums stay


class _OnnxSegments:
    """Every segment copied, renamed, into one ONNX model; ONNX Runtime runs them all in one call."""

    def __init__(self, f_info: ModelInfo, segments: list) -> None:
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
        nodes, inputs, outputs, self._feeds = [], [], [], []
        self.ends: list[str | None] = []  # per row, the output that row's local value is read from
        used_inputs: set[str] = set()
        order = {id(n): i for i, n in enumerate(graph.node)}
        for k, (boundary, end) in enumerate(segments):
            stop = {_name(m): m for m in boundary}
            picked = _walk_back(_name(end), producer, stop, weights | graph_inputs, order)
            if picked is None:
                self.ends.append(None)
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
            self.ends.append(rename(_name(end)))
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
        self._fetch = [e for e in self.ends if e is not None]

    def run(self, q_values: dict, f_values: dict, f_feeds: dict) -> dict:
        feeds = {i.name: f_feeds[i.name] for i in self._graph_inputs}
        for name, m in self._feeds:
            feeds[name] = boundary_value(m, q_values, f_values)
        got = dict(zip(self._fetch, self._session.run(self._fetch, feeds), strict=True))
        return {k: got[name] for k, name in enumerate(self.ends) if name is not None}


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
