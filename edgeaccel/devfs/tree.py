"""A device's file system seen from a root: files read as text, or a reason why not.

Paths are written as they are on the device ("/proc/cpuinfo") and looked up below ``Tree.root``, so tests
and users can survey a fake tree (or a mounted image of another device) with ``root=``. A source that is
missing, unreadable, a directory, a broken symlink, or leads out of the root becomes a ``Read`` with a
reason instead of an exception.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Union

from . import files
from .confine import real_root

# sysfs and procfs files are small; a "file" far larger than this is not what we were looking for.
READ_LIMIT = 1 << 20


@dataclass(frozen=True)
class Read:
    """The text of one source, or why there is none (a ``devfs.words`` predicate for ``path``)."""

    path: str  # as on the device, e.g. "/proc/cpuinfo"
    text: str | None
    reason: str | None = None

    def __bool__(self) -> bool:
        return self.text is not None

    def strip(self) -> str | None:
        """The text without surrounding whitespace and device-tree NUL terminators, None when absent."""
        return None if self.text is None else self.text.strip().strip("\x00").strip()


class Tree:
    """A device's file system seen from ``root`` (default "/"). Readers accept a Tree or a root path."""

    def __init__(self, root: str | os.PathLike = "/") -> None:
        self.root = Path(root)
        self._real_root = real_root(self.root)
        self.is_real = self._real_root is None

    def path(self, target: str) -> Path:
        """Where ``target`` (a path on the device) lies on this machine."""
        return self.root / target.lstrip("/")

    def on_device(self, local: str) -> str:
        """The path on the device of ``local``, a path below the root (the inverse of ``path``); anything
        else (a path elsewhere, "nvml:0") as it is."""
        if not os.path.isabs(local):
            return local
        relative = os.path.relpath(local, self.root)
        return local if relative.split(os.sep)[0] == ".." else "/" + relative

    def read(self, target: str, limit: int = READ_LIMIT) -> Read:
        data, why = files.read_bytes(self.path(target), limit, self._real_root)
        if data is None:
            return Read(target, None, why)
        return Read(target, data.decode("utf-8", "replace"))

    def listdir(self, target: str) -> tuple[list[str], str | None]:
        """Entry names of a directory in natural order, or [] and the reason (naming ``target``)."""
        names, why = files.list_names(self.path(target), self._real_root)
        return names, (f"{target} {why}" if why else None)

    def link_name(self, target: str) -> str | None:
        """The last component of a symlink's target (a sysfs ``driver`` link names the driver), None if
        ``target`` is not a symlink. Only the link text is read, so a link to a missing place still names it."""
        try:
            return os.path.basename(os.readlink(self.path(target)).rstrip("/")) or None
        except Exception:
            return None

    def exists(self, target: str) -> bool:
        """Whether ``target`` exists, following symlinks (a dangling link is not a library or a node)."""
        return files.exists(self.path(target), self._real_root)

    def is_dir(self, target: str) -> bool:
        return files.is_dir(self.path(target), self._real_root)


Root = Union[str, "os.PathLike[str]", Tree]


def as_tree(root: Root = Path("/")) -> Tree:
    """The Tree for ``root`` (a path, or already a Tree)."""
    return root if isinstance(root, Tree) else Tree(root)
