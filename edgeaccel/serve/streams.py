"""Tracked streams over the task endpoints: a client names its camera (``stream=cam1``) on each frame it sends to
a detector, and the boxes come back with ``track_id``s that stay with their objects from frame to frame.

One tracker per model and stream (the same ByteTrack-style tracker as ``watch(track=True)``:
edgeaccel/tracking), applied to a stream's frames in the order they arrived, whatever order their runs finish in:
a client that keeps several frames in flight gets the ids a client sending one at a time gets. A frame's time is
its ``timestamp`` (seconds on the client's clock: motion is in time, so uneven or dropped frames are fine), or
the server's clock when it arrived; a timestamp before the stream's last one ends its tracks and starts again (a
camera that restarted), as on a looped file in-process.

Streams are bounded: one unseen for ``IDLE_S`` is forgotten, and past ``MAX_STREAMS`` the least recently seen
goes; a forgotten stream's next frame starts afresh and says so (``"new": true``: its ids restart at 1)."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from typing import Any

from .errors import ServeError

log = logging.getLogger("edgeaccel.serve")
MAX_STREAMS = 1024  # trackers kept at once in a server (a few KB each)
IDLE_S = 120.0  # a stream that sent nothing this long is forgotten (its tracks had ended long before)
NAME = re.compile(r"[A-Za-z0-9._:@/-]{1,128}")


def stream_name(value: Any) -> str:
    """A request's ``stream`` option: a name the client chooses for one camera or video; a 400 otherwise."""
    if not isinstance(value, str) or NAME.fullmatch(value) is None:
        raise ServeError(400, f"stream is a name of 1 to 128 letters, digits and . _ : @ / - (one per camera or "
                              f"video, e.g. stream=cam1), not {value!r}")
    return value


class Stream:
    """One stream's tracker, and the frames that arrived and are not yet applied to it."""

    def __init__(self, name: str, options: Any) -> None:
        from ..tracking import Tracker

        self.name = name
        self.tracker = Tracker(options)
        self.lock = threading.Lock()
        self.arrived = 0  # frames given a place in the stream's order
        self.applied = 0  # frames applied (or given up) in that order
        self.tracked = 0  # frames applied
        self.parked: dict[int, tuple[Any, float, Future] | None] = {}  # None: a frame that failed
        self.seen = time.monotonic()


class Ticket:
    """A frame's place in its stream: ``complete(result)`` tracks it once the frames before it are applied;
    ``abandon()`` gives the place up (the request failed: later frames need not wait for it)."""

    def __init__(self, stream: Stream, seq: int, timestamp: float) -> None:
        self.stream, self.seq, self.timestamp = stream, seq, timestamp
        self.done = False

    def complete(self, result: Any) -> Future:
        """A Future of the stream's part of the answer (``{"id", "new", "frame", "tracks", "events"}``), set
        when the frame has been tracked: at once, or when the frames that arrived before it are. ``result``'s
        boxes get their ``track_id``s meanwhile."""
        future: Future = Future()
        future.set_running_or_notify_cancel()  # a caller that stops waiting cannot cancel it under the applier
        self._settle((result, self.timestamp, future))
        return future

    def abandon(self) -> None:
        if not self.done:
            self._settle(None)

    def _settle(self, frame: tuple | None) -> None:
        self.done = True
        stream = self.stream
        with stream.lock:
            stream.parked[self.seq] = frame
            while stream.applied in stream.parked:
                waiting = stream.parked.pop(stream.applied)
                stream.applied += 1
                if waiting is not None:
                    _apply(stream, *waiting)


def _apply(stream: Stream, result: Any, timestamp: float, future: Future) -> None:
    """Track one frame; its answer's ``frame`` counts the stream's frames tracked, ``new`` says the first (ids
    start at 1), ``tracks`` the ids given out so far."""
    from ..tracking.live import boxes_of

    try:
        events = stream.tracker.update(boxes_of(result) or [], timestamp)
        stream.tracked += 1
        future.set_result({"id": stream.name, "new": stream.tracked == 1, "frame": stream.tracked,
                           "tracks": stream.tracker.confirmed,
                           "events": [e.to_dict() for e in sorted(events, key=lambda e: e.timestamp)]})
    except Exception as exc:  # a bug of the tracker: this frame's answer says so, the stream goes on
        future.set_exception(exc)


class Streams:
    """Every tracked stream of a server, by model and stream name, least recently seen first."""

    def __init__(self, max_streams: int = MAX_STREAMS, idle_s: float = IDLE_S) -> None:
        self.max_streams, self.idle_s = max_streams, idle_s
        self._lock = threading.Lock()
        self._streams: OrderedDict[tuple[str, str], Stream] = OrderedDict()
        self._evicted_said = 0.0

    def __len__(self) -> int:
        return len(self._streams)

    def arrive(self, model: str, name: str, timestamp: float | None, options: Any = None) -> Ticket:
        """A frame of ``name`` for ``model`` arrived: its place in the stream's order (the stream is made if new)."""
        now = time.monotonic()
        key = (model, name)
        with self._lock:
            while self._streams:  # the least recently seen first: stop at the first one still in use
                oldest = next(iter(self._streams.values()))
                if now - oldest.seen < self.idle_s:
                    break
                self._streams.popitem(last=False)
            stream = self._streams.get(key)
            if stream is None:
                stream = self._streams[key] = Stream(name, options)
                if len(self._streams) > self.max_streams:
                    (gone_model, gone), _ = self._streams.popitem(last=False)
                    if now - self._evicted_said > 60:  # said once a minute at most: a flood of names is no log flood
                        self._evicted_said = now
                        log.warning("more than %d tracked streams: forgot the least recently seen (%s of %s); its "
                                    "next frame starts new ids", self.max_streams, gone, gone_model)
            else:
                self._streams.move_to_end(key)
            stream.seen = now
            seq = stream.arrived
            stream.arrived += 1
        return Ticket(stream, seq, now if timestamp is None else timestamp)
