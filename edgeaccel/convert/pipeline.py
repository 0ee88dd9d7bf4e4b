"""``edgeaccel convert``: one float model in, the requested artifacts plus a bundle manifest out.

Every bundle carries its float reference (the float TFLite of a TensorFlow model, or a copy of the ONNX/TFLite
source) and, when calibration data was given, the preprocessed samples: those the quantizers calibrated on
(``calibration.npy``) and those held back from them (``holdout.npy``, every 5th sample), which the manifest
names one by one. After writing the artifacts, convert checks each against the reference on the held-out
samples, exactly as ``edgeaccel check DIR`` does with its default gates, and records ``check: {passed, ...}``
per artifact; ``edgeaccel.load`` never picks a failed one silently.

Paths, made on demand and shared (an int8 ONNX made for ``onnx-int8`` is the same one ``openvino-int8`` reads):

    SavedModel / .keras ──► static-shaped SavedModel ──► float .tflite (reference) ──► tf2onnx ──► float .onnx
                                  ├──► dynamic-range .tflite                                     │
                                  └──► full-int8 .tflite (representative dataset)                ▼
    .onnx (reference) ───────────────────────────────────────────────────────────────────► ORT QDQ int8 .onnx
    float model (.onnx/.tflite) ──► OpenVINO IR (f32)            int8 .onnx ──► OpenVINO IR (int8 weights)
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

from ..modelfiles import bundle
from .. import formats
from ..errors import ConversionError, EdgeAccelError, ModelError
from ..modelinfo import ModelInfo
from . import calibration as calib_mod
from . import edgetpu, onnx_dequantize, onnx_quantize, onnx_util, openvino_ir, tensorrt_engine, tf_source, tflite
from . import tflite_to_onnx
from .calibration import CalibrationSet
from .manifest import write_manifest
from .result import Artifact, ConvertResult, artifact_bytes as _size
from .sources import Source, SourceKind, identify
from .targets import INT8_ONNX_TARGETS, TARGETS, TENSORRT_TARGETS, Target, parse

log = logging.getLogger("edgeaccel.convert")

CALIBRATION_FILE = "calibration"  # .npy or .npz
HOLDOUT_FILE = "holdout"  # .npy or .npz: samples held back from calibration, for the checks
MAX_STORED_CALIBRATION_BYTES = 32 << 20  # a bundle is deployed; a few hundred MB of samples would not be


def convert(model: str | os.PathLike, to: str | list[str], out: str | os.PathLike, *,
            calibration: str | os.PathLike | None = None, normalize: str | None = None, io_type: str = "int8",
            max_samples: int | None = calib_mod.DEFAULT_MAX_SAMPLES, labels: str | os.PathLike | None = None,
            name: str | None = None, input_shapes: dict[str, tuple[int, ...]] | None = None,
            onnx_activations: str = "uint8", force: bool = False,
            imgsz: int | tuple[int, int] | str | None = None, letterbox: bool | None = None,
            keep_float: list[str] | tuple[str, ...] = (),
            sensitivity_s: float = onnx_quantize.sensitivity_mod.BUDGET_S,
            holdout_every: int = calib_mod.HOLDOUT_EVERY, check: bool = True) -> ConvertResult:
    """Convert ``model`` to each target in ``to`` and write a bundle to ``out`` that ``edgeaccel.load`` reads.
    The model's pipeline (edgeaccel.modelfiles.pipeline: its metadata, a label file beside it; ``imgsz``,
    ``letterbox`` and an ONNX model's ``input_shapes`` over it) feeds calibration images and is written into
    the manifest and every ONNX artifact.

    ``keep_float``: node or tensor names of the float ONNX model that int8 ONNX targets (onnx-int8,
    openvino-int8, tensorrt-int8) leave in float, on top of what convert keeps float itself (the detection
    head, joins of tensors with very different ranges, layers a sensitivity pass finds lossy).
    ``sensitivity_s``: the time the sensitivity pass may take (0 skips it).
    ``holdout_every``: every n-th calibration sample is held back from calibration for checking (0: none).
    ``check``: check each artifact against the reference on the held-out samples and record the verdict in
    the manifest (``edgeaccel check``'s default gates); a failed artifact is left out by ``edgeaccel.load``."""
    if not sensitivity_s >= 0:  # nan too
        raise ConversionError(f"sensitivity_s must be 0 (no sensitivity pass) or more; got {sensitivity_s}")
    if holdout_every < 0 or holdout_every == 1:
        raise ConversionError(f"holdout_every {holdout_every} holds back every sample or fewer than none",
                              hint="hold back every n-th sample with n >= 2 (default 5), or 0 for none")
    targets = parse(to)
    if isinstance(keep_float, str):
        keep_float = [keep_float]
    keep_float = tuple(keep_float or ())
    if keep_float and not any(t.name in INT8_ONNX_TARGETS for t in targets):
        raise ConversionError(f"keep_float applies to the int8 ONNX targets ({', '.join(INT8_ONNX_TARGETS)}); "
                              f"none of {', '.join(t.name for t in targets)} is one",
                              hint="add onnx-int8 (or openvino-int8) to the targets, or drop keep_float")
    source = identify(model)
    _check_feasible(source, targets, calibration, input_shapes)
    user = {"imgsz": imgsz, "letterbox": letterbox}
    if input_shapes and source.kind is SourceKind.ONNX and source.info is not None:
        from .pipeline_stamp import imgsz_from_shapes

        declared = imgsz_from_shapes(input_shapes, source.info.inputs)
        user["imgsz"] = user["imgsz"] or declared
        input_shapes = None  # declared, not baked in: the ONNX artifacts keep their dynamic dimensions
    existed = Path(out).exists()
    was_empty = not existed or (Path(out).is_dir() and not any(Path(out).iterdir()))
    out = _prepare_out(Path(out), force)
    try:
        return _convert(source, targets, out, _safe_name(name or source.name), calibration, normalize, io_type,
                        max_samples, labels, input_shapes, onnx_activations, user, keep_float, sensitivity_s,
                        holdout_every, check)
    except BaseException:
        if was_empty:  # leave no half-written bundle behind; a folder that held files before is not touched
            for child in out.iterdir():
                shutil.rmtree(child) if child.is_dir() else child.unlink()
            if not existed:
                out.rmdir()
        raise


def _convert(source: Source, targets: list[Target], out: Path, name: str, calibration, normalize, io_type,
             max_samples, labels, input_shapes, onnx_activations, user=None, keep_float=(),
             sensitivity_s=onnx_quantize.sensitivity_mod.BUDGET_S,
             holdout_every: int = calib_mod.HOLDOUT_EVERY, check: bool = True) -> ConvertResult:
    from ..modelfiles.describe import pipeline_of

    with tempfile.TemporaryDirectory(prefix="edgeaccel-convert-") as scratch:
        job = _Job(source, out, Path(scratch), name, io_type, input_shapes, onnx_activations)
        job.keep_float, job.sensitivity_s = keep_float, sensitivity_s
        reference = job.reference()
        # the source's own description (its metadata, a label file beside it); a TensorFlow source has none
        # but the float TFLite made from it; --labels and --imgsz over it
        described = source.info if source.info is not None and not source.kind.is_tensorflow else job.reference_info
        pipe = pipeline_of(described, {**(user or {}), "labels": _label_names(labels)})
        calib = holdout = None
        if calibration is not None:
            calib, holdout = calib_mod.split_holdout(
                calib_mod.load(calibration, job.reference_info.inputs, normalize=normalize, max_samples=max_samples,
                               pipeline=pipe), holdout_every)
            job.calibration = calib
            job.calibration_note = f"calibrated on {len(calib)} samples from {Path(calibration).name}" + (
                f" ({len(holdout)} more held out for checking)" if holdout else "")
            if calib.kind == "images":
                float_input = any(s.dtype.kind == "f" for s in calib.specs)
                job.calibration_note += (f" (images scaled to {normalize or '0,1'})" if float_input
                                         else " (raw image pixels)")
        result = ConvertResult(out, out / bundle.MANIFEST, reference, reference_note=job.reference_note)
        for target in targets:
            path, note = job.make(target)
            result.artifacts.append(Artifact(target.name, path, _size(path), note, job.kept_float_of(target)))
            if target.name == "tflite-int8":
                result.edgetpu.append(edgetpu.readiness(path, out))
    if calib is not None:
        result.calibration, result.calibration_samples = _store_calibration(calib, out)
        if holdout is not None:
            result.holdout, result.holdout_samples = _store_calibration(holdout, out, HOLDOUT_FILE)
        result.split = _split_record(calib, holdout, holdout_every, result)
    labels_name = _copy_labels(labels, out) if labels is not None else _write_labels(pipe, out)
    _stamp_onnx_artifacts(result, pipe)
    write_manifest(result, name, source, labels_name, job.reference_note, pipe)
    if not check:
        result.check_note = "not checked (--no-check)"
    elif calib is None:
        result.check_note = "not checked: no calibration data to hold samples back from (edgeaccel check --data)"
    else:
        _check_artifacts(result)
        write_manifest(result, name, source, labels_name, job.reference_note, pipe)
    return result


def _split_record(calib: CalibrationSet, holdout: CalibrationSet | None, every: int, result: ConvertResult) -> dict:
    """Which samples calibrated and which were held out, by name, as stored (the cap may keep fewer)."""
    rule = (f"every {every}th sample in source order held out for checking (at least one)" if holdout is not None
            else "nothing held out (" + ("one sample only" if every >= 2 else "holdout_every 0") + ")")
    return {"rule": rule, "calibrated": calib.sample_names()[:result.calibration_samples],
            "held_out": holdout.sample_names()[:result.holdout_samples] if holdout is not None else []}


def _check_artifacts(result: ConvertResult) -> None:
    """Each artifact against the reference, on the held-out samples when there are any, with check's default
    gates; the verdicts go to the manifest. A check that cannot run at all is a note, not a failed convert."""
    from . import verify

    try:
        report = verify.check(result.out, runs=0, task="auto")
    except Exception as exc:  # noqa: BLE001 - the bundle is written and valid: a check that breaks must not undo it
        why = exc.message if isinstance(exc, EdgeAccelError) else f"{type(exc).__name__}: {exc}"
        result.check_note = f"not checked: {why} (run edgeaccel check on the bundle)"
        log.warning("convert could not check the artifacts: %s", why)
        return
    result.task = report.task
    result.checks = verify.verdicts(report)
    result.check_note = "; ".join([f"checked on {report.samples} {report.data_kind} samples"
                                   + (f" (task {report.task})" if report.task else ""), *report.notes])
    for path, entry in result.checks.items():
        if entry["passed"] is False:
            log.warning("%s FAILED its check against the float reference (edgeaccel.load and run leave it out): "
                        "%s", path.name, entry["reason"])


def _label_names(labels) -> dict | None:
    if labels is None:
        return None
    from ..modelfiles.labels import read_label_file

    if not Path(labels).is_file():
        raise ConversionError(f"labels file not found: {labels}")
    found = read_label_file(labels)
    return {key - found.offset: value for key, value in found.names.items()}


def _write_labels(pipe, out: Path) -> str | None:
    """The labels the source carries (its metadata, a file beside it) as the bundle's labels.txt."""
    names = pipe.label_list()
    if not names:
        return None
    (out / "labels.txt").write_text("\n".join(names) + "\n", encoding="utf-8")
    return "labels.txt"


def _stamp_onnx_artifacts(result: ConvertResult, pipe) -> None:
    from .pipeline_stamp import stamp_onnx

    paths = {a.path for a in result.artifacts if a.path.suffix == ".onnx"}
    if result.reference.suffix == ".onnx":
        paths.add(result.reference)
    for path in sorted(paths):
        stamp_onnx(path, pipe)
        _describe(path)


class _Job:
    """The intermediate models of one conversion, each made once and reused by the targets that need it."""

    def __init__(self, source: Source, out: Path, scratch: Path, name: str, io_type: str,
                 input_shapes: dict | None, onnx_activations: str) -> None:
        self.source, self.out, self.scratch, self.name = source, out, scratch, name
        self.io_type = io_type
        self.onnx_activations = onnx_activations
        self.input_shapes = input_shapes
        self.calibration: CalibrationSet | None = None
        self.calibration_note = ""
        self.reference_note = ""
        self._static: tf_source.StaticModel | None = None
        self._reference: tuple[Path, ModelInfo] | None = None  # the float reference and its description
        self._made: dict[str, Path] = {}  # intermediate kind -> file
        self.keep_float: tuple[str, ...] = ()
        self.sensitivity_s = onnx_quantize.sensitivity_mod.BUDGET_S
        self.quantized: onnx_quantize.Quantized | None = None  # the int8 ONNX every int8 ONNX target is made from

    # -- the float reference ----------------------------------------------------------------------------
    def reference(self) -> Path:
        return self._made_reference()[0]

    @property
    def reference_info(self) -> ModelInfo:
        """The float reference's description (the reference is made first if it is not yet)."""
        return self._made_reference()[1]

    def _made_reference(self) -> tuple[Path, ModelInfo]:
        if self._reference is not None:
            return self._reference
        src = self.source
        if src.kind.is_tensorflow:
            self._static = static = tf_source.prepare(src, self.scratch, self.input_shapes)
            path = tflite.convert(static, "float", self.out / TARGETS["tflite-float"].filename(self.name))
            self.reference_note = f"float32 TFLite of {src.path.name}"
        elif src.kind is SourceKind.ONNX and src.info is not None and src.info.quantized:
            # A QDQ model (a published int8 ONNX): its float twin, weights as quantized, is the reference.
            path = onnx_dequantize.dequantize(src.path, self.out / f"{self.name}_float.onnx")
            self.reference_note = f"dequantized from the QDQ model {src.path.name}"
        else:
            suffix = ".onnx" if src.kind is SourceKind.ONNX else ".tflite"
            path = self.out / f"{self.name}_{self.reference_tag}{suffix}"
            _copy_model(src, path)
            self.reference_note = f"a copy of {src.path.name}" + (
                " (already quantized)" if src.info and src.info.quantized else "")
        self._reference = (path, _describe(path))
        return self._reference

    # -- artifacts ----------------------------------------------------------------------------------------
    @property
    def reference_tag(self) -> str:
        """'float', or 'original' for a quantized TFLite source kept as it is (its IR is not float either)."""
        info = self.source.info
        quantized = self.source.kind is SourceKind.TFLITE and info is not None and info.quantized
        return "original" if quantized else "float"

    def make(self, target: Target) -> tuple[Path, str]:
        dest = self.out / target.filename(self.name)
        if target.name == "openvino":
            dest = self.out / f"{self.name}_{self.reference_tag}.xml"
        kind = target.name
        if kind == "tflite-float":
            return self.reference(), f"{target.what}; the reference the others are checked against"
        if kind in ("tflite-dynamic", "tflite-int8"):
            mode = "dynamic" if kind == "tflite-dynamic" else "int8"
            static = self._static
            if static is None:  # _check_feasible lets these targets through for TensorFlow sources only
                raise ConversionError(f"{target.name} is made from a TensorFlow model (SavedModel or Keras)")
            calib = self._renamed(static.inputs) if mode == "int8" else None
            tflite.convert(static, mode, dest, calib, self.io_type)
            _describe(dest)
            io = f", {self.io_type} I/O; {self.calibration_note}" if mode == "int8" else ""
            return dest, target.what + io + (tflite.FLOAT_ISLANDS_NOTE if mode == "int8" else "")
        if kind == "onnx-float":
            return self._float_onnx(dest), target.what + self._onnx_origin()
        if kind == "onnx-int8":
            return self._int8_onnx(dest), f"{target.what}; {self.calibration_note}{self._islands_note()}"
        if kind == "openvino":
            float_model = self._float_onnx() if "onnx-float" in self._made else self.reference()
            return self._ir(float_model, dest), f"{target.what} (made from {float_model.name})"
        if kind == "openvino-int8":
            int8 = self._int8_onnx()
            return self._ir(int8, dest), f"{target.what} ({int8.name}; {self.calibration_note}){self._islands_note()}"
        if kind == "tensorrt-f16":
            float_model = self._float_onnx()
            return tensorrt_engine.build(float_model, dest, "f16"), f"{target.what} ({float_model.name})"
        if kind == "tensorrt-int8":
            int8 = self._int8_onnx()
            return (tensorrt_engine.build(int8, dest, "int8"),
                    f"{target.what} ({int8.name}; {self.calibration_note}){self._islands_note()}")
        raise ConversionError(f"no conversion path for {kind}")  # parse() only lets TARGETS through

    def _float_onnx(self, dest: Path | None = None) -> Path:
        if "onnx-float" in self._made:
            return self._keep(self._made["onnx-float"], dest, "onnx-float")
        ref = self.reference()
        if self.source.kind is SourceKind.ONNX:
            path = ref  # the copied source is the float ONNX
        else:
            path = dest or self.scratch / f"{self.name}_float.onnx"
            tflite_to_onnx.convert(ref, path)
            _describe(path)
        self._made["onnx-float"] = path
        return path

    def _onnx_origin(self) -> str:
        return "" if self.source.kind is SourceKind.ONNX else " (tf2onnx from the float .tflite)"

    def _keep(self, made: Path, dest: Path | None, kind: str) -> Path:
        """An intermediate made in the scratch folder for another target, now asked for as an artifact."""
        if dest is not None and made != dest and made.parent == self.scratch:
            shutil.copyfile(made, dest)
            self._made[kind] = dest
        return self._made[kind]

    def _int8_onnx(self, dest: Path | None = None) -> Path:
        if "onnx-int8" in self._made:
            return self._keep(self._made["onnx-int8"], dest, "onnx-int8")
        float_path = self._float_onnx()
        info = _describe(float_path)
        path = dest or self.scratch / f"{self.name}_int8.onnx"
        self.quantized = onnx_quantize.quantize(info, path, self._renamed(info.inputs),
                                                activations=self.onnx_activations, keep_float=self.keep_float,
                                                sensitivity=self.sensitivity_s > 0,
                                                sensitivity_budget_s=self.sensitivity_s)
        _describe(path)
        self._made["onnx-int8"] = path
        return path

    def kept_float_of(self, target: Target) -> list[dict] | None:
        """What an int8 artifact left in float ([] for tflite-int8, which is integer-only); None otherwise."""
        if target.name in INT8_ONNX_TARGETS and self.quantized is not None:
            return [k.as_dict() for k in self.quantized.kept_float]
        return [] if target.name == "tflite-int8" else None

    def _islands_note(self) -> str:
        q = self.quantized
        if q is None:
            return ""
        kept = f"; {len(q.kept_float)} nodes kept float" if q.kept_float else "; every node quantized"
        return kept + "".join(f"; {n}" for n in q.notes)

    def _ir(self, src: Path, dest: Path) -> Path:
        openvino_ir.convert(src, dest)
        _describe(dest)
        return dest

    def _renamed(self, specs) -> CalibrationSet:
        """The calibration samples keyed by another model's input names (tf2onnx and the TFLite converter
        rename inputs: 'x' becomes 'serving_default_x:0')."""
        calib = self.calibration
        if calib is None:
            raise ConversionError("this target needs calibration data", hint="pass --calibration")
        specs = tuple(specs)
        if len(specs) != len(calib.specs):
            raise ConversionError(f"the converted model takes {len(specs)} inputs, the calibration data "
                                  f"{len(calib.specs)}")
        order: list[int] = []  # order[k]: the calibration input that feeds converted input k
        for spec in specs:
            match = [k for k, c in enumerate(calib.specs) if _same_input(spec.name, c.name)]
            order.append(match[0] if len(match) == 1 else len(order))
        return CalibrationSet(specs, [[sample[k] for k in order] for sample in calib.samples], calib.source,
                              calib.kind)


def _same_input(a: str, b: str) -> bool:
    def base(n: str) -> str:
        n = n.split(":")[0]
        return n[len("serving_default_"):] if n.startswith("serving_default_") else n

    return base(a) == base(b)


def _check_feasible(source: Source, targets: list[Target], calibration, input_shapes) -> None:
    if any(t.name in TENSORRT_TARGETS for t in targets):
        tensorrt_engine.check_buildable()  # before any other work: TensorRT and a GPU, or a clear refusal
    for t in targets:
        if source.kind not in t.sources:
            raise ConversionError(
                f"{t.name} is made from a TensorFlow model (SavedModel or Keras); {source.path.name} is "
                f"{source.kind.value}",
                hint="convert the TensorFlow model the file came from; from ONNX choose onnx-int8 or openvino")
        if t.needs_calibration and source.kind is SourceKind.TFLITE and source.info is not None \
                and source.info.quantized:
            raise ConversionError(f"{source.path.name} is already quantized; {t.name} is made from a float model",
                                  hint="convert the float model it came from (or use openvino to read it as it is)")
        if t.needs_calibration and calibration is None:
            raise ConversionError(f"{t.name} needs calibration data to measure activation ranges",
                                  hint="pass --calibration with a folder of images or a .npy of ~100 real inputs")
    if input_shapes and source.kind is SourceKind.TFLITE:
        raise ConversionError("--input-shape applies to TensorFlow and ONNX models; this TFLite model keeps its shapes",
                              hint="--imgsz declares the image size to feed a dynamic TFLite input")


def _prepare_out(out: Path, force: bool) -> Path:
    if out.exists() and not out.is_dir():
        raise ConversionError(f"--out {out} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ConversionError(f"the output folder {out} is not empty",
                              hint="choose a new folder, or pass --force to write into this one")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _safe_name(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "-_." else "_" for c in name).strip("._")
    cleaned = cleaned.removesuffix("_float")  # model_float.onnx -> model_int8.onnx, not model_float_int8.onnx
    return cleaned or "model"


def _copy_model(src: Source, dest: Path) -> None:
    if src.kind is SourceKind.ONNX and onnx_util.loadable(src.path, dest) == dest:
        return  # written with the IR version lowered to what the installed ONNX Runtime reads
    shutil.copyfile(src.path, dest)
    for extra in (src.info.extra_files if src.info else ()):  # ONNX external data stays beside the model
        target = dest.parent / extra.relative_to(src.path.parent)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(extra, target)


def _describe(path: Path) -> ModelInfo:
    """Every file written is read back by edgeaccel.formats: a broken artifact fails here, not on a device."""
    try:
        return formats.describe(path)
    except ModelError as exc:
        raise ConversionError(f"the converter wrote {path.name}, but edgeaccel refuses it: {exc.message}",
                              hint="this is a converter bug; run with --debug and report it") from exc


def _store_calibration(calib: CalibrationSet, out: Path, stem: str = CALIBRATION_FILE) -> tuple[Path, int]:
    per_sample = max(1, calib.nbytes() // max(1, len(calib)))
    keep = min(len(calib), max(1, MAX_STORED_CALIBRATION_BYTES // per_sample))
    if keep < len(calib):
        log.warning("storing %d of %d %s samples in the bundle (%d MB cap)", keep, len(calib), stem,
                    MAX_STORED_CALIBRATION_BYTES >> 20)
    return calib.head(keep).save(out / stem), keep


def _copy_labels(labels, out: Path) -> str | None:
    if labels is None:
        return None
    src = Path(labels)
    if not src.is_file():
        raise ConversionError(f"labels file not found: {src}")
    dest = out / "labels.txt"
    if src.resolve() != dest.resolve():
        shutil.copyfile(src, dest)
    return dest.name
