"""Reading files of a device tree below a root, never above it, and never raising.

Every reader of the probe goes through ``Tree``: paths are written as they are on the device
("/proc/cpuinfo") and looked up below ``Tree.root``, so tests and users can survey a fake tree (or a
mounted image of another device) with ``root=``. A source that is missing, unreadable, a directory, a
broken symlink, or a symlink that leads out of the root becomes a ``Read`` with a reason instead of an
exception.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Union

# sysfs and procfs files are small; a "file" far larger than this is not what we were looking for.
READ_LIMIT = 1 << 20


@dataclass(frozen=True)
class Read:
    """The text of one source, or why there is none."""

    path: str  # as on the device, e.g. "/proc/cpuinfo"
    text: str | None
    reason: str | None = None

    def __bool__(self) -> bool:
        return self.text is not None

    def strip(self) -> str | None:
        """The text without surrounding whitespace and device-tree NUL terminators, None when absent."""
        return None if self.text is None else self.text.strip().strip("\x00").strip()


def natural_key(name: str) -> tuple:
    """thermal_zone2 before thermal_zone10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


class Tree:
    """A device's file system seen from ``root`` (default "/"). Readers accept a Tree or a root path."""

    def __init__(self, root: str | os.PathLike = "/") -> None:
        self.root = Path(root)
        self.is_real = os.path.realpath(self.root) == os.path.realpath("/")
        self._real_root = os.path.realpath(self.root)

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

    def _escapes(self, local: Path) -> bool:
        if self.is_real:
            return False
        real = os.path.realpath(local)
        return not (real == self._real_root or real.startswith(self._real_root.rstrip(os.sep) + os.sep))

    def read(self, target: str, limit: int = READ_LIMIT) -> Read:
        local = self.path(target)
        try:
            if self._escapes(local):
                return Read(target, None, "is a symlink that leads outside the probed root")
            with open(local, "rb") as handle:
                data = handle.read(limit)
        except FileNotFoundError:
            return Read(target, None, "broken symlink" if os.path.islink(local) else "missing")
        except IsADirectoryError:
            return Read(target, None, "is a directory where a file was expected")
        except PermissionError:
            return Read(target, None, "not readable by this user (permission denied)")
        except OSError as exc:  # EIO from a sysfs attribute of a device that is gone, ENODATA, ...
            return Read(target, None, f"cannot be read: {exc.strerror or exc}")
        except Exception as exc:  # a name with a NUL byte (ValueError) and anything else: a reason, not a crash
            return Read(target, None, f"cannot be read: {type(exc).__name__}: {exc}")
        return Read(target, data.decode("utf-8", "replace"))

    def listdir(self, target: str) -> tuple[list[str], str | None]:
        """Entry names of a directory in natural order, or [] and the reason."""
        local = self.path(target)
        try:
            if self._escapes(local):
                return [], f"{target} is a symlink that leads outside the probed root"
            names = os.listdir(local)
        except FileNotFoundError:
            return [], f"{target} is missing" if not os.path.islink(local) else f"{target} is a broken symlink"
        except NotADirectoryError:
            return [], f"{target} is not a directory"
        except PermissionError:
            return [], f"{target} is not readable by this user (permission denied)"
        except Exception as exc:
            return [], f"{target} cannot be listed: {getattr(exc, 'strerror', None) or exc}"
        return sorted(names, key=natural_key), None

    def link_name(self, target: str) -> str | None:
        """The last component of a symlink's target (a sysfs ``driver`` link names the driver), None if
        ``target`` is not a symlink. Only the link text is read, so a link to a missing place still names it."""
        try:
            return os.path.basename(os.readlink(self.path(target)).rstrip("/")) or None
        except Exception:
            return None

    def exists(self, target: str) -> bool:
        """Whether ``target`` exists, following symlinks (a dangling link is not a library or a node)."""
        local = self.path(target)
        try:
            return os.path.exists(local) and not self._escapes(local)
        except Exception:
            return False

    def is_dir(self, target: str) -> bool:
        local = self.path(target)
        try:
            return local.is_dir() and not self._escapes(local)
        except Exception:
            return False


Root = Union[str, "os.PathLike[str]", Tree]


def as_tree(root: Root = Path("/")) -> Tree:
    """The Tree for ``root`` (a path, or already a Tree)."""
    return root if isinstance(root, Tree) else Tree(root)
