"""Path-based readers of device files: never above the surveyed root, never raising.

``Tree`` (device paths below its own root) and the telemetry readers (local paths below the root of
``confined()``) both read through these, so a file is refused, and a failure worded, one way.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePath

from . import words
from .confine import escapes, surveyed_root

# The root a reader is confined to when its caller names none: the innermost ``confined()``.
FROM_CONTEXT = object()


def _root(root: object) -> str | None:
    return surveyed_root() if root is FROM_CONTEXT else root  # type: ignore[return-value]


def under(root: str | os.PathLike, absolute: str) -> Path:
    """``absolute`` (a path on the device, e.g. "/sys/class/thermal") placed below ``root``."""
    return Path(root) / absolute.lstrip("/")


def natural_key(name: str | PurePath) -> tuple:
    """thermal_zone2 before thermal_zone10 (a path sorts by its last component)."""
    text = name.name if isinstance(name, PurePath) else str(name)
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def read_bytes(local: str | os.PathLike, limit: int, root: object = FROM_CONTEXT) -> tuple[bytes | None, str | None]:
    """(at most ``limit`` bytes, None) or (None, why): why is a ``words`` predicate for ``local``.
    ``root`` is a ``confine.real_root`` (None: this machine's own "/")."""
    try:
        if escapes(local, _root(root)):
            return None, words.OUTSIDE_ROOT
        with open(local, "rb") as handle:
            return handle.read(limit), None
    except Exception as exc:
        return None, words.why_not(exc, local)


def list_names(local: str | os.PathLike, root: object = FROM_CONTEXT) -> tuple[list[str], str | None]:
    """Entry names of a directory in natural order, or ([], why) with a ``words`` predicate."""
    try:
        if escapes(local, _root(root)):
            return [], words.OUTSIDE_ROOT
        names = os.listdir(local)
    except Exception as exc:
        return [], words.why_not(exc, local, "listed")
    return sorted(names, key=natural_key), None


def children(directory: str | os.PathLike, pattern: str, root: object = FROM_CONTEXT) -> list[Path]:
    """Entries of ``directory`` matching the glob ``pattern`` in natural order; [] if it cannot be listed.
    An entry may itself lead outside the root: reading it is refused, naming it is not."""
    try:
        if escapes(directory, _root(root)):
            return []
        return sorted(Path(directory).glob(pattern), key=natural_key)
    except Exception:
        return []


def exists(local: str | os.PathLike, root: object = FROM_CONTEXT) -> bool:
    """Whether ``local`` exists inside the root, following symlinks (a dangling link is not a node)."""
    try:
        return os.path.exists(local) and not escapes(local, _root(root))
    except Exception:
        return False


def is_dir(local: str | os.PathLike, root: object = FROM_CONTEXT) -> bool:
    """Whether ``local`` is a folder inside the root: False, not PermissionError, for one this user may not
    enter."""
    try:
        return os.path.isdir(local) and not escapes(local, _root(root))
    except Exception:
        return False
