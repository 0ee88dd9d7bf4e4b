"""COCO detection JSON: ``images`` (id, file_name, width, height), ``annotations`` (image_id, category_id,
bbox [x, y, w, h] in pixels, iscrowd, area) and ``categories`` (id, name). A wrong entry is named by its place
(``annotations[12].bbox``) and the file."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..errors import InputError
from .cocomap import GroundTruth
from .dataset import Dataset, ImageEntry, image_size

HINT = "COCO detection JSON: images [{id, file_name, width, height}], annotations [{id, image_id, category_id, " \
       "bbox: [x, y, w, h] in pixels, iscrowd}], categories [{id, name}]"


def read_coco(path: Path, images_dir=None) -> Dataset:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}", hint=HINT) from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}", hint=HINT) from exc
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise InputError(f"{path} has no `images` list: not a COCO JSON file", hint=HINT)
    for key in ("annotations", "categories"):
        if not isinstance(data.get(key, []), list):
            raise InputError(f"{path}: `{key}` must be a list", hint=HINT)
    first = data["images"][0].get("file_name") if data["images"] and isinstance(data["images"][0], dict) else None
    folder = _image_folder(path, images_dir, first)
    dataset = Dataset(path, "coco")
    for i, category in enumerate(data.get("categories", [])):
        where = f"{path}: categories[{i}]"
        ident = _int(_field(category, "id", where), f"{where}.id")
        dataset.names[ident] = str(category.get("name", ident))
    seen = set()
    for i, entry in enumerate(data["images"]):
        where = f"{path}: images[{i}]"
        ident = _int(_field(entry, "id", where), f"{where}.id")
        if ident in seen:
            raise InputError(f"{where}: the image id {ident} is given twice", hint=HINT)
        seen.add(ident)
        file = folder / str(_field(entry, "file_name", where))
        if not file.is_file():
            raise InputError(f"{where}: the image {file} does not exist",
                             hint="pass the folder the file names are relative to (--images DIR)")
        width, height = entry.get("width"), entry.get("height")
        if not (isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0):
            width, height = image_size(file)
        dataset.images.append(ImageEntry(ident, file, width, height))
    for i, ann in enumerate(data.get("annotations", [])):
        dataset.annotations.append(_annotation(ann, f"{path}: annotations[{i}]", seen, dataset.names))
    if not data.get("categories"):
        dataset.notes.append(f"{path.name} has no categories: classes are known by id only")
    return dataset


def _image_folder(path: Path, images_dir, first_file) -> Path:
    """The folder the file names are relative to: the one given, else the first of the JSON's folder, an
    images/ folder beside it, or beside its parent (annotations/instances_val.json) that holds the first image."""
    if images_dir is not None:
        return Path(images_dir)
    candidates = (path.parent, path.parent / "images", path.parent.parent / "images")
    return next((c for c in candidates if first_file and (c / str(first_file)).is_file()), path.parent)


def _field(entry, key: str, where: str):
    if not isinstance(entry, dict) or key not in entry:
        raise InputError(f"{where} has no `{key}`", hint=HINT)
    return entry[key]


def _int(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
        raise InputError(f"{where} must be a whole number, not {value!r}", hint=HINT)
    return int(value)


def _annotation(ann, where: str, images: set, names: dict) -> GroundTruth:
    image_id = _int(_field(ann, "image_id", where), f"{where}.image_id")
    if image_id not in images:
        raise InputError(f"{where}: image_id {image_id} is not in `images`", hint=HINT)
    class_id = _int(_field(ann, "category_id", where), f"{where}.category_id")
    if names and class_id not in names:
        raise InputError(f"{where}: category_id {class_id} is not in `categories`", hint=HINT)
    box = _field(ann, "bbox", where)
    if not (isinstance(box, list) and len(box) == 4 and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                             and math.isfinite(v) for v in box)):
        raise InputError(f"{where}.bbox must be 4 numbers [x, y, w, h], not {box!r}", hint=HINT)
    if box[2] < 0 or box[3] < 0:
        raise InputError(f"{where}.bbox {box} has a negative width or height ([x, y, w, h], not x1 y1 x2 y2?)",
                         hint=HINT)
    area = ann.get("area")
    if area is not None and (isinstance(area, bool) or not isinstance(area, (int, float))):
        raise InputError(f"{where}.area must be a number, not {area!r}", hint=HINT)
    x, y, w, h = (float(v) for v in box)
    return GroundTruth(image_id, class_id, (x, y, w, h), bool(ann.get("iscrowd", 0)),
                       None if area is None else float(area))
