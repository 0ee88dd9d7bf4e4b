"""Where frames come in, shared by the one-model pipeline (``pipeline.Pipeline``) and live cascades
(``cascade.live``): one reader thread per source into its bounded ``DropQueue`` (the only place a whole frame
is dropped: under ``oldest``/``latest`` a full queue replaces a frame, under ``none`` it holds the decoder
back), and ``take``, which hands out the waiting frames one source at a time in turn (round robin), so that a
source with frames always ready cannot starve one whose frames come more slowly."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import EdgeAccelError
from .errors import SourceError
from .queues import Closed, DropQueue


@dataclass
class End:
    source: int  # this source has no more frames


class Intake:
    """``make(i, index, raw)`` turns a source's frame into what its queue holds; ``on_drop(i, why)`` counts a
    frame lost before the queue ("max_fps": a live source faster than ``max_fps``) or replaced in it
    ("queue"); ``on_error(i, exc)`` hears why a source ended early (an EdgeAccelError)."""

    def __init__(self, sources: list, drops: list[str], queue_size: int, stop: threading.Event, *,
                 make: Callable[[int, int, Any], Any], on_drop: Callable[[int, str], None],
                 on_error: Callable[[int, EdgeAccelError], None], max_fps: float | None = None) -> None:
        self.sources = sources
        self.queues = [DropQueue(queue_size, d) for d in drops]
        self.arrival = threading.Condition()
        self.active = list(range(len(sources)))  # sources whose end has not been taken yet
        self._turn = 0
        self._stop = stop
        self._make, self._on_drop, self._on_error = make, on_drop, on_error
        self._interval = 1.0 / max_fps if max_fps else 0.0

    def read(self, i: int) -> None:
        """The reader thread's body for source ``i``."""
        source, queue = self.sources[i], self.queues[i]
        next_due, index, size = 0.0, -1, None
        try:
            asked = time.monotonic()
            for raw in source.frames(self._stop):
                # decoding is the source's own time for this frame: from its packet's arrival, or from when the
                # reader asked for it if the packet came earlier (it then waited in the decoder while the
                # reader was held back by a full queue or max_fps: that wait is counted as queue)
                now = time.monotonic()
                raw.decode_s = max(0.0, now - max(raw.captured, asked))
                index += 1
                shape = raw.image.shape[:2]
                if size is not None and shape != size:  # reported; the frame is still fitted to the model
                    source.event(f"frame size changed from {size[1]}x{size[0]} to {shape[1]}x{shape[0]} at frame "
                                 f"{index}")
                size = shape
                item = self._make(i, index, raw)
                if self._interval:
                    now = time.monotonic()
                    if now < next_due:
                        if source.live:  # a live source is not slowed down: the frame is skipped
                            self._on_drop(i, "max_fps")
                            asked = time.monotonic()
                            continue
                        self._stop.wait(next_due - now)  # a file is paced
                    next_due = max(next_due + self._interval, time.monotonic() - self._interval)
                if queue.put(item) is not None:
                    self._on_drop(i, "queue")
                with self.arrival:
                    self.arrival.notify()
                if self._stop.is_set():
                    return
                asked = time.monotonic()
        except Closed:
            return
        except EdgeAccelError as exc:
            self._on_error(i, exc)
        except Exception as exc:
            self._on_error(i, SourceError(f"{source.name} failed: {exc}"))
        finally:
            queue.put_end(End(i))
            with self.arrival:
                self.arrival.notify()

    def take(self, wait_s: float = 0.05) -> Any | None:
        """The next waiting frame, the sources in turn: a frame, an ``End`` (that source is done: it leaves the
        turns), or None when none came within ``wait_s`` (raises Closed once stopped)."""
        with self.arrival:
            active = self.active
            for k in range(len(active)):
                i = active[(self._turn + k) % len(active)]
                try:
                    item = self.queues[i].get_nowait()
                except IndexError:
                    continue
                self._turn = (self._turn + k + 1) % max(1, len(active))
                if isinstance(item, End):
                    active.remove(i)
                    self._turn = self._turn % max(1, len(active))
                return item
            if self._stop.is_set():
                raise Closed
            self.arrival.wait(wait_s)
        return None

    def close(self) -> None:
        for queue in self.queues:
            queue.close()
        with self.arrival:
            self.arrival.notify_all()
