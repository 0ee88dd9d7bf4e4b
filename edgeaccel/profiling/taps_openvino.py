"""OpenVINO tap: the model is read, every op output that carries a tensor name (and every FakeQuantize) is
added as a model output (``model.add_outputs``), and the model is compiled for the CPU at f32: OpenVINO's bf16
default on this CPU would add its own error to the float model (runtime facts).

OpenVINO decomposes ops on reading (a Conv with bias becomes Convolution + Add, a QDQ pair a FakeQuantize, a
DequantizeLinear Convert + Subtract + Multiply). Only the outputs that keep a name from the model are the
model's tensors; the unnamed ones inside a decomposition are walked through for the graph, not compared.
A named Add/Multiply that finishes a decomposed op is reported as the op it finishes (Convolution, MatMul).
"""

from __future__ import annotations

from ..errors import ModelLoadError, runtime_message
from ..modelinfo import ModelInfo
from .taps import Tap, TapTensor, as_float

_SKIP = frozenset({"Constant", "Result"})
_BIAS_OPS = frozenset({"Add", "Multiply", "Subtract"})
_DEQUANTIZE_STEPS = frozenset({"Subtract", "Multiply"})
_WEIGHTED_OPS = frozenset({"Convolution", "GroupConvolution", "MatMul", "ConvolutionBackpropData",
                           "GroupConvolutionBackpropData"})


class OpenVINOTap(Tap):
    def __init__(self, info: ModelInfo) -> None:
        super().__init__("openvino", info)
        from ..executors.openvino import OpenVINOExecutor, _core_lock, core

        try:
            with _core_lock:
                model = core().read_model(str(info.path))
            ops = model.get_ordered_ops()
        except Exception as exc:
            raise ModelLoadError(f"OpenVINO cannot read {info.path.name}: {runtime_message(exc)}",
                                 runtime="openvino") from exc
        ports = self._build(ops)
        self._param_ids = [_port_id(p.output(0)) for p in model.get_parameters()]  # model.inputs' order
        unnamed = sum(1 for t in self.tensors if t.name is None and not t.passthrough and t.op_type != "ShapeOf")
        if unnamed:
            self.notes.append(f"OpenVINO: {unnamed} unnamed values inside decomposed ops (bias adds, weight "
                              f"dequantization) were walked through, not compared")
        model.add_outputs([ports[t.id] for t in self.tensors if t.readable and t.op_type != "input"])
        position: dict[str, int] = {}  # output port id -> its index among the model's outputs
        for i, out in enumerate(model.outputs):
            source = out.get_node().input(0).get_source_output()
            position.setdefault(_port_id(source), i)
        self._fetch = [(t.id, position[t.id]) for t in self.tensors if t.readable and t.id in position]
        try:
            self._compiled = core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
            self._request = self._compiled.create_infer_request()
            self._in_ports = OpenVINOExecutor._match(self._compiled.inputs, info.inputs)
        except Exception as exc:
            raise ModelLoadError(f"OpenVINO cannot compile {info.path.name} with its intermediate values as "
                                 f"outputs: {runtime_message(exc)}", runtime="openvino") from exc

    def _build(self, ops) -> dict:
        """TapTensors in OpenVINO's order; returns {tensor id: the op output} for the ones to add as outputs.

        Re-encoding steps are passthrough: FakeQuantize, Convert, and the Subtract/Multiply of a decomposed
        DequantizeLinear (one non-constant input, coming from a Convert). A FakeQuantize that feeds a Convert
        to an integer type gives integers (OpenVINO's QuantizeLinear), not real values: it is not read."""
        constant: set[str] = set()
        names: dict[str, str | None] = {}
        producer: dict[str, object] = {}
        integer_fq = {_port_id(op.input(0).get_source_output()) for op in ops if op.get_type_name() == "Convert"
                      and not op.output(0).get_element_type().is_real()}
        ports = {}
        chain: set[str] = set()  # outputs of Convert and of the dequantize steps after it
        for op in ops:
            kind = op.get_type_name()
            sources = [i.get_source_output() for i in op.inputs()]
            if kind == "Constant" or (sources and all(_port_id(s) in constant for s in sources)):
                constant.update(_port_id(o) for o in op.outputs())
                continue
            if kind in _SKIP:
                continue
            reads = tuple(_port_id(s) for s in sources if _port_id(s) not in constant)
            passthrough = kind in ("FakeQuantize", "Convert") or (
                kind in _DEQUANTIZE_STEPS and len(reads) == 1 and reads[0] in chain)
            for out in op.outputs():
                pid = _port_id(out)
                name = min(out.get_names(), default=None)
                names[pid], producer[pid] = name, op
                if kind == "Convert" or (passthrough and kind in _DEQUANTIZE_STEPS):
                    chain.add(pid)
                readable = (out.get_element_type().is_real() and (name is not None or passthrough)
                            and pid not in integer_fq)
                op_type = "input" if kind == "Parameter" else _finished_op(op, kind, reads, names, producer)
                shape = tuple(out.get_partial_shape().to_shape()) if out.get_partial_shape().is_static else ()
                self.tensors.append(TapTensor(pid, name, op_type, shape, reads, passthrough, readable))
                ports[pid] = out
        return ports

    def run(self, feeds):
        for port, array in zip(self._in_ports, feeds, strict=True):
            self._request.set_input_tensor(port, _ov_tensor(array))
        self._request.infer()
        values = {}
        for port, array in zip(self._in_ports, feeds, strict=True):
            value = as_float(array)
            if value is not None:
                values[self._param_ids[port]] = value
        for pid, index in self._fetch:
            value = as_float(self._request.get_output_tensor(index).data)
            if value is not None:
                values[pid] = value.copy()
        return values

    def close(self) -> None:
        self._request = self._compiled = None


def _port_id(output) -> str:
    return f"{output.get_node().get_name()}:{output.get_index()}"


def _finished_op(op, kind: str, reads: tuple[str, ...], names: dict, producer: dict) -> str:
    """A named bias Add (or scale Multiply) on an unnamed Convolution/MatMul stands for that op: Conv+bias
    reads as Convolution + Add, and the tensor the model named is the Add's."""
    if kind in _BIAS_OPS:
        for r in reads:
            if names.get(r) is None and r in producer and producer[r].get_type_name() in _WEIGHTED_OPS:
                return producer[r].get_type_name()
    return kind


def _ov_tensor(array):
    import numpy as np

    from ..executors.openvino import _ov

    return _ov().Tensor(np.asarray(array, order="C"))
