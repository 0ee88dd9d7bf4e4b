"""Edge TPU readiness of a TFLite model, read from the file alone: is it fully integer, which operations the
Edge TPU compiler will not map (edgetpu_ops.SUPPORTED and the limitations we can check from shapes, options
and constant tensors), and the ``edgetpu_compiler`` command line to run.

This never compiles anything and never claims a model *will* compile: the compiler (x86-64 Linux only) is the
final word, and its ``-s`` report says what it actually mapped.
"""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..formats import flatbuf, tflite
from .edgetpu_ops import COMPILER_URL, DOC_URL, PARTITION_NOTE, SUPPORTED

_INT8, _UINT8, _INT32, _FLOAT32, _INT64 = 9, 3, 2, 0, 4
_QUANTIZED_TYPES = (_INT8, _UINT8)
_CONST_OK_TYPES = (_INT8, _UINT8, _INT32, _INT64)  # weights, biases, shapes, axes, paddings


@dataclass(frozen=True)
class Issue:
    message: str
    op: str | None = None
    index: int | None = None  # operator index in the primary subgraph

    def __str__(self) -> str:
        where = f"#{self.index} {self.op}: " if self.op is not None else ""
        return where + self.message


@dataclass
class EdgeTpuReport:
    model: Path
    fully_integer: bool
    wide_tensors: list[str] = field(default_factory=list)  # tensors that are not 8-bit (float, int16, int32)
    unmapped: list[Issue] = field(default_factory=list)  # ops the compiler will leave on the CPU
    model_issues: list[Issue] = field(default_factory=list)  # requirements the whole model breaks
    notes: list[str] = field(default_factory=list)  # may-not-map warnings and CPU ops at the edges
    op_count: int = 0
    first_unmapped: int | None = None
    cpu_ops: int = 0  # unmapped ops and every op downstream of one (the compiler partitions once)
    compiler: str | None = None  # path of edgetpu_compiler here, when found
    command: str = ""
    doc_url: str = DOC_URL

    @property
    def ready(self) -> bool:
        """Nothing found that stops the whole graph from mapping (the compiler may still disagree)."""
        return self.fully_integer and not self.unmapped and not self.model_issues

    @property
    def ops_on_cpu(self) -> int:
        return self.cpu_ops

    def as_dict(self) -> dict:
        return {"model": str(self.model), "ready": self.ready, "fully_integer": self.fully_integer,
                "wide_tensors": self.wide_tensors, "unmapped": [str(i) for i in self.unmapped],
                "model_issues": [str(i) for i in self.model_issues], "notes": self.notes,
                "op_count": self.op_count, "ops_on_cpu": self.ops_on_cpu, "compiler": self.compiler,
                "command": self.command, "doc_url": self.doc_url}

    def lines(self) -> list[str]:
        out = [f"Edge TPU readiness of {self.model.name}: "
               + ("no blocker found (the compiler has the final word)" if self.ready else "not ready")]
        out.append(f"  fully integer: {'yes' if self.fully_integer else 'no'}"
                   + (f" (not 8-bit: {', '.join(self.wide_tensors[:5])}"
                      f"{' ...' if len(self.wide_tensors) > 5 else ''})" if self.wide_tensors else ""))
        out += [f"  model: {i}" for i in self.model_issues]
        out += [f"  not mapped: {i}" for i in self.unmapped]
        if self.cpu_ops:
            out.append(f"  {self.ops_on_cpu} of {self.op_count} ops would run on the CPU ({PARTITION_NOTE})")
        out += [f"  note: {n}" for n in self.notes]
        out.append(f"  supported operations: {self.doc_url}")
        if self.compiler:
            out.append(f"  compile it with: {self.command}")
        else:
            out.append(f"  edgetpu_compiler is not installed here ({COMPILER_URL}); where it is, run: {self.command}")
        return out


def readiness(path: str | os.PathLike, out_dir: str | os.PathLike | None = None) -> EdgeTpuReport:
    """Check the TFLite model at ``path``. ``out_dir`` goes into the compiler command (default: beside it)."""
    path = Path(path)
    buf = path.read_bytes()
    model = tflite.parse(buf)
    raw = flatbuf.root(buf)
    compiler = shutil.which("edgetpu_compiler")
    out = Path(out_dir) if out_dir else path.parent
    command = shlex.join(["edgetpu_compiler", "-s", "-o", str(out), str(path)])
    report = EdgeTpuReport(model=path, fully_integer=True, compiler=compiler, command=command)
    if tflite.EDGETPU_CUSTOM_OP in model.custom_ops:
        report.model_issues.append(Issue("already compiled for the Edge TPU (edgetpu-custom-op)"))
        return report
    if len(model.subgraphs) > 1:
        report.model_issues.append(Issue(f"{len(model.subgraphs)} subgraphs: the compiler maps the first only"))
    sg = model.primary
    raw_ops = raw.tables(2)[0].tables(3)
    report.op_count = len(sg.operators)
    consts = _constants(model, buf)
    _check_tensors(report, model, sg, consts)
    for index, (op, raw_op) in enumerate(zip(sg.operators, raw_ops, strict=True)):
        name = model.opcodes[op.opcode_index] if op.opcode_index < len(model.opcodes) else "?"
        why = _why_not_mapped(name, op, raw_op, sg, consts, model)
        if why is None:
            continue
        if _cpu_at_edge(name, op, sg):
            report.notes.append(f"#{index} {name} converts float I/O at the graph's edge and runs on the CPU")
            continue
        if why.startswith("may "):
            report.notes.append(f"#{index} {name}: {why}")
            continue
        report.unmapped.append(Issue(why, name, index))
        if report.first_unmapped is None:
            report.first_unmapped = index
    report.cpu_ops = _downstream_count(sg, {i.index for i in report.unmapped if i.index is not None})
    return report


def _downstream_count(sg, unmapped: set[int]) -> int:
    """Ops that are unmapped or read (transitively) from one: the CPU part after the single partition."""
    if not unmapped:
        return 0
    on_cpu_tensors: set[int] = set()
    count = 0
    for index, op in enumerate(sg.operators):  # operators are stored in execution (topological) order
        if index in unmapped or any(i in on_cpu_tensors for i in op.inputs):
            count += 1
            on_cpu_tensors.update(op.outputs)
    return count


def _constants(model: tflite.TflModel, buf: bytes) -> dict[int, np.ndarray]:
    """Constant tensors of the primary subgraph (those whose buffer holds data), decoded where numpy can."""
    out: dict[int, np.ndarray] = {}
    for i, t in enumerate(model.primary.tensors):
        if 0 < t.buffer < len(model.buffer_ranges):
            start, size = model.buffer_ranges[t.buffer]
            dtype = tflite.TENSOR_TYPES.get(t.type, ("", None))[1]
            if size and dtype is not None and dtype != np.dtype(object) and size % dtype.itemsize == 0:
                out[i] = np.frombuffer(buf, dtype, count=size // dtype.itemsize, offset=start)
    return out


def _check_tensors(report: EdgeTpuReport, model, sg, consts: dict[int, np.ndarray]) -> None:
    inputs_of_quantize: set[int] = set()  # tensor indices
    outputs_of_dequantize: set[int] = set()
    for op in sg.operators:
        name = model.opcodes[op.opcode_index] if op.opcode_index < len(model.opcodes) else "?"
        if name == "QUANTIZE":
            inputs_of_quantize.update(i for i in op.inputs if i in sg.inputs)
        if name == "DEQUANTIZE":
            outputs_of_dequantize.update(o for o in op.outputs if o in sg.outputs)
    dynamic, high_rank = [], []
    for i, t in enumerate(sg.tensors):
        if any(d < 0 for d in t.shape_signature):
            dynamic.append(t.name)
        is_const = i in consts
        # Weights are laid out by the compiler itself (4-D conv filters compile fine): activations only.
        if not is_const and len(t.shape) > 3 and any(d > 1 for d in t.shape[:-3]):
            high_rank.append(f"{t.name} {list(t.shape)}")
        allowed = _CONST_OK_TYPES if is_const else _QUANTIZED_TYPES
        if t.type in allowed or i in inputs_of_quantize or i in outputs_of_dequantize:
            continue
        if not is_const and t.type in (_INT32, _INT64) and _is_index_tensor(i, sg, model):
            continue
        report.fully_integer = False
        report.wide_tensors.append(f"{t.name} ({tflite.type_name(t.type)}{', constant' if is_const else ''})")
    if dynamic:
        report.model_issues.append(Issue(f"dynamic tensor sizes ({', '.join(dynamic[:3])}): the compiler needs "
                                         f"sizes that are constant at compile time"))
    if high_rank:
        report.model_issues.append(Issue(f"tensors with more than 3 dimensions larger than 1 "
                                         f"({', '.join(high_rank[:3])}): only the 3 innermost may exceed 1"))


def _is_index_tensor(index: int, sg, model) -> bool:
    """int32 outputs of shape/arg ops are indices, not quantized values (the op itself is judged elsewhere)."""
    for op in sg.operators:
        if index in op.outputs:
            return model.opcodes[op.opcode_index] in ("SHAPE", "ARG_MAX", "ARG_MIN", "TOPK_V2")
    return False


def _cpu_at_edge(name: str, op, sg) -> bool:
    """QUANTIZE of a float graph input and DEQUANTIZE to a float graph output wrap the integer body."""
    if name == "DEQUANTIZE":
        return all(o in sg.outputs for o in op.outputs)
    if name == "QUANTIZE":
        return all(i in sg.inputs for i in op.inputs) and sg.tensors[op.inputs[0]].type == _FLOAT32
    return False


def _effective_rank(shape) -> int:
    """Dimensions after dropping leading 1s: [1, 1, 10] is one-dimensional for the Edge TPU."""
    dims = list(shape)
    while len(dims) > 1 and dims[0] == 1:
        dims.pop(0)
    return len(dims)


def _why_not_mapped(name: str, op, raw_op, sg, consts: dict[int, np.ndarray], model) -> str | None:
    supported = SUPPORTED.get(name)
    if supported is None:
        if name == "DEQUANTIZE" or name == "QUANTIZE":
            return f"{name} inside the graph (float math between integer sections)"
        return "not in the Edge TPU supported-operation list"
    options = raw_op.table(4)
    tensors = sg.tensors
    in_shape = tensors[op.inputs[0]].shape if op.inputs and op.inputs[0] >= 0 else ()
    out_shape = tensors[op.outputs[0]].shape if op.outputs else ()
    if name in ("AVERAGE_POOL_2D", "MAX_POOL_2D") and options is not None and options.scalar(5, "b", 0):
        return "has a fused activation function (AveragePool2d/MaxPool2d allow none)"
    if name == "CONCATENATION":
        if options is not None and options.scalar(1, "b", 0):
            return "has a fused activation function (Concatenation allows none)"
        const_inputs = [i for i in op.inputs if i in consts]
        if const_inputs and (len(op.inputs) != 2 or any(np.any(consts[i]) for i in const_inputs)):
            return "concatenates a constant that is not an all-zero pad of a 2-input concat"
    if name in ("CONV_2D", "DEPTHWISE_CONV_2D") and options is not None:
        w_i, h_i = (4, 5) if name == "CONV_2D" else (5, 6)
        if options.scalar(w_i, "i", 1) != options.scalar(h_i, "i", 1):
            return "uses different dilations in x and y"
    if name == "FULLY_CONNECTED" and _effective_rank(out_shape) > 1:
        return f"output {list(out_shape)} is not one-dimensional"
    if name == "SOFTMAX":
        if _effective_rank(in_shape) > 1:
            return f"input {list(in_shape)} is not one-dimensional"
        if in_shape and int(np.prod(in_shape)) > 16000:
            return f"input has {int(np.prod(in_shape))} elements (at most 16,000)"
    if name in ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN") and len(op.inputs) > 1 and op.inputs[1] in consts:
        axes = [int(a) % max(len(in_shape), 1) for a in consts[op.inputs[1]]]
        if 0 in axes and len(in_shape) >= 3:
            return "reduces over the batch dimension"
        if name == "MEAN" and len(in_shape) - 1 in axes and in_shape and in_shape[-1] % 4:
            return f"reduces over z with depth {in_shape[-1]}, not a multiple of 4"
    if name == "PAD" and len(op.inputs) > 1 and op.inputs[1] in consts and len(in_shape) >= 3:
        if np.any(consts[op.inputs[1]].reshape(-1, 2)[0]):
            return "pads the batch dimension"
    if name == "SPLIT" and op.inputs and op.inputs[0] in consts and len(out_shape) >= 3:
        if int(consts[op.inputs[0]].reshape(-1)[0]) % len(out_shape) == 0:
            return "splits the batch dimension"
    if name == "PACK" and options is not None and options.scalar(1, "i", 0) == 0 and len(out_shape) >= 3:
        return "packs along the batch dimension"
    if name == "STRIDED_SLICE":
        if len(op.inputs) > 3 and op.inputs[3] in consts and np.any(consts[op.inputs[3]] != 1):
            return "has strides other than 1"
        if options is not None and (options.scalar(2, "i", 0) or options.scalar(3, "i", 0)):
            return "uses an ellipsis or new-axis mask"
    if name in ("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"):
        return "may not be mapped depending on input/output size (the compiler avoids precision loss)"
    return None
