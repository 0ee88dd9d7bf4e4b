"""DeviceFacts read cheaply from /proc, without the probe: CPU model, ISA flags, device-tree board and
compatible strings. Accelerators are not looked for here (that is the probe's job), so ``devices`` is
{"CPU"}: a profile that requires a device never matches from these facts alone.

Reading takes ``root`` (tests build a fake tree under tmp_path); parsing is pure.
"""

from __future__ import annotations

import platform
from pathlib import Path

from .match import DeviceFacts

_MODEL_KEYS = ("model name", "cpu model", "processor")  # x86, some MIPS/Power, old Arm kernels
_FLAG_KEYS = ("flags", "features")  # x86 "flags", Arm "Features"


def parse_cpuinfo(text: str) -> tuple[str, frozenset[str], str]:
    """(CPU model, ISA flags, board) from /proc/cpuinfo. The board comes from the "Model" line that
    Raspberry Pi kernels print ("Raspberry Pi 5 Model B Rev 1.0"); empty elsewhere."""
    model, flags, board = "", frozenset(), ""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip().lower(), value.strip()
        if key in _MODEL_KEYS and not model and value and not value.isdigit():  # "processor : 0" on x86
            model = value
        elif key in _FLAG_KEYS and not flags:
            flags = frozenset(value.lower().split())
        elif key == "model" and not board and not value.isdigit():  # x86 "model : 49" is a number
            board = value
    return model, flags, board


def parse_device_tree_strings(raw: bytes) -> tuple[str, ...]:
    """Device-tree string properties are NUL-separated and NUL-terminated."""
    return tuple(s for s in raw.decode("utf-8", "replace").split("\0") if s.strip())


def local_facts(root: Path = Path("/"), arch: str | None = None) -> DeviceFacts:
    """Facts about this machine from /proc. Never raises: what cannot be read is left empty."""
    model, flags, board = parse_cpuinfo(_read_text(root / "proc/cpuinfo"))
    dt_model = parse_device_tree_strings(_read_bytes(root / "proc/device-tree/model"))
    compatible = parse_device_tree_strings(_read_bytes(root / "proc/device-tree/compatible"))
    if arch is None:
        arch = platform.machine() if root == Path("/") else _read_text(root / "proc/sys/kernel/arch").strip()
    return DeviceFacts(arch=arch, cpu_model=model, cpu_flags=flags, board=dt_model[0] if dt_model else board,
                       compatible=compatible)


def _read_text(path: Path) -> str:
    return _read_bytes(path).decode("utf-8", "replace")


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:  # absent on x86 (no device tree), unreadable in some containers
        return b""
