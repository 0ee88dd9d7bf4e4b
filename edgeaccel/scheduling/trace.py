"""The decision trace: every policy decision with the readings it was made from, writable as CSV.

Figures from a simulated run carry ``simulated_`` in every column name that holds a figure, so a CSV taken out
of context still says what it is.
"""

from __future__ import annotations

import csv
import io
import os
from collections import deque
from collections.abc import Iterable

from .decision import DecisionRecord

_DEVICE_FIELDS = ("temp_c", "passive_c", "critical_c", "power_w", "busy", "status", "headroom", "throttled")


class Trace:
    def __init__(self, limit: int = 200_000, simulated: bool = False) -> None:
        self.records: deque[DecisionRecord] = deque(maxlen=limit)
        self.simulated = simulated
        self.dropped = 0

    def append(self, record: DecisionRecord) -> None:
        if len(self.records) == self.records.maxlen:
            self.dropped += 1
        self.records.append(record)

    def snapshot(self) -> Trace:
        """A copy that later decisions do not change (safe to iterate while the scheduler runs)."""
        copy = Trace(self.records.maxlen or 0, self.simulated)
        copy.records.extend(list(self.records))
        copy.dropped = self.dropped
        return copy

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self):
        return iter(self.records)

    def columns(self) -> list[str]:
        devices = sorted({d for r in self.records for d in r.devices} | {d for r in self.records for d in r.duty})
        executors = sorted({e for r in self.records for e in r.enabled})
        figure = "simulated_" if self.simulated else ""
        cols = [f"{figure}time_s", "policy", "action", "reason"]
        for d in devices:
            cols += [f"{figure}{d}_{f}" for f in _DEVICE_FIELDS] + [f"{figure}{d}_duty"]
        for e in executors:
            cols += [f"{e}_enabled", f"{figure}{e}_concurrency"]
        return cols

    def rows(self) -> Iterable[dict]:
        figure = "simulated_" if self.simulated else ""
        for r in self.records:
            row = {f"{figure}time_s": f"{r.time:.3f}", "policy": r.policy, "action": r.action, "reason": r.reason}
            for name, view in r.devices.items():
                for f in _DEVICE_FIELDS:
                    value = getattr(view, f)
                    row[f"{figure}{name}_{f}"] = "" if value is None else (f"{value:.3f}" if isinstance(value, float)
                                                                         else value)
            for name, duty in r.duty.items():
                row[f"{figure}{name}_duty"] = f"{duty:.3f}"
            for name, on in r.enabled.items():
                row[f"{name}_enabled"] = int(on)
                row[f"{figure}{name}_concurrency"] = r.concurrency.get(name, "")
            yield row

    def to_csv(self, path: str | os.PathLike | None = None) -> str:
        """Write the trace as CSV to ``path`` (and return the text when no path is given)."""
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=self.columns(), extrasaction="ignore")
        writer.writeheader()
        for row in self.rows():
            writer.writerow(row)
        text = buffer.getvalue()
        if path is not None:
            with open(path, "w", encoding="utf-8", newline="") as handle:
                handle.write(text)
        return text
