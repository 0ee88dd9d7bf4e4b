"""The one set of words for a device file that cannot be read or listed.

Each is a predicate to put after the file's path ("/sys/class/apex is missing"), so that the probe, the
telemetry readers and the diagnoses say the same failure the same way.
"""

from __future__ import annotations

import errno
import os

MISSING = "is missing"
BROKEN_LINK = "is a broken symlink"
OUTSIDE_ROOT = "leads outside the surveyed root"
A_DIRECTORY = "is a directory where a file was expected"
NOT_A_DIRECTORY = "is not a directory"


def not_readable() -> str:
    return f"is not readable by this user (uid {_uid()}: permission denied)"


def why_not(exc: BaseException, local: str | os.PathLike, verb: str = "read") -> str:
    """Why ``local`` could not be read (or listed, ``verb="listed"``): the predicate for ``exc``."""
    if isinstance(exc, FileNotFoundError):
        return BROKEN_LINK if os.path.islink(local) else MISSING
    if isinstance(exc, IsADirectoryError):
        return A_DIRECTORY
    if isinstance(exc, NotADirectoryError):
        return NOT_A_DIRECTORY
    if isinstance(exc, PermissionError):
        return not_readable()
    if isinstance(exc, OSError):  # EIO from a sensor that did not answer or a device that is gone, ENODATA...
        name = errno.errorcode.get(exc.errno or 0, "error")
        return f"cannot be {verb}: {name} ({exc.strerror or exc})"
    # a name with a NUL byte (ValueError) and anything else: a reason, not a crash
    return f"cannot be {verb}: {type(exc).__name__}: {exc}"


def _uid() -> int | str:
    try:
        return os.getuid()
    except AttributeError:  # not POSIX
        return "?"
