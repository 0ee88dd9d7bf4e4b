"""Streams over the task endpoints: a client names its camera (``stream=cam1``) on each frame it sends, and a
detector's boxes come back with ``track_id``s that stay with their objects from frame to frame; a model with
recurrent state (an LSTM's c and h fed back, as traffic_model.tflite's) runs each frame with the state the
stream's previous frame left, as a live source does in-process (edgeaccel/sources/state.py), so a stream's frames
of such a model run one after the other.

One tracker per model and stream (the same ByteTrack-style tracker as ``watch(track=True)``:
edgeaccel/tracking), applied to a stream's frames in the order they arrived, whatever order their runs finish in:
a client that keeps several frames in flight gets the ids a client sending one at a time gets. A frame's time is
its ``timestamp`` (seconds on the client's clock: motion is in time, so uneven or dropped frames are fine), or
when it arrived (on the client's clock as the stream's last timestamp set it, else the server's). A frame up to
``LATE_S`` before the latest one that arrived was overtaken on the way in (another connection): it is answered
untracked and ``late``. Further back, the camera restarted: the stream's tracks end (ids go on) and a model's
recurrent state starts again from zeros, as on a looped file in-process.

Streams are bounded: one unseen for ``IDLE_S`` is forgotten, and past ``MAX_STREAMS`` the least recently seen
goes; a forgotten stream's next frame starts afresh and says so (``"new": true``: its ids restart at 1)."""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from typing import Any

from .errors import ServeError

log = logging.getLogger("edgeaccel.serve")
MAX_STREAMS = 1024  # trackers kept at once in a server (~48 KB each with two tracks: ~50 MB at most)
IDLE_S = 120.0  # a stream that sent nothing this long is forgotten (its tracks had ended long before)
# a timestamp at most this far before the stream's last is a frame that arrived after a later one (frames in
# flight on several connections): answered untracked. Further back, the camera restarted: its tracks end.
LATE_S = 1.0
NAME = re.compile(r"[A-Za-z0-9._:@/-]{1,128}")


def stream_name(value: Any) -> str:
    """A request's ``stream`` option: a name the client chooses for one camera or video (a whole number is
    taken as its digits: a camera's number in a KServe int64 parameter); a 400 otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or NAME.fullmatch(value) is None:
        raise ServeError(400, f"stream is a name of 1 to 128 letters, digits and . _ : @ / - (one per camera or "
                              f"video, e.g. stream=cam1), not {value!r}")
    return value


class Stream:
    """One stream's tracker, and the frames that arrived and are not yet applied to it; for a model with
    recurrent state, the state its last frame leaves."""

    def __init__(self, name: str, tracks: bool, state: list[tuple[str, str]]) -> None:
        from ..tracking import Tracker

        self.name = name
        self.tracker = Tracker() if tracks else None  # watch(track=True)'s defaults
        self.state_pairs = state  # (output name, input name) of each state the model carries
        self.state: Future = _done(None)  # the inputs the last frame that arrived will leave (None: zeros)
        self.clock = -math.inf  # the latest timestamp that arrived since the camera last restarted
        self.before_restart = -math.inf  # the clock before that restart: its stragglers are late, not a restart
        self.offset: float | None = None  # the client's clock minus the server's, once a frame gave a timestamp
        self.lock = threading.Lock()
        self.arrived = 0  # frames given a place in the stream's order
        self.applied = 0  # frames applied (or given up) in that order
        self.tracked = 0  # frames tracked (a late one is not)
        self.parked: dict[int, tuple[Any, float, bool, Future] | None] = {}  # None: a frame that failed
        self.seen = time.monotonic()

    def place(self, when: float) -> str:
        """Where a frame of time ``when``, arriving now, falls: "next" (on or after the clock), "late" (up to
        LATE_S before it, or a straggler of the segment before a restart: another connection overtook it) or
        "restart" (further back: the camera restarted, as a looped file does)."""
        if when >= self.clock:
            if when - self.clock > LATE_S and self.before_restart - LATE_S <= when <= self.before_restart:
                return "late"  # far ahead of the restarted clock, just behind the old one: sent before the restart
            self.clock = when
            return "next"
        if when >= self.clock - LATE_S:
            return "late"
        self.before_restart, self.clock = self.clock, when
        return "restart"


class Ticket:
    """A frame's place in its stream: ``complete(result)`` tracks it once the frames before it are applied;
    ``abandon()`` gives the place up (the request failed: later frames need not wait for it)."""

    def __init__(self, stream: Stream, seq: int, timestamp: float, late: bool = False,
                 state_in: Future | None = None, state_out: Future | None = None) -> None:
        self.stream, self.seq, self.timestamp, self.late = stream, seq, timestamp, late
        self.done = False  # settled (completed or abandoned), under the stream's lock
        # a model with recurrent state: the state this frame runs with, set once the frame before it has run
        # (a stream's frames run one after the other), and the state it leaves for the next
        self.state_in, self._state_out = state_in, state_out

    def ran(self, outputs: Any) -> None:
        """The frame's outputs by name: the next frame runs with the state they hold."""
        if self._state_out is not None and not self._state_out.done():
            self._state_out.set_result({inp: outputs[out] for out, inp in self.stream.state_pairs})

    def complete(self, result: Any) -> Future:
        """A Future of the stream's part of the answer (``{"id", "new", "frame", "tracks", "events"}``), set
        when the frame has been tracked: at once, or when the frames that arrived before it are. ``result``'s
        boxes get their ``track_id``s meanwhile."""
        future: Future = Future()
        future.set_running_or_notify_cancel()  # a caller that stops waiting cannot cancel it under the applier
        self._settle((result, self.timestamp, self.late, future))
        return future

    def abandon(self) -> None:
        if self._state_out is not None and not self._state_out.done():
            self._state_out.set_result(None)  # a frame that did not run: the next starts from zeros, not stale state
        self._settle(None)

    def _settle(self, frame: tuple | None) -> None:
        stream = self.stream
        with stream.lock:
            if self.done:  # abandon() after complete(), or a cancelled request's complete() after its abandon()
                return
            self.done = True
            stream.parked[self.seq] = frame
            while stream.applied in stream.parked:
                waiting = stream.parked.pop(stream.applied)
                stream.applied += 1
                if waiting is not None:
                    _apply(stream, *waiting)


def _apply(stream: Stream, result: Any, timestamp: float, late: bool, future: Future) -> None:
    """Track one frame; its answer's ``frame`` counts the stream's frames tracked, ``new`` says the first (ids
    start at 1), ``tracks`` the ids given out so far; ``late`` a frame that arrived after a later one (untracked:
    the tracker's motion runs forward in time)."""
    try:
        from ..tracking.live import boxes_of

        tracker = stream.tracker
        events = []
        if not late:
            if tracker is not None:
                events = tracker.update(boxes_of(result) or [], timestamp)
            stream.tracked += 1
        answer = {"id": stream.name, "new": stream.tracked == 1 and not late, "frame": stream.tracked}
        if late:
            answer["late"] = True
        if tracker is not None:
            answer["tracks"] = tracker.confirmed
            answer["events"] = [e.to_dict() for e in sorted(events, key=lambda e: e.timestamp)]
        future.set_result(answer)
    except Exception as exc:  # a bug of the tracker: this frame's answer says so, the stream starts its tracks again
        if stream.tracker is not None:
            stream.tracker.reset()
        future.set_exception(exc)


class Streams:
    """Every tracked stream of a server, by model and stream name, least recently seen first."""

    def __init__(self, max_streams: int = MAX_STREAMS, idle_s: float = IDLE_S) -> None:
        self.max_streams, self.idle_s = max_streams, idle_s
        self._lock = threading.Lock()
        self._streams: OrderedDict[tuple[str, str], Stream] = OrderedDict()
        self._evicted_said = 0.0

    def __len__(self) -> int:
        with self._lock:
            self._expire(time.monotonic())
            return len(self._streams)

    def _expire(self, now: float) -> None:
        while self._streams:  # the least recently seen first: stop at the first one still in use
            oldest = next(iter(self._streams.values()))
            if now - oldest.seen < self.idle_s:
                break
            self._streams.popitem(last=False)

    def arrive(self, model: str, name: str, timestamp: float | None, tracks: bool = True,
               state: list[tuple[str, str]] | None = None) -> Ticket:
        """A frame of ``name`` for ``model`` arrived: its place in the stream's order (the stream is made if new).
        ``tracks``: the model's results have boxes; ``state``: the (output, input) names of its recurrent state."""
        now = time.monotonic()
        key = (model, name)
        with self._lock:
            self._expire(now)
            stream = self._streams.get(key)
            if stream is not None and (stream.state_pairs != (state or []) or (stream.tracker is not None) != tracks):
                stream = None  # the model was reloaded with other outputs: its streams start again
            if stream is None:
                stream = self._streams[key] = Stream(name, tracks, state or [])
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
            if timestamp is not None:
                stream.offset = timestamp - now
            # without a timestamp: the client's clock as its last timestamp gave it, else the server's
            when = timestamp if timestamp is not None else now + (stream.offset or 0.0)
            place = stream.place(when)
            state_in = state_out = None
            if stream.state_pairs:
                # a restarted camera's frames do not follow from the old state; a late frame runs on the state
                # of the frames before it without passing its own on (the next frame follows the latest)
                state_in = _done(None) if place == "restart" else stream.state
                if place != "late":
                    state_out = stream.state = Future()
                    state_out.set_running_or_notify_cancel()
        return Ticket(stream, seq, when, place == "late", state_in, state_out)


def _done(value: Any) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future
