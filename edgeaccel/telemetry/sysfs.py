"""Reading small sysfs-style files below a root, turning every failure into a reason instead of an exception.

Real sensors fail in many ways: the file is absent (no such sensor), readable by root only (RAPL since Linux
5.10), returns EIO/ENODATA/EAGAIN (an I2C sensor that did not answer), holds bytes that are not text, or text
that is not a number. Each becomes (None, reason). Reading, the escape rule and the words for a file that cannot
be read are ``edgeaccel.devfs``'s; this module adds what makes a file a sensor value.
"""

from __future__ import annotations

from pathlib import Path

from ..devfs import children, confined, exists, is_dir, natural_key, read_bytes, under
from .units import plausible_celsius, to_si

__all__ = ["children", "confined", "exists", "is_dir", "natural_key", "parse_celsius", "parse_int", "read_celsius",
           "read_int", "read_scaled", "read_text", "readable", "under"]

MAX_BYTES = 4096  # sysfs attributes are at most a page; anything longer is not a sensor file


def read_text(path: Path) -> tuple[str | None, str | None]:
    """(text stripped, None) or (None, reason), below the root of ``devfs.confined()``."""
    data, why = read_bytes(path, MAX_BYTES + 1)
    if data is None:
        return None, f"{path} {why}"
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
