"""Every unit conversion of telemetry, in one place.

Sensors report in the units their ABI fixes: sysfs thermal and hwmon temperatures in millidegrees Celsius,
hwmon power in microwatts and energy in microjoules, RAPL energy in microjoules, the INA3221 in millivolts,
milliamperes and (iio layout) milliwatts, NVML in milliwatts and millijoules, tegrastats in milliwatts.
Readers name the unit they read; ``to_si`` turns it into the one unit the rest of edgeaccel uses:
degrees Celsius (C), watts (W), joules (J), hertz (Hz), volts (V), amperes (A); fans in revolutions per minute.
"""

from __future__ import annotations

# raw unit -> (unit edgeaccel uses, factor)
_SCALE: dict[str, tuple[str, float]] = {
    "millidegree_celsius": ("C", 1e-3),
    "degree_celsius": ("C", 1.0),
    "microwatt": ("W", 1e-6),
    "milliwatt": ("W", 1e-3),
    "watt": ("W", 1.0),
    "microjoule": ("J", 1e-6),
    "millijoule": ("J", 1e-3),
    "joule": ("J", 1.0),
    "millivolt": ("V", 1e-3),
    "milliampere": ("A", 1e-3),
    "hertz": ("Hz", 1.0),
    "kilohertz": ("Hz", 1e3),
    "megahertz": ("Hz", 1e6),
    "rpm": ("rpm", 1.0),
}

# Temperatures outside this range are a broken or absent sensor, not a device state: drivers report
# -273 / -256 (Jetson "offline"), 0x7fffffff or 255 C for "no reading".
PLAUSIBLE_C = (-60.0, 200.0)


def to_si(value: float, unit: str) -> tuple[float, str]:
    """``value`` in the raw ``unit`` as (value, unit) in C, W, J, Hz, V or A."""
    try:
        si_unit, factor = _SCALE[unit]
    except KeyError:
        raise ValueError(f"unknown telemetry unit {unit!r}; known: {', '.join(sorted(_SCALE))}") from None
    # A sub-unit is divided out, not multiplied by its factor: 43050 / 1000 is 43.05 where 43050 * 1e-3 is
    # 43.050000000000004, and these figures are printed and compared.
    return (value / round(1 / factor) if factor < 1 else value * factor), si_unit


def plausible_celsius(value: float) -> bool:
    return PLAUSIBLE_C[0] <= value <= PLAUSIBLE_C[1]
