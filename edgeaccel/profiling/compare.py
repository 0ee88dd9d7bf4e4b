"""Which layer of a quantized model loses accuracy: every intermediate tensor of the quantized model against
the same tensor of its float origin, on the same inputs (``edgeaccel profile MODEL --compare FLOAT``).

    from edgeaccel.profiling.compare import compare_layers
    result = compare_layers("build/")                          # a bundle from edgeaccel convert
    result = compare_layers("m_int8.tflite", "m_float.tflite", ["bird.png", "cat.png"])
    print("\\n".join(result.table_lines(top=10)))

Per matched tensor, over all samples: SQNR (dB) and relative L2 error ||q - f|| / ||f||, both cumulative
(everything upstream contributes), and the error the layer ADDS: its float op(s) run on the quantized values of
the layers it reads, against its quantized output (compare_local.py: float ONNX and TFLite models), else its
relative error minus the worst of those layers'. Rows are ranked by what a layer adds, so a layer with broken
weights comes first and the layers after it, which inherit its error without adding to it, do not.

Tensors are captured on real runtimes (``taps``) and matched by name, then by op type and shape
(``compare_match``); what matches on neither side is listed in ``unmatched``, never dropped.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path


from ..modelfiles import bundle
from .. import formats
from ..agreement.tensors import ErrorSums
from ..errors import EdgeAccelError, InferenceError, ModelError, runtime_message
from ..modelinfo import Format, ModelInfo
from . import compare_inputs
from .compare_local import LocalErrors
from .compare_match import ACTIVATIONS, LayerGraph, Match, canonical_op, match_layers
from .taps import runtime_for
from .taps_open import open_tap

log = logging.getLogger("edgeaccel.profile")

DEFAULT_SAMPLES = 8
_SAME_FORMAT_FIRST = (Format.TFLITE, Format.ONNX, Format.OPENVINO_IR)


@dataclass
class LayerError:
    name: str  # the tensor's name in the quantized model
    op_type: str  # the op that produced it there
    shape: list[int]
    sqnr_db: float | None  # 10 log10(||f||^2 / ||q - f||^2); None where the values are identical
    rel_error: float  # ||q - f|| / ||f|| over all samples: the error accumulated up to this tensor
    added_error: float  # what this layer alone adds: measured, or rel_error minus input_error (see added_by)
    input_error: float = 0.0  # the worst rel_error among the layers it reads
    inputs: list[str] = field(default_factory=list)  # those layers (matched ones, nearest upstream)
    max_abs_error: float = 0.0
    float_name: str = ""  # the matching tensor in the float model
    matched_by: str = "name"  # or "op+shape"
    activation: str = ""  # the activation right after it, ranked with it as one unit (see _activation_after)
    added_by: str = "minus worst input"  # or "float op on quantized inputs" (compare_local.py)

    def to_dict(self) -> dict:
        return {"name": self.name, "op_type": self.op_type, "shape": self.shape,
                "sqnr_db": _finite(self.sqnr_db, 2), "rel_error": _finite(self.rel_error, 6),
                "added_error": _finite(self.added_error, 6), "input_error": _finite(self.input_error, 6),
                "inputs": self.inputs, "max_abs_error": _finite(self.max_abs_error, 6),
                "float_name": self.float_name, "matched_by": self.matched_by, "activation": self.activation,
                "added_by": self.added_by}


@dataclass
class LayerComparison:
    rows: list[LayerError]  # one per matched tensor, in the quantized graph's order
    unmatched: list[str]  # "quantized: NAME (OP SHAPE)" / "float: ...", every tensor left unmatched
    inputs_used: str  # where the inputs came from
    model: str = ""
    float_model: str = ""
    runtimes: dict = field(default_factory=dict)  # {"quantized": "litert", "float": "litert"}
    samples: int = 0
    notes: list[str] = field(default_factory=list)

    def worst(self, n: int = 10) -> list[LayerError]:
        """The ``n`` layers that add the most error, most first."""
        return sorted(self.rows, key=lambda r: (-_sortable(r.added_error), -_sortable(r.rel_error)))[:n]

    def to_dict(self) -> dict:
        return {"schema": "edgeaccel.compare/1", "model": self.model, "float_model": self.float_model,
                "runtimes": self.runtimes, "inputs_used": self.inputs_used, "samples": self.samples,
                "rows": [r.to_dict() for r in self.rows], "unmatched": self.unmatched, "notes": self.notes,
                "ranking": [r.name for r in self.worst(len(self.rows))]}

    def table_lines(self, top: int = 10) -> list[str]:
        """The ``top`` layers by added error, one line each, with the output's error and what was compared."""
        lines = [f"per-layer error of {Path(self.model).name} against {Path(self.float_model).name} "
                 f"({self.runtimes.get('quantized')} / {self.runtimes.get('float')}), on {self.inputs_used}"]
        head = ("#", "layer", "op", "shape", "SQNR dB", "rel err", "added")
        cells = [(str(i + 1), _short(r.name), r.op_type, "x".join(map(str, r.shape)),
                  "exact" if r.sqnr_db is None else f"{r.sqnr_db:.1f}", f"{r.rel_error:.3g}", f"{r.added_error:+.3g}")
                 for i, r in enumerate(self.worst(top))]
        widths = [max(len(c[k]) for c in [head, *cells]) for k in range(len(head))]
        lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip())
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
        if self.rows:
            last = self.rows[-1]
            lines.append(f"{len(self.rows)} tensors compared; the last ({_short(last.name)}) ends at relative "
                         f"error {last.rel_error:.3g}" + ("" if last.sqnr_db is None else f", {last.sqnr_db:.1f} dB"))
        if self.unmatched:
            shown = ", ".join(u if len(u) <= 100 else f"{u[:60]}...{u[-36:]}" for u in self.unmatched[:6])
            more = f" and {len(self.unmatched) - 6} more" if len(self.unmatched) > 6 else ""
            lines.append(f"not matched ({len(self.unmatched)}): {shown}{more}")
        lines += [f"note: {n}" for n in self.notes]
        return lines


def compare_layers(model, float_model=None, inputs=None, *, executor: str | None = None,
                   samples: int = DEFAULT_SAMPLES, normalize: str | None = None) -> LayerComparison:
    """Per-layer error of the quantized ``model`` against ``float_model``, its float origin.

    ``model``: a .tflite, .onnx or OpenVINO .xml, or a bundle from ``edgeaccel convert`` (folder or manifest),
    whose float reference and calibration samples are then used unless ``float_model``/``inputs`` are given.
    ``inputs``: None (the bundle's calibration samples, else seeded random data, said so in ``inputs_used``),
    image paths (preprocessed as ``edgeaccel run`` does, ``normalize`` for float inputs), .npy/.npz paths, or
    numpy arrays. ``executor``: the runtime that runs the quantized model ("litert", "onnxruntime",
    "openvino"); the float model runs on it too where it reads that format. At most ``samples`` samples."""
    if samples < 1:
        raise ValueError("samples must be at least 1")
    if executor is not None:
        from ..errors import ConfigError
        from ..executors.names import resolve_executor

        try:
            executor = resolve_executor(executor)  # "ORT", "ov", "tflite" as --executor and load() take them
        except ValueError as exc:
            raise ConfigError(str(exc), key="executor") from None
    q_info, f_info, calibration, notes = _resolve_pair(model, float_model, executor)
    f_runtime, q_runtime = runtime_for(f_info, executor), runtime_for(q_info, executor)
    if executor is not None and q_runtime != executor:
        notes.append(f"{executor} cannot capture the tensors of {q_info.path.name} ({q_info.format.value}); "
                     f"it ran on {q_runtime}")
    layout = _cross_layout(q_info, f_info)
    f_samples, inputs_used = compare_inputs.float_samples(inputs, f_info, q_info, calibration, samples, normalize)
    order = compare_inputs.input_order(f_info.inputs, q_info.inputs)
    if layout:
        notes.append(f"cross-format comparison ({q_info.format.value} against {f_info.format.value}): tensors are "
                     f"matched by the names both converters kept, 4-D TFLite tensors read as NHWC")
    with open_tap(q_info, q_runtime) as q_tap, open_tap(f_info, f_runtime) as f_tap:
        notes += q_tap.notes + [n for n in f_tap.notes if n not in q_tap.notes]
        first = f_samples[0]
        q_values = _run(q_tap, compare_inputs.fit_to(first, f_info.inputs, q_info.inputs, order, layout))
        f_values = _run(f_tap, first)
        q_graph, f_graph = LayerGraph(q_tap, q_values), LayerGraph(f_tap, f_values)
        matches, unmatched = match_layers(q_graph, f_graph, layout)
        _refuse_unrelated(matches, q_graph, f_graph, q_info, f_info)
        plan = _Plan(matches, q_graph)
        local = LocalErrors(f_info, plan.segments())
        sums = _Sums(matches)
        for k, sample in enumerate(f_samples):
            if k:
                q_values = _run(q_tap, compare_inputs.fit_to(sample, f_info.inputs, q_info.inputs, order, layout))
                f_values = _run(f_tap, sample)
            sums.add(q_values, f_values)
            local.add(q_values, f_values, {s.name: a for s, a in zip(f_info.inputs, sample, strict=True)})
        local.close()
    if local.note:
        notes.append(local.note)
    rows = _rows(plan, sums, local)
    log.debug("compared %d tensors of %s with %s on %d samples; %d unmatched", len(rows), q_info.path.name,
              f_info.path.name, len(f_samples), len(unmatched))
    return LayerComparison(rows, unmatched, inputs_used, str(q_info.path), str(f_info.path),
                           {"quantized": q_runtime, "float": f_runtime}, len(f_samples), notes)


def _run(tap, feeds) -> dict:
    """One run of a tap; a runtime's own exception becomes an InferenceError that names the model."""
    try:
        return tap.run(feeds)
    except EdgeAccelError:
        raise
    except Exception as exc:
        raise InferenceError(f"{tap.runtime} failed running {tap.info.path.name} with every tensor kept: "
                             f"{runtime_message(exc)}", runtime=tap.runtime,
                             hint="check that the model runs on these inputs: edgeaccel run MODEL") from exc


class _Sums:
    """Per match, the error figures summed over samples (``agreement.tensors.ErrorSums``: float64 sums of
    squares, the worst absolute error)."""

    def __init__(self, matches: list[Match]) -> None:
        self.matches = matches
        self.of = [ErrorSums() for _ in matches]

    def add(self, q_values: dict, f_values: dict) -> None:
        for k, m in enumerate(self.matches):
            q = m.align(q_values[m.quantized.read])
            self.of[k].add(f_values[m.float.read].reshape(q.shape), q)


class _Plan:
    """What each matched layer reads (the nearest matched layers upstream) and which layers rank as a unit with
    the activation right after them."""

    def __init__(self, matches: list[Match], q_graph: LayerGraph) -> None:
        self.matches = matches
        self.row_of = {m.quantized.index: k for k, m in enumerate(matches)}
        self.ups = {m.quantized.index: q_graph.inputs_of(m.quantized, lambda layer: layer.index in self.row_of)
                    for m in matches}
        self.unit_end = _activation_after(matches, q_graph, self.ups, self.row_of)

    def end_of(self, m: Match) -> Match:
        end = self.unit_end.get(m.quantized.index)
        return self.matches[self.row_of[end.index]] if end is not None else m

    def folded(self, m: Match) -> bool:
        """An activation whose error is counted on the op before it."""
        return any(self.unit_end.get(u.index) is m.quantized for u in self.ups[m.quantized.index])

    def segments(self) -> list:
        return [([self.matches[self.row_of[u.index]] for u in self.ups[m.quantized.index]], self.end_of(m))
                for m in self.matches]


def _rows(plan: _Plan, sums: _Sums, local: LocalErrors) -> list[LayerError]:
    matches = plan.matches
    rel = {m.quantized.index: sums.of[k].rel_l2 for k, m in enumerate(matches)}
    rows = []
    for k, m in enumerate(matches):
        index = m.quantized.index
        ups = plan.ups[index]
        worst_in = max((rel[u.index] for u in ups), default=0.0)
        own = rel[index]
        end = plan.end_of(m)
        if plan.folded(m):
            added = 0.0  # counted on the op before it
        elif local.measured(k):  # the float op(s) on the quantized inputs: what this layer alone changes
            added = local.sums[k].rel_l2
        else:  # a Conv and the activation after it are one unit: the error that survives counts
            added = rel[end.quantized.index] - worst_in
            if math.isnan(added):
                added = 0.0
        added = 0.0 if abs(added) < 1e-9 else added  # float noise of ops that only move values
        sqnr = sums.of[k].sqnr_db
        rows.append(LayerError(m.quantized.name, m.quantized.op_type, list(m.quantized.shape), sqnr, own, added,
                               worst_in, [u.name for u in ups], sums.of[k].max_abs, m.float.name, m.by,
                               end.quantized.name if end is not m else "",
                               "float op on quantized inputs" if local.measured(k) and not plan.folded(m)
                               else "minus worst input"))
    return rows


def _activation_after(matches: list[Match], q_graph: LayerGraph, ups: dict, matched: dict) -> dict:
    """{layer index: the activation layer right after it} where an op's only reader is a ReLU/Clip of the same
    shape that reads only it. A QDQ graph made by tf2onnx quantizes the Conv's output on the activation's grid
    (negative values round to zero there): the Conv tensor then differs from the float Conv by everything the
    activation removes anyway, which is no loss. The pair is ranked as one unit, by the activation's error."""
    out = {}
    for m in matches:
        after = [c for c in q_graph.consumers(m.quantized) if c.index in matched]
        if (len(after) == 1 and canonical_op(after[0].op_type) in ACTIVATIONS and after[0].shape == m.quantized.shape
                and [u.index for u in ups[after[0].index]] == [m.quantized.index]
                and canonical_op(m.quantized.op_type) not in ACTIVATIONS):
            out[m.quantized.index] = after[0]
    return out


def _refuse_unrelated(matches: list[Match], q_graph, f_graph, q_info: ModelInfo, f_info: ModelInfo) -> None:
    """Nothing but the graph inputs matched: the two models are not one model in two precisions."""
    if any(m.quantized.op_type != "input" for m in matches):
        return
    raise ModelError(f"no tensor of {q_info.path.name} ({len(q_graph.layers)} tensors) matches one of "
                     f"{f_info.path.name} ({len(f_graph.layers)} tensors) by name, or by op type and shape in "
                     f"graph order: they do not look like one model quantized and its float origin",
                     hint="compare a quantized model with the float model it was made from (edgeaccel convert "
                     "writes both into one bundle: compare_layers(BUNDLE))")


def _resolve_pair(model, float_model, executor) -> tuple[ModelInfo, ModelInfo, Path | None, list[str]]:
    """(quantized model, float model, calibration samples, notes) from paths or a bundle."""
    found = bundle.resolve(model)
    notes: list[str] = []
    if float_model is not None:
        float_found = bundle.resolve(float_model)
        reference = float_found.reference or _only(float_found, "float model")
        float_candidates = [formats.describe(reference)] + [a for a in float_found.artifacts if not a.quantized]
    else:
        if found.reference is None:
            raise ModelError(f"{model} names no float model to compare with",
                             hint="pass the float model it was quantized from (--compare FLOAT_MODEL), or a "
                             "bundle written by edgeaccel convert, which carries it")
        float_candidates = [formats.describe(found.reference)] + [a for a in found.artifacts if not a.quantized]
    reference_path = float_candidates[0].path.resolve()
    quantized = [a for a in found.artifacts if a.quantized and a.format is not Format.EDGETPU_TFLITE
                 and a.path.resolve() != reference_path]
    preferred: tuple[Format, ...] = _SAME_FORMAT_FIRST
    if executor is not None:
        from .taps import RUNTIME_FORMATS

        quantized = [a for a in quantized if a.format in RUNTIME_FORMATS.get(executor, ())] or quantized
        preferred = RUNTIME_FORMATS.get(executor, ()) + _SAME_FORMAT_FIRST  # the executor's own format first
    if not quantized:
        if len(found.artifacts) == 1:
            quantized = list(found.artifacts)  # one file given: compared as it is (an Edge TPU one is refused)
            if not quantized[0].quantized:
                notes.append(f"{quantized[0].path.name} carries no quantization; its error against the float "
                             f"model is that of its own precision or conversion")
        else:
            raise ModelError(f"{model} holds no quantized model to compare with its float reference",
                             hint="make one with edgeaccel convert --to tflite-int8 (or onnx-int8)")
    ref_format = float_candidates[0].format
    if executor is None:  # same format as the reference first: the names match best
        quantized.sort(key=lambda a: (a.format is not ref_format, _rank(preferred, a.format)))
    else:
        quantized.sort(key=lambda a: _rank(preferred, a.format))
    q_info = quantized[0]
    if len(quantized) > 1:
        notes.append(f"compared {q_info.path.name}; the bundle also holds "
                     f"{', '.join(a.path.name for a in quantized[1:])} (choose one with executor= or pass its path)")
    # the float model in the quantized one's format (names match best); for an IR, the ONNX it was made from
    # where there is one: same names, and its layers can be run one by one (compare_local.py)
    wanted = (Format.ONNX, Format.OPENVINO_IR) if q_info.format is Format.OPENVINO_IR else (q_info.format,)
    same_format = sorted((f for f in float_candidates if f.format in wanted), key=lambda f: wanted.index(f.format))
    f_info = same_format[0] if same_format else float_candidates[0]
    return q_info, f_info, found.calibration, notes


def _rank(order: tuple, fmt: Format) -> int:
    return order.index(fmt) if fmt in order else len(order)


def _only(found: bundle.ArtifactSet, what: str) -> Path:
    if len(found.artifacts) != 1:
        raise ModelError(f"the {what} given holds {len(found.artifacts)} models and names no reference",
                         hint="pass the float model file itself")
    return found.artifacts[0].path


def _cross_layout(q_info: ModelInfo, f_info: ModelInfo) -> str | None:
    q_tfl, f_tfl = q_info.format is Format.TFLITE, f_info.format is Format.TFLITE
    if q_tfl == f_tfl:
        return None
    return "q_nhwc" if q_tfl else "f_nhwc"


def _short(name: str, width: int = 48) -> str:
    """TFLite fuses names ("a/Relu;a/BiasAdd;a/conv"): the first is the layer; long ones keep their end."""
    first = name.split(";")[0]
    return first if len(first) <= width else "..." + first[-(width - 3):]


def _finite(value: float | None, digits: int) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(float(value), digits)


def _sortable(value: float) -> float:
    return value if not math.isnan(value) else -math.inf

