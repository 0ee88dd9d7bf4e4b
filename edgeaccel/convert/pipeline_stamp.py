"""The model's pipeline description (edgeaccel.modelfiles.pipeline) carried by what ``edgeaccel convert`` writes:
a ``pipeline:`` mapping in the bundle manifest, and an ``edgeaccel.pipeline`` JSON entry in the metadata_props
of every ONNX artifact, so that a file copied out of its bundle still says its size, task and labels.

Only this key is added or replaced; every other metadata_props entry (Ultralytics', the source's) is kept."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import ConversionError
from ..modelfiles.pipeline import PIPELINE_KEY, ModelPipeline, parse_imgsz
from ..modelinfo import TensorSpec
from .onnx_util import import_onnx


def stamp_onnx(path: Path, pipeline: ModelPipeline) -> None:
    """Write ``pipeline`` into the ONNX model at ``path`` as the ``edgeaccel.pipeline`` metadata_props entry."""
    data = pipeline.to_dict()
    if not data:
        return
    onnx = import_onnx()
    model = onnx.load(str(path), load_external_data=False)  # external data stays where it is, referenced
    kept = [(p.key, p.value) for p in model.metadata_props if p.key != PIPELINE_KEY]
    del model.metadata_props[:]
    for key, value in kept:
        model.metadata_props.add(key=key, value=value)
    model.metadata_props.add(key=PIPELINE_KEY, value=json.dumps(data, sort_keys=True))
    onnx.save(model, str(path))


def imgsz_from_shapes(shapes: dict[str, tuple[int, ...]], inputs: tuple[TensorSpec, ...]) -> tuple[int, int] | None:
    """``--input-shape NAME=1x3x640x640`` for an ONNX model: the image size it declares for a dynamic image
    input (the artifacts keep their dynamic dimensions; calibration and every command feed this size)."""
    from ..imageio import layout_of

    names = [s.name for s in inputs]
    size = None
    for name, shape in shapes.items():
        if name not in names:
            raise ConversionError(f"--input-shape names {name!r}, but the model's inputs are {names}")
        spec = inputs[names.index(name)]
        if spec.unranked or len(shape) != len(spec.shape) or any(
                d is not None and d != s for d, s in zip(spec.shape, shape, strict=True)):
            raise ConversionError(f"--input-shape {name}={'x'.join(map(str, shape))} does not fit the input's "
                                  f"shape {list(spec.shape)}", hint="keep its fixed dimensions; set the dynamic ones")
        try:
            _, height, width, _ = layout_of(TensorSpec(name, tuple(shape), spec.dtype))
        except Exception as exc:
            raise ConversionError(f"--input-shape {name}: {exc}",
                                  hint="for ONNX, --input-shape declares the size of a dynamic image input") from exc
        size = parse_imgsz((height, width), "--input-shape")
    return size
