"""Float TFLite layers run on the quantized model's values (see compare_local.py): the float model's flatbuffer
is rewritten, with LiteRT's own schema (``schema_py_generated``, object API), into one subgraph that holds every
layer's segment: the segment's ops copied with fresh tensors, the layers it reads as subgraph inputs, its output
as a subgraph output. Weights and other constants are shared, not copied. One interpreter runs all segments.
"""

from __future__ import annotations

import copy

from ..errors import runtime_message
from ..modelinfo import ModelInfo
from .compare_match import MAX_SEGMENT_NODES, Match, boundary_value

_SUBGRAPH_OPS = frozenset({"WHILE", "IF", "CALL_ONCE", "STABLEHLO_WHILE", "STABLEHLO_CASE"})


def _schema():
    try:
        from ai_edge_litert import schema_py_generated as schema
    except ImportError:
        from tensorflow.lite.python import schema_py_generated as schema  # TensorFlow's copy of the schema
    return schema


class TfliteSegments:
    def __init__(self, f_info: ModelInfo, segments: list) -> None:
        import flatbuffers

        from ..executors.base import default_threads
        from ..executors.litert import _first_interpreter_quietly, interpreter_module

        schema = _schema()
        model = schema.ModelT.InitFromPackedBuf(bytearray(f_info.path.read_bytes()), 0)
        if len(model.subgraphs) != 1:
            raise ValueError(f"the float model has {len(model.subgraphs)} subgraphs (control flow)")
        names = {i: n for n, i in vars(schema.BuiltinOperator).items() if not n.startswith("_")}
        sg = model.subgraphs[0]
        if any(names.get(max(c.builtinCode, c.deprecatedBuiltinCode)) in _SUBGRAPH_OPS for c in model.operatorCodes):
            raise ValueError("the float model calls subgraphs")
        producer = {out: i for i, op in enumerate(sg.operators) for out in op.outputs}
        graph_inputs = set(sg.inputs)
        tensors, operators = list(sg.tensors), []
        inputs, outputs = [], []
        self._feeds: list[tuple[int, Match]] = []  # (tensor index, boundary match)
        self.ends: list[int | None] = []
        real = {i for i, t in enumerate(sg.tensors) if t.type == schema.TensorType.FLOAT32}
        for boundary, end in segments:
            stop = {int(m.float.read): m for m in boundary}
            picked = _walk_back(int(end.float.read), producer, sg.operators, stop, graph_inputs)
            if picked is None or not {int(end.float.read), *stop} <= real:  # values fed and read are float
                self.ends.append(None)
                continue
            fresh: dict[int, int] = {}
            inside = set(picked)

            def remap(index: int, fresh=fresh, stop=stop, inside=inside) -> int:
                made = index in stop or (index in producer and producer[index] in inside)
                if index < 0 or not made:
                    return index  # optional input, constant, or a graph input fed as it is
                if index not in fresh:
                    tensor = copy.copy(sg.tensors[index])
                    tensor.name = _text(tensor.name) + f"__seg{len(self.ends)}"
                    fresh[index] = len(tensors)
                    tensors.append(tensor)
                return fresh[index]

            for i in picked:
                op = copy.copy(sg.operators[i])
                op.inputs = [remap(int(x)) for x in op.inputs]
                op.outputs = [remap(int(x)) for x in op.outputs]
                if op.intermediates is not None and len(op.intermediates):
                    op.intermediates = [remap(int(x)) for x in op.intermediates]
                operators.append(op)
            for index, m in stop.items():
                if index in fresh:
                    inputs.append(fresh[index])
                    self._feeds.append((fresh[index], m))
            self.ends.append(remap(int(end.float.read)))
            outputs.append(self.ends[-1])
        if not operators:
            raise ValueError("no layer of the float model reads and gives float values (is it quantized too?)")
        self._graph_inputs = [i for i in sg.inputs if any(i in op.inputs for op in operators)]
        sg.tensors, sg.operators = tensors, operators
        sg.inputs, sg.outputs = self._graph_inputs + inputs, outputs
        model.signatureDefs = []  # they name the original inputs and outputs
        builder = flatbuffers.Builder(1024)
        builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
        found = interpreter_module()
        if isinstance(found, str):
            raise ValueError(f"no LiteRT interpreter to run the cut model: {found}")
        module = found[0]
        kwargs = {"model_content": bytes(builder.Output()), "num_threads": default_threads()}
        if hasattr(module, "OpResolverType"):  # the builtin kernels, as the float model's tap ran it
            kwargs["experimental_op_resolver_type"] = module.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        try:
            with _first_interpreter_quietly():
                self._interpreter = module.Interpreter(**kwargs)
                self._interpreter.allocate_tensors()
        except Exception as exc:
            raise ValueError(f"LiteRT refused the cut model: {runtime_message(exc)}") from exc
        self._input_names = {index: _text(tensors[index].name) for index in self._graph_inputs}

    def run(self, q_values: dict, f_values: dict, f_feeds: dict) -> dict:
        it = self._interpreter
        for index in self._graph_inputs:  # a float model input that no matched layer replaces: the float sample
            it.set_tensor(index, f_feeds[self._input_names[index]])
        for index, m in self._feeds:
            it.set_tensor(index, boundary_value(m, q_values, f_values))
        it.invoke()
        return {k: it.get_tensor(index).copy() for k, index in enumerate(self.ends) if index is not None}


def _text(name) -> str:
    return name.decode("utf-8", "replace") if isinstance(name, (bytes, bytearray)) else (name or "")


def _walk_back(end: int, producer: dict, operators: list, stop: dict, leaves: set[int]) -> list[int] | None:
    """Indices of the ops between the ``stop`` tensors (and constants, graph inputs) and ``end``, in order."""
    if end in stop or end not in producer:
        return None
    seen: set[int] = set()
    pending = [end]
    while pending:
        index = pending.pop()
        if index < 0 or index in stop or index in leaves or index not in producer:
            continue
        op = producer[index]
        if op in seen:
            continue
        seen.add(op)
        if len(seen) > MAX_SEGMENT_NODES:
            return None
        pending.extend(int(x) for x in operators[op].inputs)
    return sorted(seen)
