"""How a model reaches the nodes of a Ray cluster.

A model path on the driver may not exist on another node. By default (``ship="bytes"``) the driver reads every
file the model is made of (its artifacts, their weights and external data, a bundle's manifest and label file, a
label file passed as ``labels=``) and puts them once in Ray's object store; each node writes them into a folder
named by their digest under the temp dir, once per node (its actors share it), and loads from there. Edge models
are megabytes, so this costs little and needs no shared file system. ``ship="path"`` sends the path as it is, for
a file system every node mounts at the same place (or models too large for the object store); a node that lacks
it says so.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError, InputError

SHIP_MODES = ("bytes", "path")
LABELS_DIR = "_labels"  # where a label file given as labels= travels, apart from the model's own files


@dataclass(frozen=True)
class ModelPayload:
    """What an actor needs to load the model on its node: the files (by relative path) or a shared path."""

    source: str  # relative to the materialized folder (bytes), or the shared path itself (path)
    ship: str
    digest: str = ""
    files: dict[str, bytes] = field(default_factory=dict, repr=False)
    labels: str | None = None  # relative path of a shipped label file

    @property
    def size(self) -> int:
        return sum(len(b) for b in self.files.values())


def labels_given(load_options: dict):
    """The label file or names ``load_options`` carry: ``task_options=TaskOptions(labels=...)`` (or a dict), or
    the older ``labels=`` keyword; it travels with the model so that a node without the caller's path has it."""
    task_options = load_options.get("task_options")
    given = task_options.get("labels") if isinstance(task_options, dict) else getattr(task_options, "labels", None)
    return given if given is not None else load_options.get("labels")


def pack(model, ship: str = "bytes", labels=None, task: str | None = None) -> ModelPayload:
    """The payload for ``model`` (what ``edgeaccel.load`` takes: a file, a folder, a manifest, a list of files),
    validated here on the driver, with the task checked against its outputs, so that a bad model or a task that
    does not fit fails before any actor starts."""
    from ..modelfiles import bundle

    if ship not in SHIP_MODES:
        raise ConfigError(f"ship={ship!r} is not one of {', '.join(SHIP_MODES)}", key="ship",
                          hint="'bytes' sends the model files through Ray's object store; 'path' needs a file "
                               "system every node mounts at the same place")
    if isinstance(model, (list, tuple)):
        sources = [Path(p) for p in model]
    else:
        sources = [Path(model)]
    found = bundle.resolve(model if isinstance(model, (list, tuple)) else Path(model))
    if task is not None and found.artifacts:
        from ..vision.recognize import fits

        info = found.artifacts[0]
        fits(task, info, info.inputs, info.outputs, None)  # TaskError, with what the task needs
    if ship == "path":
        label_path = str(Path(labels).resolve()) if _is_label_file(labels) else None
        shared = [str(p.resolve()) for p in sources]
        return ModelPayload(shared if len(shared) > 1 else shared[0], "path", labels=label_path)
    paths = set()
    for info in found.artifacts:
        paths.add(Path(info.path))
        paths.update(Path(p) for p in info.extra_files)
    for extra in (found.reference, found.labels, found.calibration):
        if extra is not None:
            paths.add(Path(extra))
    manifests = [s for s in sources if s.is_file() and s.suffix in (".yaml", ".yml")]
    manifests += [s / bundle.MANIFEST for s in sources if s.is_dir() and (s / bundle.MANIFEST).is_file()]
    paths.update(manifests)
    # the layout is the one the files are named by, not where symlinks lead: a folder whose files link
    # elsewhere (a Hugging Face snapshot into its blobs/) unpacks as the folder, with each file beside its twin
    base = _common_folder([_absolute(p) for p in paths] + [_absolute(s) for s in sources])
    files = {str(_absolute(p).relative_to(base)): _read(p) for p in sorted(paths)}
    rel = [str(_absolute(s).relative_to(base)) or "." for s in sources]
    label_rel = None
    if _is_label_file(labels):
        label_rel = f"{LABELS_DIR}/{Path(labels).name}"
        files[label_rel] = _read(Path(labels))
    from ..digest import digest

    key = digest(b"".join(name.encode() + b"\0" + digest(data).encode() for name, data in sorted(files.items())))
    return ModelPayload(rel if len(rel) > 1 else rel[0], "bytes", key, files, label_rel)


def unpack(payload: ModelPayload, where: str | os.PathLike | None = None) -> tuple[object, str | None]:
    """On a node: (what to pass to ``edgeaccel.load``, the label file's path or None). Bytes are written once
    per node into ``<temp>/edgeaccel-ray/<digest>`` (atomically: a folder renamed into place)."""
    if payload.ship == "path":
        sources = payload.source if isinstance(payload.source, list) else [payload.source]
        missing = [s for s in sources + ([payload.labels] if payload.labels else []) if not Path(s).exists()]
        if missing:
            raise InputError(f"{', '.join(missing)} does not exist on this node ({_node_name()})",
                             hint="ship='path' needs a file system every node mounts at the same place; "
                                  "ship='bytes' (the default) sends the model files through Ray's object store")
        return payload.source, payload.labels
    root = Path(where or Path(tempfile.gettempdir()) / "edgeaccel-ray") / payload.digest
    if not root.is_dir():
        root.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{payload.digest[:12]}-", dir=root.parent))
        for name, data in payload.files.items():
            target = staging / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        try:
            os.rename(staging, root)
        except OSError:  # another actor on this node got there first: its copy holds the same bytes
            import shutil

            shutil.rmtree(staging, ignore_errors=True)
    sources = payload.source if isinstance(payload.source, list) else [payload.source]
    local = [str(root / s) for s in sources]
    return (local if len(local) > 1 else local[0]), (str(root / payload.labels) if payload.labels else None)


def _is_label_file(labels) -> bool:
    return isinstance(labels, (str, os.PathLike)) and Path(labels).is_file()


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path} to ship it to the Ray cluster: {exc.strerror or exc}") from exc


def _absolute(path: Path) -> Path:
    """Absolute and normalized (no ``..``), symlinks kept as named."""
    return Path(os.path.abspath(path))


def _common_folder(paths: list[Path]) -> Path:
    folders = [p if p.is_dir() else p.parent for p in paths]
    return Path(os.path.commonpath([str(f) for f in folders]))


def _node_name() -> str:
    import socket

    return socket.gethostname()
