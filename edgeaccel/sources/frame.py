"""What a pipeline gives back per frame: where it came from, when, how late, and the model's answer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Where a frame's latency went, in order: decoding (packet read -> RGB frame), waiting in the queues between
# stages (the source queue, a free inference slot, the finish stage), pre-processing, inference (submitted ->
# outputs ready), post-processing. A file read ahead of a slow model waits mostly in "queue".
STAGES = ("decode", "queue", "preprocess", "inference", "postprocess")


@dataclass
class Frame:
    """One frame through the pipeline.

    source: the source's name (its URL or path, or ``name=`` given to watch); index: its position in that source
    (counting frames dropped before inference, so gaps show the drops); timestamp: the source's own time in
    seconds (the stream's presentation time; for iterables and cameras without one, seconds since the start);
    captured: ``time.monotonic()`` when the frame arrived (its packet was read from a video or stream, or it was
    taken from an iterable); latency_ms: arrived -> result ready, all of it: decoding, waiting in queues,
    pre-processing, inference, post-processing; timing_ms: that latency split by stage (``STAGES``: decode,
    queue, preprocess, inference, postprocess; they add up to latency_ms, queue being every wait between
    stages, so that a frame that waited behind others is told from a slow model).
    outputs: the raw ``Outputs``; result: the task layer's Result (None without a task); image: the decoded
    RGB frame (H, W, 3) uint8; error: the exception when this frame's inference failed (outputs are None).
    With ``track=`` (docs/sources.md, Tracking): tracks: the source's tracks seen on this frame
    (``edgeaccel.tracking.Track``: id, label, age_s, ...); events: what happened since the previous frame (new,
    lost, found, ended tracks; crossings, zone entries and exits) as ``edgeaccel.tracking.Event``; zones: the
    counts so far of the source's lines and zones (with ``zones=``). None without tracking.
    """

    source: str
    index: int
    timestamp: float | None
    captured: float
    image: Any = field(repr=False, default=None)
    outputs: Any = field(repr=False, default=None)
    result: Any = None
    latency_ms: float = 0.0
    error: BaseException | None = None
    timing_ms: dict = field(default_factory=dict)
    tracks: list | None = None
    events: list | None = None
    zones: dict | None = None
    zone_shapes: Any = field(repr=False, default=None)  # the source's Zones: what overlays draw

    def to_dict(self, small_outputs: int = 64) -> dict:
        """A JSON-ready record: the task's ``Result.to_dict()`` where there is one, else the outputs that have
        at most ``small_outputs`` values (larger ones are described by shape and dtype)."""
        record: dict[str, Any] = {"source": self.source, "index": self.index, "timestamp": self.timestamp,
                                  "latency_ms": round(self.latency_ms, 3),
                                  "timing_ms": {k: round(v, 3) for k, v in self.timing_ms.items()}}
        if self.error is not None:
            record["error"] = str(self.error).splitlines()[0]
        if self.result is not None and hasattr(self.result, "to_dict"):
            record["result"] = self.result.to_dict()
        elif self.outputs is not None:
            record["outputs"] = _outputs_dict(self.outputs, small_outputs)
        if self.tracks is not None:
            record["tracks"] = [t.to_dict() for t in self.tracks]
            record["events"] = [e.to_dict() for e in self.events or ()]
        if self.zones is not None:
            record["zones"] = self.zones
        return record


def _outputs_dict(outputs, limit: int) -> dict:
    import numpy as np

    names = getattr(outputs, "names", None) or [f"output_{i}" for i in range(len(outputs))]
    shown = {}
    for name, value in zip(names, outputs, strict=True):
        array = np.asarray(value)
        if array.size <= limit:
            shown[name] = array.tolist()
        else:
            shown[name] = {"shape": list(array.shape), "dtype": str(array.dtype)}
    return shown
