"""Run a reader as a user without privileges, to see what an unreadable sensor really does.

Root reads every file whatever its mode, so a chmod 000 proves nothing when the tests run as root: the reader
then runs in a forked child that has dropped to uid/gid 65534 (nobody). Everything it needs is imported
before the fork.
"""

from __future__ import annotations

import os
import pickle
import stat
from pathlib import Path

NOBODY = 65534


def world_traversable(path: Path) -> None:
    """Let an unprivileged user walk down to ``path``."""
    for part in [path, *path.parents]:
        mode = part.stat().st_mode
        if not mode & stat.S_IXOTH or not mode & stat.S_IROTH:
            try:
                part.chmod(mode | stat.S_IXOTH | stat.S_IROTH)
            except PermissionError:
                pass


def call_unprivileged(fn, *args):
    """fn(*args) as an unprivileged user when we are root, else directly. Returns its (picklable) result."""
    if os.geteuid() != 0:
        return fn(*args)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read)
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            payload = pickle.dumps(("ok", fn(*args)))
        except BaseException as exc:  # report anything to the parent
            payload = pickle.dumps(("error", repr(exc)))
        os.write(write, payload)
        os.close(write)
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    kind, value = pickle.loads(b"".join(chunks))
    if kind == "error":
        raise RuntimeError(f"unprivileged child failed: {value}")
    return value
