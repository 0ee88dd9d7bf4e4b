"""Device references, parsed once: ``CPU``, ``CUDA:1``, ``TensorRT:0``, ``GPU.0``, ``EdgeTPU:usb:0``, ``Hailo8``.

The base is the device name an executor declares (``device_kinds`` keys, profile device names); ``index``
picks one of several (``CUDA:1``, OpenVINO's ``GPU.1``); ``bus`` narrows an Edge TPU to USB or PCIe. The text
is kept as written, because it is what the runtime is handed (OpenVINO takes ``GPU.1``, not ``GPU:1``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

BUSES = ("usb", "pci")
_FORM = re.compile(r"^(?P<base>[A-Za-z][A-Za-z0-9_+-]*)(?:(?P<sep>[:.])(?P<rest>.*))?$")


@dataclass(frozen=True)
class DeviceRef:
    base: str
    index: int | None = None
    bus: str | None = None
    text: str = ""

    @classmethod
    def parse(cls, device: str | DeviceRef) -> DeviceRef:
        """``ValueError`` naming the accepted forms when ``device`` is none of them."""
        if isinstance(device, DeviceRef):
            return device
        m = _FORM.match(device.strip()) if isinstance(device, str) else None
        if m is None:
            raise ValueError(f"{device!r} is not a device name; use a name such as CPU, CUDA:0, GPU.1 or "
                             "EdgeTPU:usb:0")
        rest = m.group("rest")
        parts = [] if rest is None else (rest.split(":") if m.group("sep") == ":" else [rest])
        bus = parts.pop(0) if parts and parts[0] in BUSES else None
        if len(parts) > 1 or (parts and not parts[0].isdigit()):
            raise ValueError(f"{device!r}: after {m.group('base')} comes an index (:0, .1)"
                             + (" or a bus (:usb, :pci, :usb:0)" if m.group("base") == "EdgeTPU" else ""))
        return cls(m.group("base"), int(parts[0]) if parts else None, bus, device.strip())

    def __str__(self) -> str:
        return self.text or self.base


_BASE = re.compile(r"^[A-Za-z][A-Za-z0-9_+-]*")


def base_of(device: str) -> str:
    """The declared device name of a device string, read leniently so that an executor can say what is wrong
    with the rest ("EdgeTPU:usb:first" -> "EdgeTPU"); never raises."""
    m = _BASE.match(device.strip()) if isinstance(device, str) else None
    return m.group(0) if m else str(device)


def same_base(a: str, b: str) -> bool:
    """Whether two device strings name the same declared device, without regard to case."""
    return base_of(a).lower() == base_of(b).lower()
