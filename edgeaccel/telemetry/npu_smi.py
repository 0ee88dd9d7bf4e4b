"""Huawei Ascend NPUs through ``npu-smi info``: temperature and power of each NPU chip.

The Ascend driver exposes no thermal zone or hwmon chip of its own that we know of; its management tool does.
``npu-smi info`` prints one table (the layout below, as npu-smi 22-25 print it for the 310, 310P and 910B):

    | NPU     Name                  | Health          | Power(W)     Temp(C)           Hugepages-Usage(page) |
    | Chip    Device                | Bus-Id          | AICore(%)    Memory-Usage(MB)                        |
    +===============================+=================+======================================================+
    | 0       310                   | OK              | 12.8         61                0     / 969           |
    | 0       0                     | 0000:01:00.0    | 0            577  / 7759                             |

Two rows per chip under two header rows; the columns of each cell are matched by position to the header's (a
"used / total" pair is one column). A figure npu-smi prints as "NA" (the 310P's power on some cards) is a
reading with that reason. npu-smi lives at /usr/local/bin or /usr/local/sbin below the telemetry root; it is
run with a timeout, and its answer kept for a second, since a sampler asks for temperature and power apart.

Sensor specs: ``npusmi:N`` is NPU N's first chip (N as npu-smi numbers it), ``npusmi:N/C`` its chip C.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .reading import Reading, missing

PATHS = ("/usr/local/bin/npu-smi", "/usr/local/sbin/npu-smi")
TIMEOUT_S = 5.0
KEEP_S = 1.0  # one answer serves the temperature and the power of one sample
_PAIR = re.compile(r"\s*/\s*")
_cache: dict[str, tuple[float, list, str | None]] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class NpuChip:
    npu: int
    chip: int
    name: str
    health: str
    temperature: Reading
    power: Reading
    bus_id: str | None = None
    aicore_percent: float | None = None
    memory_used_mb: float | None = None
    memory_total_mb: float | None = None

    @property
    def spec(self) -> str:
        return f"npusmi:{self.npu}" if self.chip == 0 else f"npusmi:{self.npu}/{self.chip}"


def _cells(line: str) -> list[list[str]]:
    """'| a b | c | d  e / f |' -> [['a', 'b'], ['c'], ['d', 'e/f']]"""
    return [_PAIR.sub("/", cell.strip()).split() for cell in line.strip().strip("|").split("|")]


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def parse_info(text: str, source: str = "npu-smi info") -> list[NpuChip]:
    """Every chip in ``npu-smi info``'s table; [] for text without one."""
    lines = [line for line in text.splitlines() if line.strip().startswith("|")]
    header = next((i for i, line in enumerate(lines) if "Health" in line and "Temp(C)" in line), None)
    if header is None or header + 1 >= len(lines):
        return []
    top, bottom = _cells(lines[header]), _cells(lines[header + 1])
    if len(top) != 3 or len(bottom) != 3:
        return []
    rows = []
    for line in lines[header + 2:]:
        cells = _cells(line)
        if any("Process" in " ".join(c) for c in cells):
            break  # the process table that follows
        if len(cells) == 3 and cells[0] and cells[0][0].isdigit():
            rows.append(cells)
    chips = []
    # strict=False: npu-smi's text may end on a chip's first line, or leave a cell empty; the reader takes
    # what pairs up and leaves the rest unknown rather than refusing the whole table
    for first, second in zip(rows[0::2], rows[1::2], strict=False):
        a = {**dict(zip(top[0], first[0], strict=False)), **dict(zip(top[2], first[2], strict=False))}
        b = {**dict(zip(bottom[0], second[0], strict=False)), **dict(zip(bottom[2], second[2], strict=False))}
        npu = int(first[0][0])
        number = int(second[0][0]) if second[0] and second[0][0].isdigit() else 0
        where = f"{source} NPU {npu} chip {number}"
        used, _, total = (b.get("Memory-Usage(MB)") or "").partition("/")
        chips.append(NpuChip(
            npu, number, a.get("Name", "?"), " ".join(first[1]) or "?",
            _reading(where, "temperature", a.get("Temp(C)"), "C"), _reading(where, "power", a.get("Power(W)"), "W"),
            second[1][0] if second[1] else None, _number(b.get("AICore(%)")), _number(used), _number(total)))
    return chips


def _reading(where: str, quantity: str, text: str | None, unit: str) -> Reading:
    value = _number(text)
    if value is not None:
        return Reading(where, quantity, value, unit, path="npu-smi info")
    reason = "npu-smi prints NA (this board does not report it)" if text == "NA" else \
        f"npu-smi printed {text!r}" if text else "npu-smi's table has no such column"
    return missing(where, quantity, unit, reason, "npu-smi info")


def find(root: Path = Path("/")) -> Path | None:
    """npu-smi below ``root`` (the telemetry root: "/" on the device, a fake tree in tests)."""
    for path in PATHS:
        local = Path(root) / path.lstrip("/")
        if local.is_file():
            return local
    return None


def read_chips(root: Path = Path("/")) -> tuple[list[NpuChip], str | None]:
    """(chips, why there are none) from the npu-smi below ``root``; answers are kept KEEP_S seconds."""
    key = str(root)
    now = time.monotonic()
    with _lock:
        kept = _cache.get(key)
        if kept is not None and now - kept[0] < KEEP_S:
            return kept[1], kept[2]
    chips, reason = _run(root)
    with _lock:
        _cache[key] = (time.monotonic(), chips, reason)
    return chips, reason


def _run(root: Path) -> tuple[list[NpuChip], str | None]:
    tool = find(root)
    if tool is None:
        return [], f"npu-smi is not installed ({' or '.join(PATHS)} missing below {root})"
    try:
        done = subprocess.run([str(tool), "info"], capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return [], f"npu-smi info did not answer within {TIMEOUT_S:g} s"
    except OSError as exc:
        return [], f"npu-smi could not be run: {exc.strerror or exc}"
    chips = parse_info(done.stdout)
    if chips:
        return chips, None
    said = (done.stderr or done.stdout).strip().splitlines()
    return [], f"npu-smi info listed no NPU (exit {done.returncode}{': ' + said[-1] if said else ''})"


def chip(root: Path, name: str) -> NpuChip | str:
    """The chip a spec's NAME ("0", "8/1") names, or why there is none."""
    npu, _, which = name.partition("/")
    if not npu.isdigit() or (which and not which.isdigit()):
        return f"npusmi:{name} is not NPU[/CHIP] numbers (npusmi:0, npusmi:8/1)"
    chips, reason = read_chips(root)
    for c in chips:
        if c.npu == int(npu) and c.chip == int(which or 0):
            return c
    return reason or f"npu-smi lists no NPU {name} (it lists {', '.join(c.spec for c in chips)})"
