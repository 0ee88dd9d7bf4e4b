"""A labelled detection dataset in memory: images, their boxes in pixels, and the class names; ``dataset_kind``
tells the layout from the path (COCO JSON or YOLO txt labels), and ``reader.read_dataset`` hands it to its reader."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from .cocomap import GroundTruth

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff")
YOLO_YAMLS = ("data.yaml", "dataset.yaml", "data.yml", "dataset.yml")


@dataclass
class ImageEntry:
    id: int
    path: Path
    width: int
    height: int


@dataclass
class Dataset:
    source: Path
    format: str  # "coco" or "yolo"
    images: list[ImageEntry] = field(default_factory=list)
    annotations: list[GroundTruth] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=dict)  # class id -> name; empty when the dataset names none
    notes: list[str] = field(default_factory=list)  # what the reader assumed (e.g. images without a label file)

    @property
    def class_ids(self) -> list[int]:
        return sorted(set(self.names) | {a.class_id for a in self.annotations})

    def name(self, class_id: int) -> str:
        return self.names.get(class_id, str(class_id))

    def limit(self, max_images: int | None) -> Dataset:
        """The first ``max_images`` images (in file order) and their objects."""
        if max_images is None or max_images >= len(self.images):
            return self
        images = self.images[:max_images]
        kept = {i.id for i in images}
        return Dataset(self.source, self.format, images, [a for a in self.annotations if a.image_id in kept],
                       self.names, self.notes)


def dataset_kind(path: str | os.PathLike) -> tuple[str | None, Path | str]:
    """("coco", json file), ("yolo", data.yaml or folder), or (None, why not)."""
    path = Path(path)
    if not path.exists():
        return None, "no such file or folder"
    if path.is_file():
        if path.suffix.lower() == ".json":
            return "coco", path
        if path.suffix.lower() in (".yaml", ".yml"):
            return "yolo", path
        return None, "a file that is neither a COCO .json nor a YOLO data .yaml"
    for name in YOLO_YAMLS:
        if (path / name).is_file():
            return "yolo", path / name
    if _has_yolo_labels(path):
        return "yolo", path
    jsons = sorted(p for p in list(path.glob("*.json")) + list(path.glob("annotations/*.json")) if p.is_file())
    if len(jsons) == 1:
        return "coco", jsons[0]
    if len(jsons) > 1:
        shown = ", ".join(p.name for p in jsons[:4])
        return None, f"a folder with {len(jsons)} JSON files ({shown}): pass the one to use"
    return None, "a folder with neither a labels/ folder beside images/, a data.yaml, nor a COCO .json"


def _has_yolo_labels(folder: Path) -> bool:
    return (folder / "images").is_dir() and (folder / "labels").is_dir()


def is_labelled(path: str | os.PathLike | None) -> bool:
    return path is not None and dataset_kind(path)[0] is not None


def image_size(path: Path) -> tuple[int, int]:
    """(width, height) of the image as read_image gives it (upright by its EXIF orientation, as Ultralytics
    reads a dataset's photos too): from the file's header (Pillow), else by decoding it."""
    try:
        from PIL import Image
    except ImportError:
        from ..imageio import read_image

        array = read_image(path)
        return int(array.shape[1]), int(array.shape[0])
    try:
        with Image.open(path) as image:
            turned = image.getexif().get(0x0112) in (5, 6, 7, 8)  # a quarter turn: width and height trade places
            return (int(image.height), int(image.width)) if turned else (int(image.width), int(image.height))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the image {path}: {exc}",
                         hint="remove it from the dataset or replace it with a readable image") from exc
