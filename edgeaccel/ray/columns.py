"""Rows in, columns out: a Ray Data batch (dict of numpy arrays) through a loaded Model.

Images (the ``image`` column of ``ray.data.read_images``, H x W x C uint8, one array per row; or encoded
files, the ``bytes`` column of ``ray.data.read_binary_files`` with ``column="bytes"``, decoded in the actor)
go through ``model.predict``, and the task's results come back as plain columns:

- classify: ``class_id`` (int64), ``label`` (str), ``score`` (float32): the top class;
- detect: ``boxes`` (per row a k x 4 float32 array, x1 y1 x2 y2 in the image's pixels), ``scores``,
  ``class_ids``, ``labels`` (per row, best first);
- segment, pose: ``result``, the result's JSON (schema edgeaccel.vision/1).

Raw tensors: each model input from the column of its name (a single-input model also reads ``data``, the column
``ray.data.from_numpy`` makes), one row per sample without the batch dimension; every output comes back as the
column of its name. Every other column of the batch passes through (``path`` from ``include_paths=True``), and
``executor`` names what ran each row (``litert:CPU``), as the actor chose it on its own node.
"""

from __future__ import annotations

import json

import numpy as np

from ..errors import InputError

RAW_DATA_COLUMN = "data"


def predict_columns(model, batch: dict, column: str) -> dict:
    if column not in batch:
        raise InputError(f"the batch has no {column!r} column; its columns are {sorted(batch)}",
                         hint="read images with ray.data.read_images (column 'image'), or name the column with "
                              "column=, or leave task= out to feed raw tensors")
    results = [model.predict(_image(value)) for value in batch[column]]
    out = {k: v for k, v in batch.items() if k != column}
    task = model.task.name
    if task == "classify":
        tops = [r.top for r in results]
        out["class_id"] = np.array([t.class_id if t else -1 for t in tops], dtype=np.int64)
        out["label"] = np.array([t.label if t else "" for t in tops], dtype=object)
        out["score"] = np.array([t.score if t else np.nan for t in tops], dtype=np.float32)
    elif task == "detect":
        out["boxes"] = _ragged([np.array([b.xyxy for b in r.boxes], np.float32).reshape(-1, 4) for r in results])
        out["scores"] = _ragged([np.array([b.score for b in r.boxes], np.float32) for r in results])
        out["class_ids"] = _ragged([np.array([b.class_id for b in r.boxes], np.int64) for r in results])
        out["labels"] = _ragged([[b.label for b in r.boxes] for r in results])
    else:
        out["result"] = np.array([json.dumps(_without_timing(r.to_dict())) for r in results], dtype=object)
    out["executor"] = np.array([model.executor.name] * len(results), dtype=object)
    return out


def _image(value):
    """An array as it is; encoded bytes (PNG, JPEG) decoded here, in the actor, in parallel with the others."""
    if isinstance(value, (bytes, bytearray, np.bytes_)):
        from ..imageio import decode_image

        return decode_image(bytes(value), "an image of the batch")
    return value


def run_columns(model, batch: dict) -> dict:
    specs = model.inputs
    used = [_input_column(batch, spec, len(specs)) for spec in specs]
    rows = len(batch[used[0]]) if used else 0
    outputs: list[list[np.ndarray]] = [[] for _ in model.outputs]
    for i in range(rows):
        arrays = [_one_sample(batch[c][i], spec) for c, spec in zip(used, specs, strict=True)]
        for k, array in enumerate(model.run(arrays)):
            outputs[k].append(np.asarray(array)[0] if _has_batch_one(model.outputs[k], array) else np.asarray(array))
    out = {k: v for k, v in batch.items() if k not in used}
    for spec, values in zip(model.outputs, outputs, strict=True):
        out[spec.name] = _stack(values)
    out["executor"] = np.array([model.executor.name] * rows, dtype=object)
    return out


def _input_column(batch: dict, spec, count: int) -> str:
    if spec.name in batch:
        return spec.name
    if count == 1 and RAW_DATA_COLUMN in batch:
        return RAW_DATA_COLUMN
    wanted = f"{spec.name!r}" + (f" (or {RAW_DATA_COLUMN!r})" if count == 1 else "")
    raise InputError(f"the batch has no column {wanted} for the model input {spec}; its columns are {sorted(batch)}",
                     hint="name each column after the model input it feeds, or pass task='classify'/'detect' "
                          "to feed images")


def _one_sample(value, spec) -> np.ndarray:
    """A row without the batch dimension gets it back; a row that already has it (1 x ...) is kept."""
    array = np.asarray(value)
    if not spec.unranked and array.ndim == len(spec.shape) - 1:
        return array[None]
    return array


def _has_batch_one(spec, array) -> bool:
    array = np.asarray(array)
    return array.ndim >= 1 and array.shape[0] == 1 and (spec.unranked or len(spec.shape) == array.ndim)


def _stack(values: list) -> np.ndarray:
    shapes = {np.shape(v) for v in values}
    if len(shapes) <= 1:
        return np.stack(values) if values else np.empty((0,))
    return _ragged(values)


def _ragged(values: list) -> np.ndarray:
    """An object array of per-row values (np.array would try to make them one block)."""
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def _without_timing(data: dict) -> dict:
    data.pop("timing_ms", None)
    return data
