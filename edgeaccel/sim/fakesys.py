"""The simulator's name for the one fake device-file writer, ``edgeaccel.devfs.fake.DeviceFiles``.

``FakeSysfs(root, atomic=True)`` is that writer (temperatures in degrees Celsius, written in the kernel's
millidegrees); kept so that code written against ``edgeaccel.sim.fakesys`` keeps working.
"""

from __future__ import annotations

from ..devfs.fake import APEX, HWMON, POWERCAP, THERMAL, DeviceFiles, apex_millis, millidegrees

FakeSysfs = DeviceFiles
millis = millidegrees

__all__ = ["APEX", "HWMON", "POWERCAP", "THERMAL", "FakeSysfs", "apex_millis", "millis"]
