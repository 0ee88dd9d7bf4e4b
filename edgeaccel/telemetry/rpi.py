"""Raspberry Pi throttling flags, from the firmware driver's ``get_throttled`` sysfs file (hex without 0x,
e.g. ``50005``) or from ``vcgencmd get_throttled`` output (``throttled=0x50005``).

Bits (Raspberry Pi documentation, "get_throttled"): 0 under-voltage detected, 1 ARM frequency capped,
2 currently throttled, 3 soft temperature limit active; 16-19 the same conditions "has occurred since boot".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .sysfs import children, read_text, under

BITS = {
    0: "under-voltage detected",
    1: "arm frequency capped",
    2: "currently throttled",
    3: "soft temperature limit active",
    16: "under-voltage has occurred",
    17: "arm frequency capping has occurred",
    18: "throttling has occurred",
    19: "soft temperature limit has occurred",
}
_NOW_MASK = 0xF

# The firmware node's name changed across boards and kernels (soc:firmware on Pi 4, soc@107c000000:firmware on Pi 5).
GET_THROTTLED_GLOBS = ("sys/devices/platform/soc/soc:firmware/get_throttled",
                       "sys/devices/platform/soc*/*firmware/get_throttled")


@dataclass(frozen=True)
class ThrottleFlags:
    raw: int | None
    reason: str | None = None  # why raw is None
    path: str | None = None

    @property
    def active(self) -> list[str]:
        return [] if self.raw is None else [text for bit, text in BITS.items() if self.raw >> bit & 1]

    @property
    def throttled_now(self) -> bool | None:
        return None if self.raw is None else bool(self.raw & _NOW_MASK & 0b1110)

    @property
    def under_voltage_now(self) -> bool | None:
        return None if self.raw is None else bool(self.raw & 1)

    @property
    def soft_temp_limit_now(self) -> bool | None:
        return None if self.raw is None else bool(self.raw & 0b1000)


def parse_throttled(text: str) -> ThrottleFlags:
    """``throttled=0x50005``, ``0x50005`` or the sysfs ``50005`` (always hex)."""
    value = text.strip()
    if value.startswith("throttled="):
        value = value[len("throttled="):]
    if value.lower().startswith("0x"):
        value = value[2:]
    try:
        raw = int(value, 16)
    except ValueError:
        return ThrottleFlags(None, f"not a get_throttled value: {text[:40]!r}")
    if raw < 0 or raw >> 20:
        return ThrottleFlags(None, f"get_throttled value {text.strip()!r} has bits no firmware sets")
    return ThrottleFlags(raw)


def find_get_throttled(root: Path = Path("/")) -> Path | None:
    for pattern in GET_THROTTLED_GLOBS:
        found = children(Path(root), pattern)
        if found:
            return found[0]
    return None


def read_throttled(root: Path = Path("/")) -> ThrottleFlags:
    path = find_get_throttled(root)
    if path is None:
        return ThrottleFlags(None, f"no get_throttled file below {under(root, 'sys/devices/platform')} "
                                   "(not a Raspberry Pi, or its firmware driver is not loaded)")
    text, reason = read_text(path)
    if text is None:
        return ThrottleFlags(None, reason, str(path))
    flags = parse_throttled(text)
    return ThrottleFlags(flags.raw, flags.reason, str(path))
