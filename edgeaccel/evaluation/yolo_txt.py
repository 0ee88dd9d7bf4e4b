"""YOLO txt labels: ``images/...`` beside ``labels/...`` (the same relative path, ``.txt``), one object a line:
``class cx cy w h`` normalized to 0..1 (a polygon ``class x1 y1 x2 y2 ...`` is read as its bounding box), class
names from a data.yaml (``names``, split ``val``), a ``classes.txt`` or a ``.names`` file. An image without a label
file has no object (a background image), as Ultralytics reads it."""

from __future__ import annotations

import math
import os
from pathlib import Path

from ..errors import InputError
from .cocomap import GroundTruth
from .dataset import IMAGE_SUFFIXES, Dataset, ImageEntry, image_size

LABEL_HINT = "each line is `class cx cy w h` (class an integer id, the box normalized to 0..1 of the image)"


def read_yolo(where: Path) -> Dataset:
    if where.is_file():
        return _from_yaml(where)
    return _from_folder(where)


def _from_yaml(path: Path) -> Dataset:
    from ..schema import load_yaml

    data = load_yaml(path)
    if not isinstance(data, dict):
        raise InputError(f"{path} is not a YOLO data.yaml (a mapping with names and val)",
                         hint="write `path:`, `val: images/val` and `names: {0: person, ...}`")
    root = Path(data.get("path") or ".")
    root = root if root.is_absolute() else (path.parent / root)
    split_key = next((k for k in ("val", "test", "train") if data.get(k)), None)
    if split_key is None:
        raise InputError(f"{path} names no split to evaluate (val, test or train)",
                         hint="add `val: images/val` (a folder of images, a .txt list of them, or a list)")
    names = _names(data.get("names"), path)
    if not names and data.get("nc"):
        names = {i: str(i) for i in range(int(data["nc"]))}
    splits = data[split_key] if isinstance(data[split_key], list) else [data[split_key]]
    images: list[Path] = []
    for split in splits:
        images += _split_images(root, str(split), path)
    notes = [] if split_key == "val" else [f"{path.name} has no val split: evaluated its {split_key} split"]
    return _read(path, images, names, notes)


def _from_folder(folder: Path) -> Dataset:
    images_dir = folder / "images"
    notes = []
    if (images_dir / "val").is_dir():
        images_dir = images_dir / "val"
        notes.append("evaluated images/val (the folder has splits)")
    images = _images_in(images_dir)
    names_file = next((p for p in (folder / "classes.txt", folder / "labels" / "classes.txt")
                       if p.is_file()), None) or next(iter(sorted(folder.glob("*.names"))), None)
    names = {}
    if names_file is not None:
        lines = [line.strip() for line in names_file.read_text(encoding="utf-8", errors="replace").splitlines()]
        names = {i: n for i, n in enumerate(line for line in lines if line)}
    else:
        notes.append("no data.yaml, classes.txt or .names file: classes are known by id only")
    return _read(folder, images, names, notes)


def _names(value, path: Path) -> dict[int, str]:
    if value is None:
        return {}
    if isinstance(value, list):
        return {i: str(v) for i, v in enumerate(value)}
    if isinstance(value, dict):
        try:
            return {int(k): str(v) for k, v in value.items()}
        except (TypeError, ValueError):
            pass
    raise InputError(f"{path}: names must be a list or a mapping of class id to name, not {value!r}",
                     hint="write `names: {0: person, 1: car}` or `names: [person, car]`")


def _split_images(root: Path, split: str, yaml_path: Path) -> list[Path]:
    target = Path(split) if Path(split).is_absolute() else root / split
    if target.is_dir():
        return _images_in(target)
    if target.is_file() and target.suffix == ".txt":
        listed = [line.strip() for line in target.read_text(encoding="utf-8").splitlines() if line.strip()]
        return [p if p.is_absolute() else (root / p) for p in map(Path, listed)]
    raise InputError(f"{yaml_path}: the split {split!r} is neither a folder nor a .txt list of images ({target})",
                     hint="`path:` is the dataset's root (relative to the yaml), splits are relative to it")


def _images_in(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise InputError(f"no images folder at {folder}", hint="a YOLO dataset keeps its images in images/")
    return sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())


def label_path(image: Path) -> Path:
    """Ultralytics' rule: the last ``images`` folder of the path becomes ``labels``, the suffix ``.txt``."""
    text = str(image)
    marker = f"{os.sep}images{os.sep}"
    if marker in text:
        head, tail = text.rsplit(marker, 1)
        text = f"{head}{os.sep}labels{os.sep}{tail}"
    return Path(text).with_suffix(".txt")


def _read(source: Path, image_paths: list[Path], names: dict[int, str], notes: list[str]) -> Dataset:
    if not image_paths:
        raise InputError(f"{source} holds no images", hint=f"put images ({', '.join(IMAGE_SUFFIXES)}) in images/")
    dataset = Dataset(source, "yolo", names=names, notes=notes)
    missing = 0
    for image_id, image in enumerate(image_paths, 1):
        if not image.is_file():
            raise InputError(f"{source}: the image {image} does not exist", hint="fix the split's list of images")
        width, height = image_size(image)
        dataset.images.append(ImageEntry(image_id, image, width, height))
        labels = label_path(image)
        if not labels.is_file():
            missing += 1
            continue
        dataset.annotations += parse_label_file(labels, image_id, width, height, names)
    if missing:
        dataset.notes.append(f"{missing} of {len(image_paths)} images have no label file: read as images without "
                             "objects")
    return dataset


def parse_label_file(path: Path, image_id: int, width: int, height: int,
                     names: dict[int, str]) -> list[GroundTruth]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the label file {path}: {exc}", hint=LABEL_HINT) from exc
    boxes = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            boxes.append(_parse_line(line, f"{path}:{number}", image_id, width, height, names))
    return boxes


def _parse_line(line: str, where: str, image_id: int, width: int, height: int,
                names: dict[int, str]) -> GroundTruth:
    fields = line.split()
    if len(fields) != 5 and (len(fields) < 7 or len(fields) % 2 == 0):
        raise InputError(f"{where}: {len(fields)} values in {line.strip()!r}; a box line has 5 (a polygon 1 + an "
                         "even number of coordinates)", hint=LABEL_HINT)
    try:
        values = [float(v) for v in fields]
    except ValueError:
        raise InputError(f"{where}: not a number in {line.strip()!r}", hint=LABEL_HINT) from None
    class_value = values[0]
    if not class_value.is_integer() or class_value < 0:
        raise InputError(f"{where}: the class {fields[0]!r} is not a class id (a whole number from 0)", hint=LABEL_HINT)
    class_id = int(class_value)
    if names and class_id not in names:
        raise InputError(f"{where}: class {class_id} is not among the dataset's {len(names)} names "
                         f"(0..{max(names)})", hint="add the class to `names`, or fix the label")
    coords = values[1:]
    if not all(math.isfinite(v) and -0.01 <= v <= 1.01 for v in coords):
        raise InputError(f"{where}: coordinates {fields[1:]} are not normalized to 0..1 (pixels?)", hint=LABEL_HINT)
    if len(coords) == 4:
        cx, cy, w, h = coords
        if w <= 0 or h <= 0:
            raise InputError(f"{where}: the box has no area (w={fields[3]}, h={fields[4]})", hint=LABEL_HINT)
        x1, y1, x2, y2 = cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2
    else:
        xs, ys = coords[0::2], coords[1::2]
        x1, y1, x2, y2 = min(xs), min(ys), max(xs), max(ys)
        if x2 <= x1 or y2 <= y1:
            raise InputError(f"{where}: the polygon encloses no area", hint=LABEL_HINT)
    x1, x2 = max(0.0, x1) * width, min(1.0, x2) * width
    y1, y2 = max(0.0, y1) * height, min(1.0, y2) * height
    return GroundTruth(image_id, class_id, (x1, y1, x2 - x1, y2 - y1))
