"""The sensitivity pass: which quantized nodes of an int8 QDQ model cost too much accuracy at the outputs.

For each candidate (float_islands.ranked_candidates: range-mismatched joins, then the nodes whose output is
coarsest under one uint8 scale) the int8 model is run with that node taken out of int8 (its inputs read the
float tensors before their QuantizeLinear, its outputs skip their QuantizeLinear/DequantizeLinear pair) and
the error at the outputs is compared with the fully quantized model's. A node whose float island removes a
large share of the error is kept float. No recalibration is needed per candidate, so each costs one ONNX
Runtime session and a few runs; the pass stops at its time budget and says how far it got.

The error of an output is the RMS difference from the float model per channel (axis 1 of outputs with three or
more dimensions, so box coordinates in pixels do not drown class scores in 0..1), over that channel's spread,
averaged over channels and outputs.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np

log = logging.getLogger("edgeaccel.convert")

SAMPLES = 8  # outputs of a handful of samples rank candidates as well as hundreds
BUDGET_S = 30.0
CANDIDATES = 8
SHARE = 0.25  # a node is lossy when keeping it float removes this share of the int8 model's output error
MIN_ERROR = 0.01  # an int8 model this close to its float model has nothing worth searching for


@dataclass
class Finding:
    node: str
    why: str
    error_without: float  # output error with this node float, everything else as quantized


@dataclass
class SensitivityReport:
    error: float  # the quantized model's output error before the pass
    tried: int
    candidates: int
    seconds: float
    lossy: list[Finding]
    final_error: float  # with the lossy nodes float (measured on the model quantized again, once it is)
    reference: list = field(default_factory=list, repr=False)  # the float model's outputs on the samples
    feeds: list = field(default_factory=list, repr=False)
    final_estimated: bool = False  # final_error is the pass's in-place estimate, the requantized model unmeasured

    def note(self) -> str:
        estimated = " (estimated)" if self.final_estimated else ""
        found = (f"{len(self.lossy)} kept float, error then {self.final_error:.3g}{estimated}" if self.lossy
                 else "none lossy enough to keep float")
        return (f"sensitivity pass: int8 output error {self.error:.3g} (RMS per channel / spread, on "
                f"{SAMPLES} calibration samples at most); {self.tried} measurements of {self.candidates} "
                f"candidates in {self.seconds:.1f} s, {found}")


def output_error(reference: list[list[np.ndarray]], got: list[list[np.ndarray]]) -> float:
    """Mean per-channel RMS error over the channel's spread, over samples, channels and outputs."""
    per_output = []
    for k in range(len(reference[0])):
        ref = np.stack([np.asarray(r[k], np.float64) for r in reference])
        out = np.stack([np.asarray(g[k], np.float64) for g in got])
        if ref.dtype.kind not in "fiu" or ref.shape != out.shape or not ref.size:
            continue
        if ref.ndim >= 4:  # samples x batch x channels x ...: per channel
            axes = tuple(i for i in range(ref.ndim) if i != 2)
        else:
            axes = tuple(range(ref.ndim))
        spread = ref.std(axis=axes)
        floor = max(1e-3 * float(ref.max() - ref.min()), 1e-12)
        rms = np.sqrt(np.square(out - ref).mean(axis=axes))
        per_output.append(float(np.mean(rms / np.maximum(spread, floor))))
    return float(np.mean(per_output)) if per_output else 0.0


def run(model, feeds: list[dict[str, np.ndarray]]) -> list[list[np.ndarray]]:
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return [session.run(None, feed) for feed in feeds]


def measure_final(report: SensitivityReport, qdq_model) -> float:
    """The output error of the model quantized again with the lossy nodes excluded (the pass itself measured
    them by taking nodes out of int8 in place, which leaves their weights int8)."""
    report.final_error = output_error(report.reference, run(qdq_model, report.feeds))
    return report.final_error


def quantized_nodes(qdq_model) -> set[str]:
    """Names of the nodes of a QDQ model that read a DequantizeLinear or feed a QuantizeLinear."""
    producer = {o: n for n in qdq_model.graph.node for o in n.output}
    found = set()
    for node in qdq_model.graph.node:
        if node.op_type in ("QuantizeLinear", "DequantizeLinear"):
            continue
        if any(producer.get(i) is not None and producer[i].op_type == "DequantizeLinear" for i in node.input):
            found.add(node.name)
    for node in qdq_model.graph.node:
        if node.op_type == "QuantizeLinear" and node.input[0] in producer:
            found.add(producer[node.input[0]].name)
    return found - {""}


def without_int8(qdq_model, name: str):
    """A copy of ``qdq_model`` in which node ``name`` reads and writes float tensors (weights stay int8)."""
    import onnx

    model = onnx.ModelProto()
    model.CopyFrom(qdq_model)
    nodes = list(model.graph.node)
    producer = {o: n for n in nodes for o in n.output}
    consumers: dict[str, list] = {}
    for n in nodes:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    node = next(n for n in nodes if n.name == name)
    for k, tensor in enumerate(node.input):
        dq = producer.get(tensor)
        q = producer.get(dq.input[0]) if dq is not None and dq.op_type == "DequantizeLinear" else None
        if q is not None and q.op_type == "QuantizeLinear":
            node.input[k] = q.input[0]
    for tensor in node.output:
        for q in consumers.get(tensor, []):
            if q.op_type != "QuantizeLinear":
                continue
            for dq in consumers.get(q.output[0], []):
                if dq.op_type == "DequantizeLinear":  # becomes Identity of the float tensor, its name kept
                    dq.op_type = "Identity"
                    dq.domain = ""
                    del dq.input[:]
                    dq.input.append(tensor)
                    del dq.attribute[:]
    return model


def find_lossy(float_model, qdq_model, feeds, candidates: list[tuple[str, str]], *, budget_s: float = BUDGET_S,
               share: float = SHARE) -> SensitivityReport:
    """Greedy: measure every candidate (node name, why it is suspect) with the nodes found so far already float,
    keep the one that removes the most error if it removes at least ``share`` of it, and repeat, until none
    does or ``budget_s`` is spent."""
    start = time.perf_counter()
    feeds = feeds[:SAMPLES]
    quantized = quantized_nodes(qdq_model)
    candidates = [(n, why) for n, why in candidates if n in quantized]
    reference = run(float_model, feeds)
    base = output_error(reference, run(qdq_model, feeds))
    report = SensitivityReport(base, 0, len(candidates), 0.0, [], base, reference, feeds)
    current, error, left = qdq_model, base, list(candidates)
    while left and error >= MIN_ERROR and time.perf_counter() - start <= budget_s:
        best = None
        for name, why in left:
            if time.perf_counter() - start > budget_s:
                log.info("sensitivity pass: time budget of %.0f s spent", budget_s)
                break
            try:
                variant = without_int8(current, name)
                got = output_error(reference, run(variant, feeds))
            except Exception as exc:  # noqa: BLE001 - a variant ORT refuses is a candidate not measured
                log.debug("sensitivity pass: %s not measured: %s", name, exc)
                continue
            report.tried += 1
            if best is None or got < best[0]:
                best = (got, name, why, variant)
        if best is None or error - best[0] < share * error:
            break
        got, name, why, current = best
        report.lossy.append(Finding(name, f"sensitivity: {why}; float there, the int8 model's output error falls "
                                          f"from {error:.3g} to {got:.3g}", got))
        error = got
        left = [c for c in left if c[0] != name]
    report.final_error = error
    report.seconds = time.perf_counter() - start
    return report
