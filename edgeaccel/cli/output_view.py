"""What `edgeaccel run` shows of a model's outputs: what kind of output it sees, a top-k only where the output
is shaped and valued like class scores, and the values themselves otherwise.

The kind is read from shapes and values, never assumed: a landmark model's 1x63 coordinates are not 63 classes.
Class scores are one output of C >= 2 values once singleton dimensions are dropped (1x1000, 1x1000x1x1), that
either fit the --labels file, or form a probability distribution, or number 1000/1001 (an ImageNet head).
The top-k says what its numbers are: probabilities (dequantized with the model's own scale), or raw scores.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

IMAGENET_CLASSES = (1000, 1001)
JSON_VALUES_MAX = 1024  # --json holds the values of outputs up to this many elements (all with --save-outputs)


def real_values(array: np.ndarray, spec) -> tuple[np.ndarray, str | None]:
    """The output's real values (dequantized with its scale and zero point) and, for integer outputs without a
    scale, a note that the numbers are raw."""
    from ..tensors import dequantize_array

    if array.dtype.kind in "iu" and spec.quantization is not None:
        return dequantize_array(array, spec.quantization).astype(np.float32), None
    if array.dtype.kind in "iu" and array.dtype.itemsize == 1:
        return array, f"raw {array.dtype} values: the model declares no quantization scale for this output"
    return array, None


def kind_of(shape: tuple[int, ...], name: str, count: int, dtype=None) -> str:
    """A label for a non-score output, from its shape (and name where the shape says little)."""
    label = _shape_kind(shape, name, count)
    if label.startswith("a map") and dtype is not None and dtype.kind in "iu" and dtype.itemsize >= 4:
        return "a map of class ids: segmentation"
    return label


def _shape_kind(shape: tuple[int, ...], name: str, count: int) -> str:
    dims = [d for d in shape if d != 1]
    lowered = (name or "").lower()
    if not dims:
        return "a single value"
    if len(shape) >= 2 and shape[-1] == 4 and len(dims) >= 2 and ("box" in lowered or "detection" in lowered
                                                                   or count >= 3):
        return "boxes (N x 4): detections"
    if len(dims) == 2 and shape[-1] in (2, 3, 4, 5) and dims[-1] == shape[-1] and len(shape) >= 3:
        return f"points ({dims[0]} x {shape[-1]}): keypoints or landmarks"
    if len(dims) >= 3 or (len(dims) == 2 and (min(dims) >= 16 or len(shape) == 4)):
        return "a map (spatial): segmentation, heatmap or features"
    if len(dims) == 1 and dims[0] % 3 == 0 and count > 1:
        return f"a vector of {dims[0]} values (e.g. {dims[0] // 3} points x 3 coordinates)"
    return f"a vector of {int(np.prod(dims))} values"


def scores_of(outputs, specs, labels_count: int | None) -> tuple[int, np.ndarray, str] | None:
    """(output index, real scores, what they are) when the model's output looks like class scores."""
    if len(outputs) != 1:
        return None
    array, spec = outputs[0], specs[0]
    values, raw_note = real_values(np.asarray(array), spec)
    flat = values.reshape(-1)
    if flat.size < 2 or sum(d != 1 for d in array.shape) != 1 or flat.dtype.kind not in "fiu":
        return None
    as_float = flat.astype(np.float64)
    distribution = raw_note is None and as_float.min() >= -1e-3 and as_float.max() <= 1 + 1e-3 \
        and abs(as_float.sum() - 1) < 0.05
    labelled = labels_count is not None and labels_count in (flat.size, flat.size + 1)
    if not (distribution or labelled or flat.size in IMAGENET_CLASSES):
        return None
    what = "probabilities" if distribution else (raw_note or "raw scores (not probabilities: no softmax)")
    return 0, flat, what


def describe(model, outputs, labels: list[str] | None, top_k: int) -> dict:
    """The report's outputs part: kind, top-k where it applies, and per-output values or statistics."""
    specs = model.outputs
    found = scores_of(outputs, specs, len(labels) if labels is not None else None)
    entries = []
    for spec, array in zip(specs, outputs, strict=True):
        array = np.asarray(array)
        values, raw_note = real_values(array, spec)
        entry = {"name": spec.name, "dtype": str(array.dtype), "shape": list(array.shape),
                 "kind": "class scores" if found else kind_of(array.shape, spec.name, len(outputs), array.dtype)}
        if raw_note:
            entry["note"] = raw_note
        elif values is not array:
            entry["note"] = "real values: dequantized with the model's scale and zero point"
        if values.size and values.dtype.kind in "fiub":
            as_float = values.astype(np.float64)
            entry.update(min=float(as_float.min()), max=float(as_float.max()), mean=float(as_float.mean()))
        if values.size <= JSON_VALUES_MAX and values.dtype.kind in "fiub":
            entry["values"] = values.tolist()
        entries.append(entry)
    report = {"kind": "classifier" if found else ("several outputs" if len(outputs) > 1 else entries[0]["kind"]
                                                  if entries else "no outputs"),
              "outputs": entries, "top_k": [], "top_k_of": None}
    if found and top_k:
        _, scores, what = found
        names = fit_labels(labels, scores.size)
        order = np.argsort(-scores.astype(np.float64), kind="stable")[:top_k]
        report["top_k"] = [{"index": int(i), "label": names[i] if names else None, "score": float(scores[i])}
                           for i in order]
        report["top_k_of"] = what
    return report


def fit_labels(lines: list[str] | None, classes: int) -> list[str] | None:
    if lines is None:
        return None
    lines = [line for line in lines if line] if len(lines) > classes else list(lines)
    if len(lines) == classes + 1 and lines[0].lower() in ("background", "???", "__background__"):
        lines = lines[1:]  # a 1001-line file with "background" for a 1000-class model
    if len(lines) < classes:
        lines += [f"class {i}" for i in range(len(lines), classes)]
    return lines


def print_outputs(report: dict, max_values: int = 8) -> None:
    if report["top_k"]:
        print(f"output    {report['outputs'][0]['name']}: class scores, "
              f"{'x'.join(map(str, report['outputs'][0]['shape']))}")
        print(f"top-{len(report['top_k'])}     ({report['top_k_of']})")
        for entry in report["top_k"]:
            label = entry["label"] if entry["label"] is not None else f"class {entry['index']}"
            print(f"  {entry['score']:8.4f}  {label}  [{entry['index']}]")
        return
    for out in report["outputs"]:
        print(f"output    {out['name']}: {out['dtype']} {'x'.join(map(str, out['shape']))}, {out['kind']}")
        if "note" in out:
            print(f"          {out['note']}")
        if "min" in out:
            shown = ""
            if "values" in out:
                flat = np.asarray(out["values"], dtype=np.float64).reshape(-1)
                more = f" ... ({flat.size} values)" if flat.size > max_values else ""
                shown = "  values " + " ".join(f"{v:.4g}" for v in flat[:max_values]) + more
            print(f"          min {out['min']:.4g}  max {out['max']:.4g}  mean {out['mean']:.4g}{shown}")


def read_labels(path: str | None) -> list[str] | None:
    """``--labels``: one label per line, or a ``.pbtxt`` label map whose ids (from 1) become class indices."""
    from ..errors import InputError

    if not path:
        return None
    if Path(path).suffix.lower() == ".pbtxt":  # a label map: its ids (from 1) become class indices
        from ..modelfiles.pipeline import ModelPipeline
        from ..modelfiles.labels import read_label_file

        found = read_label_file(path)
        return ModelPipeline(labels=found.names, labels_offset=found.offset).label_list()
    try:
        return [line.strip() for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines()]
    except OSError as exc:
        raise InputError(f"cannot read labels {path}: {exc.strerror or exc}") from exc
