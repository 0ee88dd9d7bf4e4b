"""A parser for ``tegrastats`` lines across JetPack releases (pure: text in, TegraStats out).

Formats seen in NVIDIA's documentation and in the field:
- JetPack 3/4 (L4T r28-r32: TX1, TX2, Nano, Xavier): rails without units, ``POM_5V_IN 2165/2165`` or
  ``VDD_IN 3219/3219`` (instant/average mW); temperatures ``CPU@31C`` ``PMIC@100C``; no timestamp.
- JetPack 5 (L4T r35, Orin/Xavier): rails with units ``VDD_GPU_SOC 2375mW/2375mW``, ``GR3D_FREQ 0%@[305,305]``,
  a leading ``MM-DD-YYYY HH:MM:SS`` timestamp; an absent sensor reads ``CV0@-256C``.
- JetPack 6 (L4T r36, Orin Nano): lower-case temperatures ``cpu@51C soc2@50.562C tj@51C``, ``NVDEC off``.
Rail power is converted from mW to W here through ``units.to_si``; temperatures stay in C.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .units import plausible_celsius, to_si

_TIME = re.compile(r"^(\d\d-\d\d-\d{4} \d\d:\d\d:\d\d)\s+")
_RAM = re.compile(r"\bRAM (\d+)/(\d+)MB")
_TEMP = re.compile(r"\b([A-Za-z][A-Za-z0-9_]*)@(-?\d+(?:\.\d+)?)C\b")
# NAME instant[mW][/average[mW]], but not RAM/SWAP/IRAM ".../...MB"
_RAIL = re.compile(r"\b([A-Z][A-Z0-9_]*)\s+(\d+)(?:mW)?(?:/(\d+)(?:mW)?)?(?=\s|$)")
_GR3D = re.compile(r"\bGR3D_FREQ (\d+)%")
_CPU = re.compile(r"\bCPU \[([^\]]*)\]")
_NOT_RAILS = {"RAM", "SWAP", "IRAM", "CPU", "EMC_FREQ", "GR3D_FREQ", "GR3D2_FREQ", "APE", "VIC_FREQ", "MTS",
              "NVENC", "NVDEC", "NVJPG", "NVJPG1", "OFA", "VIC", "NVENC1", "NVDEC1", "MSENC", "NVDLA0", "NVDLA1",
              "PVA0_FREQ", "DLA0_CORE", "DLA1_CORE", "SWAP_CACHED"}


@dataclass(frozen=True)
class TegraStats:
    timestamp: str | None = None
    temperatures_c: dict[str, float] = field(default_factory=dict)
    offline_sensors: tuple[str, ...] = ()  # sensors that reported -256C (absent or powered off)
    rails_w: dict[str, float] = field(default_factory=dict)  # instantaneous power per rail
    rails_avg_w: dict[str, float] = field(default_factory=dict)  # tegrastats' running average
    ram_used_mb: int | None = None
    ram_total_mb: int | None = None
    gpu_load_pct: int | None = None
    cpu_load_pct: tuple[int | None, ...] = ()  # per core; None for "off"


def parse_tegrastats(line: str) -> TegraStats:
    text = line.strip()
    timestamp = None
    match = _TIME.match(text)
    if match:
        timestamp, text = match.group(1), text[match.end():]
    temps: dict[str, float] = {}
    offline = []
    for name, value in _TEMP.findall(text):
        celsius = float(value)
        if plausible_celsius(celsius):
            temps[name] = celsius
        else:
            offline.append(name)
    rails, averages = {}, {}
    for name, instant, average in _RAIL.findall(_TEMP.sub(" ", text)):
        if name in _NOT_RAILS or name.endswith("_FREQ"):
            continue
        rails[name] = to_si(int(instant), "milliwatt")[0]
        if average:
            averages[name] = to_si(int(average), "milliwatt")[0]
    ram = _RAM.search(text)
    gr3d = _GR3D.search(text)
    cpu = _CPU.search(text)
    cores: tuple[int | None, ...] = ()
    if cpu:
        cores = tuple(int(c.split("%")[0]) if c.strip() not in ("off", "") and "%" in c else None
                      for c in cpu.group(1).split(","))
    return TegraStats(
        timestamp, temps, tuple(offline), rails, averages,
        int(ram.group(1)) if ram else None, int(ram.group(2)) if ram else None,
        int(gr3d.group(1)) if gr3d else None, cores,
    )
