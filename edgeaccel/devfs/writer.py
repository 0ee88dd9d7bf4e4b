"""Writing files, folders, symlinks and device-node stand-ins below a root, as a device's kernel lays them out.

Paths are written as on the device ("/sys/class/thermal/thermal_zone0/temp", or without the leading "/").
Writes are atomic by default (write, then rename), so a reader running in another thread never sees half a
number; ``atomic=False`` is cheaper where nothing reads concurrently (the discrete-event simulator).
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path


class FileWriter:
    """The file-level half of ``DeviceFiles``: what is written where, not what a device's layout is."""

    def __init__(self, root: str | os.PathLike, atomic: bool = True) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.atomic = atomic
        self._written: dict[Path, bytes] = {}  # what this writer last wrote where: an unchanged value is not rewritten

    def path(self, path: str) -> Path:
        """Where ``path`` (a path on the device) lies on this machine."""
        return self.root / path.lstrip("/")

    local = path  # the name FakeTree gave ``path``

    def forget(self, path: str) -> None:
        """Write ``path`` again next time even if its value is unchanged (something else changed the file)."""
        self._written.pop(self.path(path), None)

    def file(self, path: str, content: str | bytes = "", mode: int | None = None) -> FileWriter:
        """A file holding exactly ``content`` (text as UTF-8), with permission bits ``mode`` if given."""
        self._put(self.path(path), content if isinstance(content, bytes) else content.encode("utf-8"), mode)
        return self

    def write(self, path: str, value: object) -> Path:
        """A sysfs attribute: ``value`` as text with the kernel's trailing newline (bytes as they are)."""
        local = self.path(path)
        self._put(local, value if isinstance(value, bytes) else f"{value}\n".encode())
        return local

    def dir(self, path: str) -> FileWriter:
        self.path(path).mkdir(parents=True, exist_ok=True)
        return self

    def node(self, path: str, mode: int = 0o660) -> FileWriter:
        """A device node stand-in (an empty file): only its presence and permission bits matter to a survey."""
        return self.file(path, "", mode)

    def symlink(self, path: str, target: str) -> FileWriter:
        """A symlink at ``path`` to ``target`` (a device path), written relative like sysfs's own links so
        that it resolves inside the tree; the target need not exist (a broken link). It replaces what is at
        ``path``, a folder too (a second board built on the same tree)."""
        link = self.path(path)
        link.parent.mkdir(parents=True, exist_ok=True)
        relative = os.path.relpath(self.path(target), link.parent)
        if link.is_dir() and not link.is_symlink():
            shutil.rmtree(link)
        elif link.is_symlink() or link.exists():
            link.unlink()
        os.symlink(relative, link)
        self._written.pop(link, None)
        return self

    def _put(self, local: Path, data: bytes, mode: int | None = None) -> None:
        if mode is None and self._written.get(local) == data:
            return
        local.parent.mkdir(parents=True, exist_ok=True)
        if self.atomic:
            # one staging file per writing thread: an emulated device's worker threads update the same counter
            staged = local.with_name(f".{local.name}.tmp{os.getpid()}.{threading.get_ident()}")
            staged.write_bytes(data)
            if mode is not None:
                os.chmod(staged, mode)
            os.replace(staged, local)
        else:
            with open(local, "wb") as handle:
                handle.write(data)
            if mode is not None:
                os.chmod(local, mode)
        self._written[local] = data
