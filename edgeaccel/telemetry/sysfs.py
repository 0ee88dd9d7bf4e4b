"""Reading small sysfs-style files below a root, turning every failure into a reason instead of an exception.

Real sensors fail in many ways: the file is absent (no such sensor), readable by root only (RAPL since Linux
5.10), returns EIO/ENODATA/EAGAIN (an I2C sensor that did not answer), holds bytes that are not text, or text
that is not a number. Each becomes (None, reason).
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import os
import re
from collections.abc import Iterator
from pathlib import Path

from .units import plausible_celsius, to_si

MAX_BYTES = 4096  # sysfs attributes are at most a page; anything longer is not a sensor file


def under(root: Path, absolute: str) -> Path:
    """``absolute`` (e.g. "/sys/class/thermal") placed below ``root``."""
    return Path(root) / absolute.lstrip("/")


def natural_key(path: Path | str) -> tuple:
    """thermal_zone2 before thermal_zone10."""
    name = path.name if isinstance(path, Path) else str(path)
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def children(directory: Path, pattern: str) -> list[Path]:
    """Entries of ``directory`` matching the glob ``pattern``, in natural order; [] if it cannot be listed."""
    try:
        return sorted(directory.glob(pattern), key=natural_key)
    except OSError:
        return []


def is_dir(path: Path) -> bool:
    """Path.is_dir that answers False, not PermissionError, for a folder this user may not enter."""
    try:
        return path.is_dir()
    except OSError:
        return False


def exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:
        return False


_CONFINED: contextvars.ContextVar[str | None] = contextvars.ContextVar("edgeaccel_sysfs_root", default=None)


@contextlib.contextmanager
def confined(root: Path) -> Iterator[None]:
    """Refuse, while inside, to read a file that resolves outside ``root``: a survey of a mounted device
    image must not follow an absolute symlink into this machine's /sys. "/" needs no confinement."""
    real = os.path.realpath(root)
    token = _CONFINED.set(None if real == os.sep else real)
    try:
        yield
    finally:
        _CONFINED.reset(token)


def _outside_root(path: Path) -> str | None:
    root = _CONFINED.get()
    if root is None:
        return None
    real = os.path.realpath(path)
    if real == root or real.startswith(root + os.sep):
        return None
    return f"{path} resolves to {real}, outside the surveyed root {root}"


def read_text(path: Path) -> tuple[str | None, str | None]:
    """(text stripped, None) or (None, reason)."""
    escaped = _outside_root(path)
    if escaped:
        return None, escaped
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return None, f"{path} does not exist"
    except PermissionError:
        return None, f"{path} is not readable by this user (uid {_uid()})"
    except IsADirectoryError:
        return None, f"{path} is a directory, not a sensor file"
    except OSError as exc:
        name = errno.errorcode.get(exc.errno or 0, "error")
        return None, f"reading {path} failed: {name} ({exc.strerror or exc}); the sensor did not answer"
    if len(data) > MAX_BYTES:
        return None, f"{path} holds more than {MAX_BYTES} bytes: not a sensor value"
    try:
        text = data.decode("ascii").strip()
    except UnicodeDecodeError:
        return None, f"{path} holds non-text bytes {data[:16]!r}"
    if not text:
        return None, f"{path} is empty"
    return text, None


def parse_int(text: str, what: str = "value") -> tuple[int | None, str | None]:
    try:
        return int(text.strip(), 10), None
    except ValueError:
        return None, f"{what} is not an integer: {text[:40]!r}"


def read_int(path: Path) -> tuple[int | None, str | None]:
    text, reason = read_text(path)
    if text is None:
        return None, reason
    value, reason = parse_int(text, str(path))
    return value, reason


def parse_celsius(text: str, unit: str = "millidegree_celsius", what: str = "temperature") -> tuple[float | None, str | None]:
    """A temperature file's text as degrees C, or why not (not a number, or a value no real sensor reports)."""
    raw, reason = parse_int(text, what)
    if raw is None:
        return None, reason
    value, _ = to_si(raw, unit)
    if not plausible_celsius(value):
        return None, f"{what} {value:g} C is outside any real sensor's range: the sensor is absent or broken"
    return value, None


def read_celsius(path: Path, unit: str = "millidegree_celsius") -> tuple[float | None, str | None]:
    text, reason = read_text(path)
    if text is None:
        return None, reason
    return parse_celsius(text, unit, str(path))


def read_scaled(path: Path, unit: str) -> tuple[float | None, str | None]:
    """An integer file in a raw unit as (SI value, None) or (None, reason). Negative power/energy is garbage."""
    raw, reason = read_int(path)
    if raw is None:
        return None, reason
    if raw < 0 and unit not in ("millidegree_celsius", "degree_celsius"):
        return None, f"{path} holds a negative {unit} value {raw}"
    return to_si(raw, unit)[0], None


def readable(path: Path) -> tuple[bool, str | None]:
    """Can this user read ``path``? Tried for real: os.access lies for root and for sysfs attributes."""
    text, reason = read_text(path)
    return text is not None, reason


def _uid() -> int | str:
    try:
        return os.getuid()
    except AttributeError:  # not POSIX
        return "?"
