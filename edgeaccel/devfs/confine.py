"""The one escape rule: nothing is read from outside the surveyed root.

A survey of a fake tree or of a mounted image of another device must not follow an absolute symlink (or a
``..``) into this machine's own /sys. A ``Tree`` carries its root; the path-based readers of ``files`` take
theirs from ``confined()`` (set by the caller that owns the root: a telemetry inventory, a sampler).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator

_ROOT: contextvars.ContextVar[str | None] = contextvars.ContextVar("edgeaccel_devfs_root", default=None)


def real_root(root: str | os.PathLike) -> str | None:
    """The resolved ``root``, or None for this machine's own "/" (which needs no confinement)."""
    real = os.path.realpath(root)
    return None if real == os.sep else real


def escapes(local: str | os.PathLike, root: str | None) -> bool:
    """Whether ``local`` resolves outside ``root`` (a ``real_root``; None: nothing is outside)."""
    if root is None:
        return False
    real = os.path.realpath(local)
    return not (real == root or real.startswith(root.rstrip(os.sep) + os.sep))


def surveyed_root() -> str | None:
    """The root set by the innermost ``confined()``, None outside any."""
    return _ROOT.get()


@contextlib.contextmanager
def confined(root: str | os.PathLike) -> Iterator[None]:
    """While inside, the path-based readers refuse what resolves outside ``root``."""
    token = _ROOT.set(real_root(root))
    try:
        yield
    finally:
        _ROOT.reset(token)
