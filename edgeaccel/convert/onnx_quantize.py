"""ONNX float -> ONNX int8 (QDQ, static): ONNX Runtime's quantization tools with calibration data.

QDQ (QuantizeLinear/DequantizeLinear around each quantized op) rather than QOperator: every runtime reads it
(ONNX Runtime fuses the pairs into integer kernels, OpenVINO turns them into FakeQuantize, TensorRT builds int8
engines from it) and it stays a valid float graph for anything that does not. Weights are per-channel int8
(depthwise convolutions lose too much with one scale per tensor: MobileNetV2 requantized per-tensor agreed with
its float model on 0 of 6 images, per-channel on 5 of 6). Activations are per-tensor uint8 by default: ONNX
Runtime's x86 kernels take the U8S8 path (measured on MobileNetV2 here: 3.9 ms against 10.3 ms with int8
activations, same answers); ``activations="int8"`` gives the symmetric S8S8 form TensorRT prefers.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConversionError, RuntimeNotInstalledError, runtime_message
from ..modelinfo import ModelInfo
from . import float_islands, onnx_util
from . import sensitivity as sensitivity_mod
from .calibration import CalibrationSet
from .float_islands import KeptFloat

log = logging.getLogger("edgeaccel.convert")

CALIBRATION_METHODS = ("minmax", "entropy", "percentile")


@dataclass
class Quantized:
    """The int8 model written, the nodes kept float in it and why, and what the sensitivity pass did."""

    path: Path
    kept_float: list[KeptFloat] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def quantize(source: ModelInfo, out: Path, calibration: CalibrationSet, *, per_channel: bool = True,
             activations: str = "uint8", method: str = "minmax", keep_float: Sequence[str] = (),
             sensitivity: bool = True, sensitivity_budget_s: float = sensitivity_mod.BUDGET_S) -> Quantized:
    """Write a QDQ int8 model of ``source`` to ``out``, keeping in float what int8 would break (float_islands:
    the detection head, joins of tensors with very different ranges, ``keep_float`` names, and what the
    sensitivity pass finds lossy). ``source`` was described (validated) by edgeaccel.formats."""
    q = _import_quantization()
    if source.custom_ops:
        raise ConversionError(f"{source.path.name} holds custom ops ({', '.join(source.custom_ops)}) that ONNX "
                              f"Runtime cannot run, so it cannot calibrate the model",
                              hint="replace them with standard ONNX ops before quantizing")
    if method not in CALIBRATION_METHODS:
        raise ConversionError(f"unknown calibration method {method!r}; choose one of {', '.join(CALIBRATION_METHODS)}")
    _check_inputs(source, calibration)
    act = {"int8": q.QuantType.QInt8, "uint8": q.QuantType.QUInt8}.get(activations)
    if act is None:
        raise ConversionError(f"activation type {activations!r}: choose int8 or uint8")
    onnx = onnx_util.import_onnx()
    source_model = onnx.load(str(source.path), load_external_data=False)
    with tempfile.TemporaryDirectory(prefix="edgeaccel-quant-") as scratch:
        prepared = Path(scratch) / "prepared.onnx"
        _pre_process(q, onnx_util.loadable(source.path, Path(scratch) / "ir_fitted.onnx"), prepared)
        model = onnx.load(str(prepared))
        if float_islands.name_nodes(model):  # unnamed nodes cannot be excluded nor reported
            onnx.save(model, str(prepared))
        feeds = calibration.feeds()
        result = Quantized(out)
        try:
            islands = float_islands.plan(model, feeds, keep_float, source_model=source_model)
        except ConversionError:
            raise
        except Exception as exc:  # noqa: BLE001 - the ranges are an aid: without them the head is still kept
            said = f"ranges not measured ({runtime_message(exc)}): float islands decided from the graph alone"
            log.warning(said)
            result.notes.append(said)
            islands = float_islands.plan(model, [], keep_float, source_model=source_model)
        _quantize_static(q, source, prepared, out, calibration, act, per_channel, method, islands.nodes)
        if sensitivity and feeds:
            _sensitivity_pass(q, source, model, prepared, out, calibration, act, per_channel, method, islands,
                              result, sensitivity_budget_s)
    result.kept_float = list(islands.kept)
    quantized_model = onnx.load(str(out))
    quantized = sum(n.op_type == "QuantizeLinear" for n in quantized_model.graph.node)
    if not quantized:
        raise ConversionError(f"ONNX Runtime quantized none of the ops of {source.path.name} "
                              f"({', '.join(source.operators)})",
                              hint="none of these ops has an int8 implementation in ONNX Runtime's quantizer"
                              + (f"; {len(islands.kept)} nodes were kept float (--keep-float and the model's "
                                 "head)" if islands.kept else ""))
    copy_metadata(source_model, quantized_model)
    onnx_util.save(quantized_model, out)  # fits the IR version to the installed ORT and runs the checker
    log.info("quantized %s: %d QuantizeLinear nodes, %d nodes kept float", source.path.name, quantized,
             len(islands.kept))
    return result


def _sensitivity_pass(q, source: ModelInfo, model, prepared: Path, out: Path, calibration: CalibrationSet, act,
                      per_channel: bool, method: str, islands: float_islands.FloatPlan, result: Quantized,
                      budget_s: float) -> None:
    """Keep float what the sensitivity pass finds lossy, and quantize again if it found any."""
    onnx = onnx_util.import_onnx()
    graph = float_islands.Graph(model)
    candidates = float_islands.ranked_candidates(graph, islands, sensitivity_mod.CANDIDATES)
    try:
        report = sensitivity_mod.find_lossy(model, onnx.load(str(out)), calibration.feeds(), candidates,
                                            budget_s=budget_s)
    except Exception as exc:  # noqa: BLE001 - the pass refines the model; the note says it did not run
        said = f"sensitivity pass not run ({runtime_message(exc)})"
        log.warning(said)
        result.notes.append(said)
        return
    for finding in report.lossy:
        islands.keep(graph.by_name[finding.node], finding.why)
    if report.lossy:
        _quantize_static(q, source, prepared, out, calibration, act, per_channel, method, islands.nodes)
        try:
            sensitivity_mod.measure_final(report, onnx.load(str(out)))
        except Exception as exc:  # noqa: BLE001 - the pass's own estimate stands, and the note says so
            log.warning("could not measure the requantized model (%s)", runtime_message(exc))
            report.final_estimated = True
    result.notes.append(report.note())


def _quantize_static(q, source: ModelInfo, prepared: Path, out: Path, calibration: CalibrationSet, act,
                     per_channel: bool, method: str, exclude: list[str]) -> None:
    reader = _Reader(calibration)
    try:
        q.quantize_static(
            str(prepared), str(out), reader,
            quant_format=q.QuantFormat.QDQ,
            activation_type=act,
            weight_type=q.QuantType.QInt8,
            per_channel=per_channel,
            nodes_to_exclude=list(exclude),
            calibrate_method={"minmax": q.CalibrationMethod.MinMax, "entropy": q.CalibrationMethod.Entropy,
                              "percentile": q.CalibrationMethod.Percentile}[method],
            # Symmetric int8 weights: what integer kernels (and TensorRT) expect; zero point 0.
            extra_options={"WeightSymmetric": True, "ActivationSymmetric": False},
        )
    except ConversionError:
        raise
    except Exception as exc:
        raise ConversionError(f"ONNX Runtime could not quantize {source.path.name}: {runtime_message(exc)}",
                              hint="check that the calibration samples fit the model's inputs") from exc


def copy_metadata(source_model, model) -> int:
    """Put the source's metadata_props (Ultralytics' names, imgsz, task, stride ...) on ``model`` where it lacks
    them: the task layer reads them from every artifact. Returns how many were added."""
    have = {p.key for p in model.metadata_props}
    added = 0
    for prop in source_model.metadata_props:
        if prop.key not in have:
            model.metadata_props.add(key=prop.key, value=prop.value)
            added += 1
    return added


def _import_quantization():
    try:
        from onnxruntime import quantization
    except ImportError as exc:
        raise RuntimeNotInstalledError(f"ONNX quantization needs onnxruntime ({exc})",
                                       hint="pip install 'edgeaccel[onnx]'") from exc
    return quantization


def _check_inputs(source: ModelInfo, calibration: CalibrationSet) -> None:
    names = [s.name for s in source.inputs]
    got = [s.name for s in calibration.specs]
    if names != got:
        raise ConversionError(f"the calibration data was prepared for inputs {got}; {source.path.name} takes {names}")


def _pre_process(q, src: Path, dst: Path) -> None:
    """ORT's recommended pre-processing: graph optimization and shape inference, so that more ops quantize.

    The symbolic shape inference step needs sympy, which the onnx extra does not carry; onnx's own shape
    inference is enough for the static shapes edge models have."""
    try:
        q.quant_pre_process(str(src), str(dst), skip_symbolic_shape=True)
    except Exception as exc:
        log.warning("quantization pre-processing failed (%s); quantizing the model as it is", runtime_message(exc))
        dst.write_bytes(src.read_bytes())


class _Reader:
    """ORT's CalibrationDataReader protocol: get_next() returns one {input name: array} or None at the end."""

    def __init__(self, calibration: CalibrationSet) -> None:
        self._feeds = calibration.feeds()
        self._next = 0

    def get_next(self):
        if self._next >= len(self._feeds):
            return None
        self._next += 1
        return self._feeds[self._next - 1]

    def rewind(self) -> None:
        self._next = 0

    def __iter__(self):
        return self

    def __next__(self):
        feed = self.get_next()
        if feed is None:
            raise StopIteration
        return feed

    def __len__(self) -> int:
        return len(self._feeds)
