"""A bounded queue with a drop policy: the only place where frames wait between two stages.

``none``: a full queue blocks the producer (file processing: every frame, no loss; the decoder waits).
``oldest``: a full queue drops its oldest frame to take the new one (keeps the newest ``size`` frames).
``latest``: one frame waits at most; a new frame replaces it (the lowest latency: always the latest frame).
Nothing ever grows past ``size``: a live source that is faster than the model loses frames, never memory.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

DROP_POLICIES = ("none", "oldest", "latest")


class Closed(Exception):
    """The queue was closed (the pipeline stops)."""


class DropQueue:
    def __init__(self, size: int, drop: str = "none") -> None:
        if drop not in DROP_POLICIES:
            raise ValueError(f"drop must be one of {DROP_POLICIES}, not {drop!r}")
        self.size = 1 if drop == "latest" else max(1, size)
        self.drop = drop
        self._items: deque = deque()
        self._cond = threading.Condition()
        self._closed = False

    def put(self, item: Any) -> Any | None:
        """Queue ``item``; returns the item dropped to make room (None if none). Blocks under ``none`` while
        full; raises Closed once the queue is closed."""
        with self._cond:
            while self.drop == "none" and len(self._items) >= self.size and not self._closed:
                self._cond.wait()
            if self._closed:
                raise Closed
            dropped = self._items.popleft() if len(self._items) >= self.size else None
            self._items.append(item)
            self._cond.notify_all()
            return dropped

    def put_end(self, item: Any) -> None:
        """The last item (end of a source): never dropped, never blocks (it may exceed ``size`` by one)."""
        with self._cond:
            self._items.append(item)
            self._cond.notify_all()

    def wait_space(self, timeout: float | None = None) -> bool:
        """Block until a put would not wait or drop (False after ``timeout``); raises Closed when closed."""
        with self._cond:
            self._cond.wait_for(lambda: len(self._items) < self.size or self._closed, timeout)
            if self._closed:
                raise Closed
            return len(self._items) < self.size

    def get(self, timeout: float | None = None) -> Any:
        """The oldest item; raises Closed when closed, TimeoutError after ``timeout`` with nothing queued."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._items or self._closed, timeout):
                raise TimeoutError
            if self._closed:
                raise Closed
            item = self._items.popleft()
            self._cond.notify_all()
            return item

    def get_nowait(self) -> Any:
        """The oldest item, or raises IndexError when empty (Closed when closed)."""
        with self._cond:
            if self._closed:
                raise Closed
            item = self._items.popleft()
            self._cond.notify_all()
            return item

    def __len__(self) -> int:
        return len(self._items)

    def close(self) -> None:
        """Wake every waiter; put/get raise Closed from now on."""
        with self._cond:
            self._closed = True
            self._items.clear()
            self._cond.notify_all()
