"""A cascade on live frames from one or more sources, every stage of every source scheduled together.

Threads: a reader per source (its bounded ``DropQueue``, the only place a whole frame is dropped); an admit
step that takes the sources' frames in turn (round robin: a busy source cannot starve another) and prepares
the first stage's input; one lane per device (``lanes.Lane``: the only thread that calls the models on that
device, so two stages on a one-at-a-time device such as an Edge TPU take turns, and a device never waits for
CPU work); and a CPU step after each stage that decodes its answers, tracks (after the first stage), and
prepares the next stage's crops. At most ``queue_size + 2 * stages`` frames are in flight, so memory is flat.

Shedding, in a stated order (docs/cascade.md): under a dropping policy (``oldest``/``latest``, cameras and
streams by default) a later stage whose device is behind (``queue_size - 1`` frames waiting for it) passes a
frame on without its crops (``shed`` reason "overload"), before whole frames are dropped at the source queue.
With ``policy=`` (thermal, power, ...) the governor (``governor.py``) sheds later stages' crops on a device
allowed less than it does (reason "policy"), then lowers the frame rate. ``report()`` counts all of it per
source, stage and reason: read = delivered + dropped + abandoned for every source.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError
from ..sources.queues import DROP_POLICIES, Closed
from .flow import Flow

KEPT_TIMES = 2048  # per-stage times kept for the percentiles: memory stays flat on endless sources


@dataclass
class CascadeFrame:
    index: int  # the frame's number in its source, counting dropped ones
    timestamp: float | None
    result: Any  # the first stage's DetectResult, boxes carrying the later stages' answers
    stage_ms: dict[str, float] = field(default_factory=dict)  # each stage's device time on this frame
    latency_ms: float = 0.0  # from the frame's arrival to its last stage's end
    shed: dict[str, str] = field(default_factory=dict)  # later stage -> why it passed this frame on unlooked
    source: str = ""
    tracks: list | None = None  # with track=: the first stage's tracked objects (box.track_id on its boxes)
    events: list | None = None  # with track=: lost/ended, line crossings, zone entries and exits
    zones: dict | None = None  # with zones=: the source's line and zone counts so far

    def to_dict(self) -> dict:
        out = {"source": self.source, "index": self.index, "timestamp": self.timestamp,
               "latency_ms": round(self.latency_ms, 3), "stage_ms": {k: round(v, 3) for k, v in self.stage_ms.items()}}
        if self.shed:
            out["shed"] = dict(self.shed)
        if self.events is not None:
            out["events"] = [e.to_dict() for e in self.events]
        if self.zones is not None:
            out["zones"] = self.zones
        out.update(self.result.to_dict())
        return out


@dataclass
class StageStats:
    frames: int = 0
    calls: int = 0  # model calls: one a frame for the first stage, one a crop after
    skipped: int = 0
    shed: Counter = field(default_factory=Counter)  # frames passed on without this stage's work, by reason
    busy_s: float = 0.0
    device_s: float = 0.0  # moving average of its device time a frame (the governor's figure)
    times: deque = field(default_factory=lambda: deque(maxlen=KEPT_TIMES))
    cpu_times: deque = field(default_factory=lambda: deque(maxlen=KEPT_TIMES))


@dataclass
class SourceCounts:
    name: str
    read: int = 0
    delivered: int = 0
    dropped: Counter = field(default_factory=Counter)  # whole frames dropped at its queue, by reason


class CascadeRun(Flow):
    """Iterate for CascadeFrames (in order per source); ``report()`` any time, ``close()`` to stop early (``with``
    does). ``sources``: what ``edgeaccel.sources.open_source`` opens; ``names``: one per source. ``policy``
    (a name or a ``scheduling.Policy``) with ``power_budget_w``, ``sensors`` ({device: SensorSpec}),
    ``telemetry_root`` and ``policy_interval_s``: the governor. ``track``/``zones``: as ``model.watch``'s,
    on the first stage's boxes, one tracker per source."""

    def __init__(self, cascade, sources: list, *, drop: str | None = None, queue_size: int = 4,
                 names: list[str] | None = None, policy=None, power_budget_w: float | None = None,
                 sensors: dict | None = None, telemetry_root: str = "/", policy_interval_s: float = 0.5,
                 track=None, zones=None, clock=None) -> None:
        from ..scheduling.clock import MonotonicClock
        from ..sources.readers import open_source
        from ..tracking.live import tracking_options

        if drop is not None and drop not in DROP_POLICIES:
            raise InputError(f"drop must be one of {', '.join(DROP_POLICIES)}, not {drop!r}",
                             hint="none: every frame (files); oldest / latest: keep up with a live source")
        if not isinstance(queue_size, int) or queue_size < 1:
            raise InputError(f"queue_size must be a whole number >= 1, not {queue_size!r}")
        if not sources:
            raise InputError("watch() needs at least one source")
        if names is not None and len(names) != len(sources):
            raise InputError(f"names= gives {len(names)} names for {len(sources)} sources")
        tracking = tracking_options(cascade.stages[0].model.task, track, zones)
        self.cascade = cascade
        self.queue_size = queue_size
        self.clock = clock or MonotonicClock()
        self.governor = None
        if policy is not None:
            from .governor import Governor

            self.governor = Governor(policy, [(s.name, s.device) for s in cascade.stages],
                                     power_budget_w=power_budget_w, sensors=sensors, telemetry_root=telemetry_root,
                                     interval_s=policy_interval_s)
        self.sources = []
        try:
            for n, spec in enumerate(sources):
                self.sources.append(open_source(spec, name=names[n] if names else None))
                self.sources[-1].open()
        except BaseException:
            for source in self.sources:
                source.close()
            raise
        self.drops = [drop or ("latest" if s.live else "none") for s in self.sources]
        self.drop = drop or ("latest" if any(s.live for s in self.sources) else "none")
        self.tracking = None
        if tracking is not None:
            from ..tracking.live import SourceTracking

            self.tracking = [SourceTracking(*tracking) for _ in self.sources]
        self.stats = [StageStats() for _ in cascade.stages]
        self.counts = [SourceCounts(s.name) for s in self.sources]
        self.in_flight = queue_size + 2 * len(cascade.stages)
        super().__init__()

    @property
    def source(self):
        return self.sources[0]

    # -- the caller's side ---------------------------------------------------------------------------------
    def __iter__(self):
        if self._started is not None:
            raise InputError("this cascade run was already iterated", hint="call cascade.watch(...) again")
        self._start()
        try:
            while True:
                try:
                    item = self._out.get(timeout=0.5)
                except TimeoutError:
                    if self._error is not None:
                        break
                    continue
                except Closed:
                    break
                if item is self.END:
                    break
                item.result.image = item.image
                item.result.timing_ms = dict(item.stage_ms)
                yield CascadeFrame(item.index, item.timestamp, item.result, item.stage_ms,
                                   (time.monotonic() - item.captured) * 1e3, item.shed, self.sources[item.source].name,
                                   item.tracks, item.events, item.zones)
        finally:
            self.close()
        if self._error is not None:
            raise self._error
        if self.errors:  # a source that ended early, the others served to their end
            raise next(iter(self.errors.values()))

    def run(self) -> dict:
        """Drain every frame (discarding them) and return the report."""
        for _ in self:
            pass
        return self.report()

    def __enter__(self) -> CascadeRun:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def report(self) -> dict:
        """Per source: frames read, delivered, dropped (by reason) and abandoned; fps; per stage its executor,
        device, frames, calls, skipped boxes, shed frames by reason, device ms a frame (p50/p95), CPU ms and
        busy share; per device its stages, runs, model switches; the policy's plan when one governs."""
        from ..quantiles import percentiles

        end = self._ended or time.perf_counter()
        wall = max(end - (self._started or end), 1e-9)
        with self._lock:
            sources = []
            for i, c in enumerate(self.counts):
                dropped = {"overload": c.dropped["overload"], "policy": c.dropped["policy"]}
                row = {"source": c.name, "drop": self.drops[i], "read": c.read, "delivered": c.delivered,
                       "dropped": dropped, "abandoned": c.read - c.delivered - sum(dropped.values()),
                       "error": str(self.errors[c.name]).splitlines()[0] if c.name in self.errors else None}
                if self.tracking is not None:
                    row["tracking"] = self.tracking[i].summary()
                sources.append(row)
            stages = []
            for stage, st in zip(self.cascade.stages, self.stats, strict=True):
                q = percentiles(st.times, (50, 95)) or {}
                cpu = percentiles(st.cpu_times, (50,)) or {}
                stages.append({"name": stage.name, "executor": stage.executor_name, "device": stage.device,
                               "frames": st.frames, "calls": st.calls, "skipped": st.skipped,
                               "shed": {"overload": st.shed["overload"], "policy": st.shed["policy"]},
                               "p50_ms": round(q["p50"], 3) if q else None,
                               "p95_ms": round(q["p95"], 3) if q else None,
                               "cpu_p50_ms": round(cpu["p50"], 3) if cpu else None,
                               "busy": round(st.busy_s / wall, 3)})
        devices = [{"device": lane.device, "stages": [self.cascade.stages[k].name for k in lane.stages],
                    "runs": lane.runs, "switches": lane.switches, "most_at_once": lane.peak,
                    "busy": round(lane.total_busy_s / wall, 3)} for lane in self._lanes.values()]
        totals = {"read": sum(s["read"] for s in sources), "delivered": sum(s["delivered"] for s in sources),
                  "dropped": {k: sum(s["dropped"][k] for s in sources) for k in ("overload", "policy")},
                  "abandoned": sum(s["abandoned"] for s in sources)}
        return {"schema": "edgeaccel.cascade-run/2", "source": ", ".join(s.name for s in self.sources),
                "drop": self.drop, "queue_size": self.queue_size, "frames": totals, "sources": sources,
                "wall_s": round(wall, 3), "fps": round(totals["delivered"] / wall, 2), "stages": stages,
                "devices": devices, "placement": list(self.cascade.placement),
                "policy": self.governor.to_dict() if self.governor is not None else None}
