"""Fake device trees: the one writer of the files that the probe and the telemetry readers read.

``DeviceFiles(root)`` writes sysfs, procfs, /dev and /etc below ``root`` in the layouts the kernel's drivers
document (the board fixtures of ``edgeaccel.testing`` and the simulator's devices are built with it).

One unit convention: a temperature argument is in degrees Celsius (``temp_c``, ``trips`` in C) and is written
in the kernel's millidegrees; every other argument is what the file holds, in the unit its name says
(``energy_uj``, ``max_range_uj``) or, for a chip's attribute dictionary (``hwmon``), the raw file values. A
temperature no sensor reports (a millidegree value passed as degrees, say) is refused, not written.

Where the layouts come from: the kernel's Documentation/ABI/testing/sysfs-bus-pci and sysfs-bus-usb,
Documentation/driver-api/thermal/sysfs-api.rst, Documentation/hwmon/sysfs-interface.rst and hwmon/ina3221.rst,
Documentation/power/powercap/powercap.rst; the Coral apex driver (github.com/google/gasket-driver
src/apex_driver.c); the Jetson INA3221 iio layout of L4T's ina3221x driver; the Raspberry Pi firmware's
get_throttled attribute.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from .writer import FileWriter

THERMAL = "/sys/class/thermal"
HWMON = "/sys/class/hwmon"
POWERCAP = "/sys/class/powercap"
APEX = "/sys/class/apex"

# Colder than absolute zero or hotter than this is no sensor's reading: a caller passing millidegrees as degrees.
HOTTEST_C = 1000.0


def millidegrees(temp_c: float, what: str = "temp_c") -> int:
    """Degrees Celsius as the kernel's millidegree integer; a value no sensor reads is a ValueError."""
    if not -273.15 <= temp_c <= HOTTEST_C:
        raise ValueError(f"{what}={temp_c!r} is not a temperature in degrees Celsius (DeviceFiles takes degrees C "
                         f"and writes millidegrees): pass {temp_c / 1000:g} for {temp_c!r} millidegrees")
    return int(round(temp_c * 1000))


def apex_millis(temp_c: float) -> int:
    """What the apex driver prints: its ADC has 0.25 C steps, ``(662 - adc) * 250 + 550`` millidegrees."""
    adc = round((550 - millidegrees(temp_c)) / 250 + 662)
    return (662 - adc) * 250 + 550


class DeviceFiles(FileWriter):
    """A fake device tree below ``root``; every layout method returns something to chain or the folder made."""

    # --- the machine: users, OS, CPU, memory, buses ---------------------------------------------------

    def groups(self, **gids: int) -> DeviceFiles:
        """/etc/group with ``name=gid`` entries (group(5): name:password:gid:members)."""
        self.file("/etc/group", "root:x:0:\n" + "".join(f"{name}:x:{gid}:\n" for name, gid in gids.items()))
        return self

    def device_group(self, name: str) -> DeviceFiles:
        """Name the group the test's files belong to as ``name`` (plugdev, render, video...)."""
        if os.getegid() != 0:
            return self.groups(**{name: os.getegid()})
        self.file("/etc/group", f"{name}:x:0:\n")
        return self

    def os_release(self, pretty_name: str, kernel: str, arch: str) -> DeviceFiles:
        self.file("/etc/os-release", f'PRETTY_NAME="{pretty_name}"\nNAME="{pretty_name.split()[0]}"\n')
        self.file("/proc/sys/kernel/osrelease", kernel + "\n").file("/proc/sys/kernel/arch", arch + "\n")
        return self

    def meminfo(self, total_kb: int, available_kb: int) -> DeviceFiles:
        self.file("/proc/meminfo", f"MemTotal:       {total_kb} kB\nMemFree:        {available_kb // 2} kB\n"
                                   f"MemAvailable:   {available_kb} kB\nBuffers:          123456 kB\n")
        return self

    def cpus_online(self, count: int) -> DeviceFiles:
        self.file("/sys/devices/system/cpu/online", f"0-{count - 1}\n")
        return self

    def device_tree(self, model: str, compatible: Sequence[str]) -> DeviceFiles:
        """/proc/device-tree is a symlink to /sys/firmware/devicetree/base; strings end in NUL."""
        base = "/sys/firmware/devicetree/base"
        self.file(f"{base}/model", model.encode() + b"\x00")
        self.file(f"{base}/compatible", b"".join(c.encode() + b"\x00" for c in compatible))
        self.symlink("/proc/device-tree", base)
        return self

    def dmi(self, vendor: str, product: str) -> DeviceFiles:
        self.file("/sys/class/dmi/id/sys_vendor", vendor + "\n").file("/sys/class/dmi/id/product_name", product + "\n")
        return self

    def pci_device(self, address: str, vendor: int, device: int, pci_class: int, driver: str | None = None,
                   subsystem_device: int | None = None) -> str:
        """A PCI function under /sys/devices/pci0000:00 with its /sys/bus/pci/devices link and ``driver``
        link (sysfs-bus-pci); returns its /sys/devices path."""
        path = f"/sys/devices/pci0000:00/{address}"
        self.file(f"{path}/vendor", f"{vendor:#06x}\n").file(f"{path}/device", f"{device:#06x}\n")
        self.file(f"{path}/class", f"{pci_class:#08x}\n")
        if subsystem_device is not None:
            self.file(f"{path}/subsystem_device", f"{subsystem_device:#06x}\n")
        if driver:
            self.dir(f"/sys/bus/pci/drivers/{driver}").symlink(f"{path}/driver", f"/sys/bus/pci/drivers/{driver}")
        self.symlink(f"/sys/bus/pci/devices/{address}", path)
        return path

    def platform_device(self, name: str, driver: str | None = None) -> str:
        path = f"/sys/devices/platform/{name}"
        self.dir(path)
        if driver:
            bound = f"/sys/bus/platform/drivers/{driver}"
            self.dir(bound).symlink(f"{path}/driver", bound)
        return path

    def class_device(self, cls: str, name: str, parent: str) -> DeviceFiles:
        """/sys/class/<cls>/<name> linking to <parent>/<cls>/<name>, whose ``device`` links to ``parent``."""
        path = f"{parent}/{cls}/{name}"
        self.dir(path).symlink(f"{path}/device", parent)
        self.symlink(f"/sys/class/{cls}/{name}", path)
        return self

    def usb_device(self, port: str, vendor: str, product: str, speed: str, busnum: int, devnum: int,
                   manufacturer: str = "", product_name: str = "") -> DeviceFiles:
        """A USB device (sysfs-bus-usb): ids as 4 hex digits, speed in Mb/s."""
        path = f"/sys/devices/platform/usb{busnum}/{port}"
        for name, value in (("idVendor", vendor), ("idProduct", product), ("speed", speed), ("busnum", str(busnum)),
                            ("devnum", str(devnum)), ("manufacturer", manufacturer), ("product", product_name)):
            if value:
                self.file(f"{path}/{name}", value + "\n")
        self.symlink(f"/sys/bus/usb/devices/{port}", path)
        return self

    # --- sensors: thermal, hwmon, powercap, accelerators ---------------------------------------------

    def thermal_zone(self, index: int, kind: str, temp_c: float,
                     trips: Iterable[tuple[str, float] | tuple[str, float, float]] = (("passive", 85.0),
                                                                                    ("critical", 100.0)),
                     cooling: Iterable[int] = (), policy: str = "step_wise") -> DeviceFiles:
        """thermal_zoneN (thermal sysfs-api): ``type``, ``temp``, ``mode``, ``policy``, and per trip
        (type, C[, hysteresis C]) trip_point_K_{type,temp,hyst}; ``cooling`` links cdevK to cooling_deviceN."""
        base = f"{THERMAL}/thermal_zone{index}"
        temp = millidegrees(temp_c)  # every value checked before any file is written
        points = [(trip[0], millidegrees(trip[1], "trip temperature"),
                   millidegrees(trip[2], "hysteresis") if len(trip) > 2 else 0) for trip in trips]
        self.write(f"{base}/type", kind)
        self.write(f"{base}/temp", temp)
        self.write(f"{base}/mode", "enabled")
        self.write(f"{base}/policy", policy)
        for k, (trip_type, trip_temp, hyst) in enumerate(points):
            self.write(f"{base}/trip_point_{k}_type", trip_type)
            self.write(f"{base}/trip_point_{k}_temp", trip_temp)
            self.write(f"{base}/trip_point_{k}_hyst", hyst)
        for k, device in enumerate(cooling):
            # the kernel links to /sys/devices/virtual/thermal/cooling_deviceN; readers use only the name
            self.symlink(f"{base}/cdev{k}", f"{THERMAL}/cooling_device{device}")
            self.write(f"{base}/cdev{k}_trip_point", 0)
        return self

    def zone_temp(self, index: int, temp_c: float) -> None:
        self.write(f"{THERMAL}/thermal_zone{index}/temp", millidegrees(temp_c))

    def cooling_device(self, index: int, kind: str, cur_state: int, max_state: int) -> Path:
        base = f"{THERMAL}/cooling_device{index}"
        self.write(f"{base}/type", kind)
        self.write(f"{base}/cur_state", cur_state)
        self.write(f"{base}/max_state", max_state)
        return self.path(base)

    def hwmon(self, index: int, name: str, files: dict[str, object], at: str = HWMON) -> DeviceFiles:
        """hwmonN in the folder ``at``: its ``name`` and raw attribute files, e.g. {"temp1_input": 45000}."""
        base = f"{at}/hwmon{index}"
        self.write(f"{base}/name", name)
        for file, value in files.items():
            self.write(f"{base}/{file}", value)
        return self

    def i2c_hwmon(self, index: int, device: str, driver: str, files: dict[str, object]) -> DeviceFiles:
        """An I2C sensor's hwmon device below its I2C ``device`` (sysfs path), reached as the kernel links it:
        from /sys/class/hwmon/hwmonN and from its driver's folder /sys/bus/i2c/drivers/<driver>/<bus-addr>."""
        self.hwmon(index, driver, files, at=f"{device}/hwmon")
        self.symlink(f"{HWMON}/hwmon{index}", f"{device}/hwmon/hwmon{index}")
        self.symlink(f"/sys/bus/i2c/drivers/{driver}/{device.rsplit('/', 1)[1]}", device)
        return self

    def rapl_zone(self, zone: str = "intel-rapl:0", name: str = "package-0", energy_uj: int = 0,
                  max_range_uj: int = 262143328850, mode: int | None = None) -> Path:
        """A powercap RAPL zone; since Linux 5.10 the kernel makes ``energy_uj`` 0400 (root only): ``mode=0o400``."""
        base = f"{POWERCAP}/{zone}"
        self.write(f"{base}/name", name)
        self.write(f"{base}/max_energy_range_uj", max_range_uj)
        self.write(f"{base}/enabled", 1)
        self.file(f"{base}/energy_uj", f"{energy_uj}\n", mode)
        return self.path(base)

    def rapl_energy(self, zone: str, energy_uj: int) -> None:
        self.write(f"{POWERCAP}/{zone}/energy_uj", energy_uj)

    def apex(self, index: int, temp_c: float, trips_c: tuple[float, float, float] = (85.0, 90.0, 95.0),
             warn_c: tuple[float, float] = (100.0, 110.0), warn_enabled: tuple[int, int] = (0, 0),
             poll_ms: int = 5000) -> Path:
        """A Coral PCIe Edge TPU's /sys/class/apex/apex_N attributes (apex_driver.c), temperatures in the
        driver's 0.25 C steps."""
        base = f"{APEX}/apex_{index}"
        self.write(f"{base}/temp", apex_millis(temp_c))
        for k, trip in enumerate(trips_c):
            self.write(f"{base}/trip_point{k}_temp", apex_millis(trip))
        for k, (warn, enabled) in enumerate(zip(warn_c, warn_enabled, strict=True), start=1):
            self.write(f"{base}/hw_temp_warn{k}", apex_millis(warn))
            self.write(f"{base}/hw_temp_warn{k}_en", enabled)
        self.write(f"{base}/temp_poll_interval", poll_ms)
        return self.path(base)

    def apex_temp(self, index: int, temp_c: float) -> None:
        self.write(f"{APEX}/apex_{index}/temp", apex_millis(temp_c))

    def ina3221_hwmon(self, rails: Iterable[tuple[str, float, float]], bus: str = "1-0040",
                      hwmon: str = "hwmon3") -> Path:
        """A Jetson INA3221 as hwmon; rails: (label, millivolts, milliamperes) for channels 1..3."""
        base = f"/sys/bus/i2c/drivers/ina3221/{bus}/hwmon/{hwmon}"
        self.write(f"{base}/name", "ina3221")
        for k, (label, mv, ma) in enumerate(rails, start=1):
            self.write(f"{base}/in{k}_label", label)
            self.write(f"{base}/in{k}_input", int(mv))
            self.write(f"{base}/curr{k}_input", int(ma))
        return self.path(base)

    def ina3221_iio(self, rails: Iterable[tuple[str, float, float, float]], bus: str = "6-0040",
                    device: str = "iio:device0") -> Path:
        """A Jetson INA3221 as iio (older L4T); rails: (name, milliwatts, milliamperes, millivolts), channels 0..2."""
        base = f"/sys/bus/i2c/drivers/ina3221x/{bus}/{device}"
        for k, (name, mw, ma, mv) in enumerate(rails):
            self.write(f"{base}/rail_name_{k}", name)
            self.write(f"{base}/in_power{k}_input", int(mw))
            self.write(f"{base}/in_current{k}_input", int(ma))
            self.write(f"{base}/in_voltage{k}_input", int(mv))
        return self.path(base)

    def rpi_throttled(self, value: int) -> Path:
        """The Raspberry Pi firmware's throttle flags, in hex as the firmware prints them."""
        return self.write("/sys/devices/platform/soc/soc:firmware/get_throttled", f"{value:x}")
