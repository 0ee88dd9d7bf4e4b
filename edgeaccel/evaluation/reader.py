"""``read_dataset``: a labelled dataset from a path, read by the reader of its layout (``coco_json``, ``yolo_txt``).

Apart from ``dataset.py`` because it imports the readers, which build ``dataset.Dataset``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError
from .dataset import Dataset, dataset_kind


def read_dataset(path: str | os.PathLike, images: str | os.PathLike | None = None) -> Dataset:
    """A COCO JSON file (``images``: the folder its file names are relative to; by default the JSON's folder,
    or an ``images`` folder beside it), a YOLO data.yaml, or a folder holding either."""
    kind, where = dataset_kind(path)
    if kind == "coco":
        from .coco_json import read_coco

        return read_coco(Path(where), images)
    if kind == "yolo":
        from .yolo_txt import read_yolo

        return read_yolo(Path(where))
    raise InputError(f"{path} is not a labelled dataset: {where}",
                     hint="give a COCO JSON file (images, annotations, categories), a YOLO data.yaml, or a folder "
                          "with images/ and labels/ (one class cx cy w h line per object, normalized)")
