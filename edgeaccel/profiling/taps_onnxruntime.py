"""ONNX Runtime tap: every value a node computes is added to the graph's outputs (a ValueInfo with only a
name: ONNX Runtime infers the type), and one run returns them all.

A QDQ model then runs unfused: a value that is a graph output cannot disappear inside a fused integer kernel,
so each Conv computes in float on DequantizeLinear outputs and each QuantizeLinear/DequantizeLinear pair rounds
its result onto the int8 grid. That is the model's arithmetic up to the integer kernels' own rounding (one
step), which is what ONNX Runtime's own quantization debugger (qdq_loss_debug) measures the same way.
The value compared for a quantized tensor is its DequantizeLinear output: the rounded value the next op reads.
"""

from __future__ import annotations

from ..errors import ModelLoadError, runtime_message
from ..modelinfo import ModelInfo
from .taps import Tap, TapTensor, as_float

_PASSTHROUGH = frozenset({"QuantizeLinear", "DequantizeLinear"})
_FLOAT_TYPES = frozenset({1, 10, 11, 16})  # TensorProto FLOAT, FLOAT16, DOUBLE, BFLOAT16


class OnnxRuntimeTap(Tap):
    def __init__(self, info: ModelInfo) -> None:
        super().__init__("onnxruntime", info)
        from ..convert.onnx_util import fit_ir_version, import_onnx
        from ..executors.base import ExecutorOptions, default_threads
        from ..executors.onnxruntime import _ort, session_options

        onnx = import_onnx()
        try:
            model = onnx.load(str(info.path))  # external data is read from beside the model, by path
            fit_ir_version(model, info.path)
        except Exception as exc:
            raise ModelLoadError(f"cannot read {info.path.name}: {runtime_message(exc)}",
                                 runtime="onnxruntime") from exc
        weights = {t.name for t in model.graph.initializer}  # below IR 4 they are listed as inputs too
        self._input_names = [i.name for i in model.graph.input if i.name not in weights]
        self._build(model.graph, _elem_types(onnx, model))
        present = {o.name for o in model.graph.output}
        wanted = [t.id for t in self.tensors if t.readable and t.op_type != "input"]
        model.graph.output.extend(onnx.ValueInfoProto(name=name) for name in wanted if name not in present)
        self._fetch = wanted
        ort = _ort()
        try:
            self._session = ort.InferenceSession(model.SerializeToString(),
                                                 session_options(default_threads(), ExecutorOptions()),
                                                 providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise ModelLoadError(f"ONNX Runtime cannot open {info.path.name} with its intermediate values as "
                                 f"outputs: {runtime_message(exc)}", runtime="onnxruntime",
                                 hint="check that the model runs: edgeaccel run MODEL") from exc
        if any(t.passthrough for t in self.tensors):
            self.notes.append("ONNX Runtime ran the QDQ graph unfused to read every value (float ops on "
                              "dequantized values, rounded at each QuantizeLinear): the integer kernels agree "
                              "with it to about one quantization step")

    def _build(self, graph, types: dict[str, int]) -> None:
        constant = {t.name for t in graph.initializer}
        for node in graph.node:  # Constant nodes, and whatever is computed from constants only (weight DQ)
            ins = [i for i in node.input if i]
            if node.op_type == "Constant" or (ins and all(i in constant for i in ins)):
                constant.update(o for o in node.output if o)
        for name in self._input_names:
            self.tensors.append(TapTensor(name, name, "input", (), (), False, types.get(name, 1) in _FLOAT_TYPES))
        for node in graph.node:
            reads = tuple(i for i in node.input if i and i not in constant)
            for out in node.output:
                if not out or out in constant:
                    continue
                readable = types.get(out, 1) in _FLOAT_TYPES  # unknown type: read it and see
                self.tensors.append(TapTensor(out, out, node.op_type, (), reads, node.op_type in _PASSTHROUGH,
                                              readable))

    def run(self, feeds):
        arrays = self._session.run(self._fetch, dict(zip(self._input_names, feeds, strict=True)))
        values = {}
        for name, array in zip(self._input_names, feeds, strict=True):
            value = as_float(array)
            if value is not None:
                values[name] = value
        for name, array in zip(self._fetch, arrays, strict=True):
            value = as_float(array)
            if value is not None:
                values[name] = value
        return values

    def close(self) -> None:
        self._session = None


def _elem_types(onnx, model) -> dict[str, int]:
    """Element type of each value onnx's shape inference can tell (integer values are not compared)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # a model shape inference trips on still runs; unknown types are read and looked at
        inferred = model
    graph = inferred.graph
    return {v.name: v.type.tensor_type.elem_type for v in (*graph.input, *graph.value_info, *graph.output)
            if v.type.HasField("tensor_type")}
