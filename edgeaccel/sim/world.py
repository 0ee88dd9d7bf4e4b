"""A simulated machine: devices with heat models whose state is written to a fake sysfs tree below ``root``,
so the real telemetry readers read it. ``sync(t)`` advances every device to ``t`` and rewrites the files.

Layouts: "cpu" writes thermal_zoneN (x86_pkg_temp, passive and critical trips, 1 C resolution), the bound
cooling_deviceN (its cur_state is the simulated kernel's throttle level) and a RAPL package zone whose
``energy_uj`` wraps at ``energy_range_j``; "apex" writes /sys/class/apex/apex_N as the gasket driver does;
"hwmon" writes a hwmon chip with temp1_input/max/crit, power1_input and energy1_input.
"""

from __future__ import annotations

from pathlib import Path

from ..telemetry.sensors import SensorSpec
from .fakesys import FakeSysfs
from .heat import DeviceParams, HeatModel

DEFAULT_RAPL_RANGE_J = 262143.328850  # a common max_energy_range_uj on Intel parts


class SimWorld:
    def __init__(self, devices: list[DeviceParams], root: Path | str, seed: int = 0, t0: float = 0.0,
                 atomic: bool = True) -> None:
        names = [d.name for d in devices]
        if len(set(names)) != len(names):
            raise ValueError(f"simulated device names must be unique: {names}")
        self.fs = FakeSysfs(root, atomic)
        self.root = Path(root)
        self.models = {d.name: HeatModel(d, seed * 1000 + i, t0=t0) for i, d in enumerate(devices)}
        self.index = {d.name: i for i, d in enumerate(devices)}
        for name, model in self.models.items():
            self._write_static(name, model)
        self.sync(t0)

    def spec(self, name: str) -> SensorSpec:
        """Where the real readers find this device's sensors."""
        p, i = self.models[name].p, self.index[name]
        if p.layout == "cpu":
            return SensorSpec(temperature=f"thermal:thermal_zone{i}", energy=f"rapl:package-{i}",
                              throttle=f"thermal:thermal_zone{i}")
        if p.layout == "apex":
            return SensorSpec(temperature=f"apex:apex_{i}", throttle=f"apex:apex_{i}",
                              notes=("the Edge TPU has no power or energy sensor",))
        return SensorSpec(temperature=f"hwmon:simaccel{i}/temp1", energy=f"hwmon:simaccel{i}/energy1",
                          power=f"hwmon:simaccel{i}/power1")

    def specs(self) -> dict[str, SensorSpec]:
        return {name: self.spec(name) for name in self.models}

    def _write_static(self, name: str, model: HeatModel) -> None:
        p, i = model.p, self.index[name]
        if p.layout == "cpu":
            self.fs.cooling_device(i, "Processor", 0, p.governor_steps)
            self.fs.thermal_zone(i, "x86_pkg_temp", model.temp_c,
                                 trips=(("passive", p.passive_c, p.hysteresis_c), ("critical", p.critical_c)),
                                 cooling=(i,))
            self.fs.rapl_zone(f"intel-rapl:{i}", f"package-{i}", 0, int((p.energy_range_j or DEFAULT_RAPL_RANGE_J) * 1e6))
        elif p.layout == "apex":
            self.fs.apex(i, model.temp_c, (p.passive_c, p.passive_c + 5, p.passive_c + 10),
                         (p.critical_c - 10, p.critical_c), (0, 1))
        else:
            self.fs.hwmon(i, f"simaccel{i}", {"temp1_label": "edge", "temp1_max": int(p.passive_c * 1000),
                                              "temp1_crit": int(p.critical_c * 1000), "temp1_input": 0,
                                              "power1_input": 0, "energy1_input": 0})

    def sync(self, t: float) -> None:
        for name, model in self.models.items():
            model.advance(t)
            self._write_dynamic(name, model)

    def _write_dynamic(self, name: str, model: HeatModel) -> None:
        p, i = model.p, self.index[name]
        sensed = model.sensed_c()
        if p.layout == "cpu":
            self.fs.zone_temp(i, sensed)
            self.fs.write(f"sys/class/thermal/cooling_device{i}/cur_state", model.level)
            range_uj = int((p.energy_range_j or DEFAULT_RAPL_RANGE_J) * 1e6)
            self.fs.rapl_energy(f"intel-rapl:{i}", int(model.energy_j * 1e6) % range_uj)
        elif p.layout == "apex":
            self.fs.apex_temp(i, sensed)
        else:
            base = f"sys/class/hwmon/hwmon{i}"
            self.fs.write(f"{base}/temp1_input", int(round(sensed * 1000)))
            self.fs.write(f"{base}/power1_input", int(model.last_power_w * 1e6))
            self.fs.write(f"{base}/energy1_input", int(model.energy_j * 1e6))
