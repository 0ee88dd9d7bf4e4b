"""The model repository: the one folder the server loads models from.

Each entry of the folder is one model: a sub-folder (the artifacts of one model, or a bundle with
``edgeaccel-bundle.yaml``; loaded as ``edgeaccel.load(folder)`` would) or a model file (``.tflite``, ``.onnx``,
an OpenVINO ``.xml`` with its ``.bin``). The model's name is the folder's name or the file's stem; files that
share a stem (``m.tflite`` and ``m.onnx``) are the artifacts of one model, loaded together as
``edgeaccel.load([...])`` loads a list (which refuses files whose inputs or outputs differ, saying so). Other
files (labels, licences, weights beside an ``.xml``) and hidden entries are not models.

A model is found only by its name, never by a path a client sends: names are plain ([A-Za-z0-9._-], no
leading dot), and an entry that is, or holds, a symlink leading outside the folder is refused with the reason
(the repository API must not become a way to read other files on the machine).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import ServeError

MODEL_SUFFIXES = (".tflite", ".onnx", ".xml")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def refuse_overrides(parameters, name: str) -> None:
    """A load request's parameters: Triton's ``config`` override and ``file:...`` uploads (tritonclient's
    ``load_model(config=, files=)``) would make the server load something other than the folder's files; silently
    ignored, the client would believe its upload is what runs. Refused, saying so."""
    given = sorted(str(key) for key in parameters)
    if given:
        raise ServeError(400, f"load of '{name}' with parameters {given}: the server loads a model only from its "
                              "files in the repository folder (no configuration override, no uploaded files); "
                              "copy the files into the folder and load it by name")


def layout_hint(entry: Entry) -> str:
    """For a folder that did not load: what to do when it is laid out as Triton's repository is (``NAME/1/model.onnx``
    beside ``config.pbtxt``), which this server does not read; "" otherwise."""
    folder = entry.paths[0]
    if len(entry.paths) != 1 or not folder.is_dir():
        return ""
    versions = sorted((p for p in folder.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))
    if not versions or not any(f.suffix.lower() in MODEL_SUFFIXES for f in versions[-1].iterdir()):
        return ""
    return (f" (this is Triton's layout, {entry.name}/{versions[-1].name}/...: edgeaccel serve reads a model's files "
            f"from {entry.name}/ itself, one version per model, and no config.pbtxt; move the files up a level)")


@dataclass(frozen=True)
class Entry:
    name: str
    paths: tuple[Path, ...]  # resolved, inside the repository: a folder, or the files of one model
    problem: str | None = None  # why it cannot be loaded (a path escape), or None

    @property
    def source(self) -> Path | list[Path]:
        """What edgeaccel.load takes: the folder or file, or the list of a model's files."""
        return self.paths[0] if len(self.paths) == 1 else list(self.paths)


class ModelRepository:
    def __init__(self, root: str | os.PathLike) -> None:
        given = Path(root)
        if not given.is_dir():
            raise ServeError(400, f"model repository {given} is not a folder: give the folder that holds one "
                                  "folder or model file per model")
        self.root = given.resolve()

    def entries(self) -> dict[str, Entry]:
        """Every model the folder holds now, by name (read again on every call: models may be added)."""
        children: dict[str, list[Path]] = {}
        for child in sorted(self.root.iterdir()):
            name = self._name_of(child)
            if name is not None:
                children.setdefault(name, []).append(child)
        found = {}
        for name, paths in children.items():
            if len(paths) > 1 and any(p.is_dir() for p in paths):
                found[name] = Entry(name, tuple(p.resolve() for p in paths),
                                    f"'{name}' is both a folder and a file ({', '.join(p.name for p in paths)}): "
                                    "rename one, a name is one model")
                continue
            problems = [why for why in map(self._escape, paths) if why]
            found[name] = Entry(name, tuple(p.resolve() for p in paths), problems[0] if problems else None)
        return found

    def resolve(self, name: str) -> Entry:
        """The entry for ``name``: 404 when the folder holds no such model, 400 for a name that is not one."""
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise ServeError(400, f"{name!r} is not a model name: names are letters, digits, '.', '_' and '-' "
                                  "(the name of a folder or file stem in the model repository), never a path")
        entry = self.entries().get(name)
        if entry is None:
            raise ServeError(404, f"no model named '{name}' in the repository {self.root}: "
                                  "GET /v2/repository/index lists what it holds")
        return entry

    @staticmethod
    def _name_of(child: Path) -> str | None:
        if child.name.startswith("."):
            return None
        if child.is_dir():
            name = child.name
        elif child.suffix.lower() in MODEL_SUFFIXES and child.is_file():
            name = child.stem
        else:
            return None
        return name if NAME.fullmatch(name) else None

    def _escape(self, child: Path) -> str | None:
        """Why ``child`` may not be loaded (it, or something in it, leads outside the repository), or None.
        Folders are walked through their symlinks too (each real folder once): ``m/sub -> ../other`` stays inside,
        but a link out in ``other`` is read when ``m`` loads through ``sub``."""
        pending, seen = [child], set()
        while pending:
            path = pending.pop(0)
            target = path.resolve()
            if target != self.root and self.root not in target.parents:
                link = "is a symlink to" if path.is_symlink() else "resolves to"
                return (f"{path.relative_to(self.root)} {link} {target}, outside the model repository {self.root}: "
                        "copy the model into the repository "
                        "(the server loads only from its own folder)")
            if target.is_dir() and target not in seen:
                seen.add(target)
                pending.extend(sorted(path.iterdir()))
        return None
