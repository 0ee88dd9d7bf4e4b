"""``FakeTree``: the name ``edgeaccel.testing`` gave the fake device-tree writer before there was one writer.

It is ``edgeaccel.devfs.fake.DeviceFiles`` with the two methods whose arguments were millidegrees kept as they
were, so that tests written against it write the same files: ``thermal_zone(index, zone_type, temp_mc,
trips)`` (trips as (type, millidegrees), none by default) and ``rapl(zone, label, energy_uj, mode=0o400)``.
New code: ``DeviceFiles``, whose temperatures are degrees Celsius.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..devfs.fake import DeviceFiles


class FakeTree(DeviceFiles):
    """``DeviceFiles`` with the millidegree ``thermal_zone`` and the ``rapl`` of the probe's first fake trees."""

    def thermal_zone(self, index: int, zone_type: str, temp_mc: float,  # type: ignore[override]
                     trips: Iterable[tuple[str, float]] = ()) -> FakeTree:
        """thermal_zoneN with millidegree ``temp_mc`` and trips as (type, millidegrees)."""
        super().thermal_zone(index, zone_type, temp_mc / 1000,
                             [(kind, temp / 1000) for kind, temp in trips])
        return self

    def rapl(self, zone: str, label: str, energy_uj: int, mode: int = 0o400) -> FakeTree:
        """A powercap RAPL zone; energy_uj is 0400 (root only) since Linux 5.10."""
        self.rapl_zone(zone, label, energy_uj, mode=mode)
        return self
