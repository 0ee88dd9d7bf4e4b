"""NVIDIA Jetson power rails from the on-module INA3221 monitors, in both kernel layouts:

- hwmon (JetPack 5 and later, mainline ``ina3221`` driver): ``/sys/bus/i2c/drivers/ina3221/*/hwmon/hwmon*/``
  with ``inN_label`` (rail name, e.g. VDD_IN), ``inN_input`` bus voltage in mV and ``currN_input`` in mA for
  N = 1..3; power is V x I.
- iio (JetPack 4 and older, NVIDIA's ``ina3221x`` driver): ``/sys/bus/i2c/drivers/ina3221x/*/iio:device*/``
  with ``rail_name_N``, ``in_power{N}_input`` in mW, ``in_current{N}_input`` in mA and ``in_voltage{N}_input``
  in mV for N = 0..2.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .reading import Reading, missing
from .sysfs import children, read_scaled, read_text, under

HWMON_DRIVER = "/sys/bus/i2c/drivers/ina3221"
IIO_DRIVER = "/sys/bus/i2c/drivers/ina3221x"


@dataclass(frozen=True)
class Rail:
    name: str  # "VDD_IN", "POM_5V_GPU", ...
    layout: str  # "hwmon" or "iio"
    power: Reading  # W
    voltage: Reading | None = None  # V
    current: Reading | None = None  # A


def read_rails(root: Path = Path("/")) -> list[Rail]:
    return read_rails_hwmon(root) + read_rails_iio(root)


def read_rails_hwmon(root: Path = Path("/")) -> list[Rail]:
    rails = []
    for chip in children(under(root, HWMON_DRIVER), "*/hwmon/hwmon*"):
        for index in range(1, 4):
            name, _ = read_text(chip / f"in{index}_label")
            if name is None:
                continue  # channel not populated on this module
            label = f"ina3221/{name}"
            volts, v_reason = read_scaled(chip / f"in{index}_input", "millivolt")
            amps, a_reason = read_scaled(chip / f"curr{index}_input", "milliampere")
            voltage = _reading(label, "voltage", volts, "V", v_reason, chip / f"in{index}_input")
            current = _reading(label, "current", amps, "A", a_reason, chip / f"curr{index}_input")
            if volts is not None and amps is not None:
                power = Reading(label, "power", volts * amps, "W", None, str(chip))
            else:
                power = missing(label, "power", "W", v_reason or a_reason or "unknown", str(chip))
            rails.append(Rail(name, "hwmon", power, voltage, current))
    return rails


def read_rails_iio(root: Path = Path("/")) -> list[Rail]:
    rails = []
    for device in children(under(root, IIO_DRIVER), "*/iio:device*"):
        for index in range(3):
            name, _ = read_text(device / f"rail_name_{index}")
            if name is None:
                continue
            label = f"ina3221x/{name}"
            watts, p_reason = read_scaled(device / f"in_power{index}_input", "milliwatt")
            volts, v_reason = read_scaled(device / f"in_voltage{index}_input", "millivolt")
            amps, a_reason = read_scaled(device / f"in_current{index}_input", "milliampere")
            rails.append(Rail(
                name, "iio",
                _reading(label, "power", watts, "W", p_reason, device / f"in_power{index}_input"),
                _reading(label, "voltage", volts, "V", v_reason, device / f"in_voltage{index}_input"),
                _reading(label, "current", amps, "A", a_reason, device / f"in_current{index}_input"),
            ))
    return rails


def _reading(label: str, quantity: str, value: float | None, unit: str, reason: str | None, path: Path) -> Reading:
    if value is None:
        return missing(label, quantity, unit, reason or "unknown", str(path))
    return Reading(label, quantity, value, unit, None, str(path))
