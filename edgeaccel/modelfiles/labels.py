"""Class names for a model: a text file (one name a line, or ``id name`` lines as Coral's label files), a
``.pbtxt`` label map (``item { id: 1 name: "sedan" }``), the label file packed in a TFLite model's metadata
(the model file is then also a zip archive), or ONNX ``metadata_props`` (Ultralytics writes ``names``).

A model's class index c is shown as ``names[c + offset]``: a .pbtxt map numbers classes from 1 while
TFLite_Detection_PostProcess numbers them from 0, so such a map has offset 1 (ids minus one)."""

from __future__ import annotations

import ast
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from ..errors import InputError


@dataclass
class Labels:
    names: dict[int, str] = field(default_factory=dict)
    offset: int = 0  # model class index + offset = key in names
    source: str = "class ids"
    _warned: set = field(default_factory=set, repr=False, compare=False)

    def name(self, index: int) -> str:
        return self.names.get(int(index) + self.offset, str(int(index)))

    def for_ssd(self) -> Labels:
        """TFLite_Detection_PostProcess numbers classes from 0 without a background class; a text label file
        that starts with one ("???" in TensorFlow's labelmap.txt, "background") is read one line down."""
        if self.offset == 0 and self.names.get(0, "").strip().lower() in ("???", "background", "__background__"):
            return Labels(self.names, 1, self.source + " (first line is the background: read one line down)")
        return self

    def __len__(self) -> int:
        return len(self.names)

    def check_count(self, classes: int, what: str = "the model") -> None:
        """A label list shorter than the classes would show ids for the missing ones, or hide an offset of one
        (1000 ImageNet names for a 1001-class model): say so loudly, once, instead of shifting silently."""
        if not self.names or classes <= 0:
            return
        covered = sum(1 for c in range(classes) if c + self.offset in self.names)
        if covered >= classes or classes in self._warned:
            return
        self._warned.add(classes)
        extra = (" If index 0 is a background class, add a first line 'background'."
                 if classes - len(self.names) == 1 and self.offset == 0 else "")
        message = (f"labels from {self.source} name {covered} of the {classes} classes {what} has; classes "
                   f"without a name are shown by their index.{extra}")
        warnings.warn(LabelWarning(message), stacklevel=_caller_level())


def _caller_level() -> int:
    """The stack level of the first frame outside edgeaccel: the warning points at the caller's line."""
    import sys

    package = str(Path(__file__).resolve().parents[1])
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level


class LabelWarning(UserWarning):
    """Labels that do not cover the model's classes (shown once per label set and class count)."""


def read_labels(source, model_path: str | Path | None = None, metadata: dict | None = None) -> Labels:
    """Labels from ``source`` (a path, a list of names, a dict {index: name} or a Labels), else from the model's
    own metadata, else none (class ids are shown)."""
    if isinstance(source, Labels):
        return source
    if isinstance(source, dict):
        return Labels({int(k): str(v) for k, v in source.items()}, 0, "the given dict")
    if isinstance(source, (list, tuple)):
        return Labels({i: str(v) for i, v in enumerate(source)}, 0, "the given list")
    if source is not None:
        return read_label_file(source)
    if metadata and "names" in metadata:
        names = parse_names(metadata["names"])
        if names:
            return Labels(names, 0, "the model's metadata (names)")
    if model_path is not None:
        packed = tflite_packed_labels(model_path)
        if packed is not None:
            return packed
    return Labels()


def read_label_file(path: str | os.PathLike) -> Labels:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"cannot read labels {path}: {exc.strerror or exc}",
                         hint="give a text file with one name a line, or a .pbtxt label map") from exc
    if path.suffix.lower() == ".pbtxt" or re.search(r"^\s*item\s*\{", text, re.M):
        names = parse_pbtxt(text)
        if not names:
            raise InputError(f"{path.name} holds no `item {{ id: N name: \"...\" }}` entries",
                             hint="a label map names each class in an item block with its id")
        return Labels(names, min(names) if min(names) > 0 else 0, path.name)
    return Labels(parse_text(text), 0, path.name)


def parse_text(text: str) -> dict[int, str]:
    lines = [line.strip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    matches = [re.match(r"^(\d+)[\s:,]+(\S.*)$", line) for line in lines if line]
    numbered = [m for m in matches if m is not None]
    if lines and len(numbered) == len(matches):  # Coral style: "0  person"
        return {int(m.group(1)): m.group(2).strip() for m in numbered}
    return dict(enumerate(lines))


def parse_pbtxt(text: str) -> dict[int, str]:
    names: dict[int, str] = {}
    for block in re.findall(r"item\s*\{(.*?)\}", text, re.S):
        ident = re.search(r"\bid\s*:\s*(-?\d+)", block)
        name = re.search(r"\bdisplay_name\s*:\s*\"([^\"]*)\"", block) or re.search(r"\bname\s*:\s*\"([^\"]*)\"", block)
        if ident and name:
            names[int(ident.group(1))] = name.group(1)
    return names


def parse_names(value: str) -> dict[int, str]:
    """Ultralytics' ``names``: a Python dict literal {0: 'person', ...}; also a list or comma-separated text."""
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        parsed = [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(parsed, dict):
        return {int(k): str(v) for k, v in parsed.items()}
    if isinstance(parsed, (list, tuple)):
        return {i: str(v) for i, v in enumerate(parsed)}
    return {}


def tflite_packed_labels(path: str | Path) -> Labels | None:
    """TFLite metadata packs associated files (labels.txt) as a zip appended to the flatbuffer. zipfile (and
    the shutil it imports) is loaded only for a file that ends in a zip directory: a plain `run` reads this."""
    if not _ends_in_zip(path):
        return None
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            for member in archive.namelist():
                if member.lower().endswith((".txt", ".pbtxt")) and "label" in member.lower():
                    text = archive.read(member).decode("utf-8", errors="replace")
                    if member.lower().endswith(".pbtxt"):
                        names = parse_pbtxt(text)
                        return Labels(names, min(names) if names and min(names) > 0 else 0,
                                      f"{Path(path).name} metadata ({member})")
                    return Labels(parse_text(text), 0, f"{Path(path).name} metadata ({member})")
    except (zipfile.BadZipFile, OSError, KeyError):
        return None
    return None


def _ends_in_zip(path: str | Path) -> bool:
    """The end-of-central-directory record of a zip sits in the last 64 kB + 22 bytes of the file."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - (65536 + 22)))
            return b"PK\x05\x06" in f.read()
    except OSError:
        return False


def onnx_metadata(path: str | Path) -> dict[str, str]:
    """ONNX ``metadata_props`` (ModelProto field 14: key 1, value 2), read with edgeaccel's own protobuf reader."""
    from ..formats import protobuf as pb
    from ..formats.onnx import string_entry

    import mmap

    try:
        with open(path, "rb") as f:
            if not os.fstat(f.fileno()).st_size:
                return {}
            # mapped, not read: every command asks for the metadata (model.pipeline), and a 500 MB model
            # read into memory for a few hundred bytes of it would double the peak
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                props: dict[str, str] = {}
                for num, wire, val in pb.fields(data):
                    if num == 14 and wire == pb.LENGTH:
                        key, value = string_entry(data, val)
                        props[key] = value
                return props
    except (OSError, ValueError, pb.ProtobufError):
        return {}
