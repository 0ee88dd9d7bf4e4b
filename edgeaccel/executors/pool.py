"""``Pool``: runtime objects that must not be shared between threads, handed to one caller at a time."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar


T = TypeVar("T")


class Pool(Generic[T]):
    """A free list of runtime objects that must not be shared between threads (a LiteRT Interpreter, an
    OpenVINO InferRequest). A caller takes one, uses it alone, and gives it back; a new one is made when
    all are busy, up to ``limit``, after which callers wait.
    """

    def __init__(self, factory: Callable[[], T], limit: int, close: Callable[[T], None] | None = None) -> None:
        self._factory = factory
        self._close = close
        self._free: list[T] = []
        self._all: list[T] = []
        self._limit = max(1, limit)
        self._closed = False
        self._cond = threading.Condition(threading.Lock())

    def prime(self, item: T) -> None:
        with self._cond:
            self._all.append(item)
            self._free.append(item)

    def take(self) -> T:
        """An object to use alone; RuntimeError once the pool is drained (a caller waiting then is woken)."""
        with self._cond:
            while True:
                if self._closed:
                    raise RuntimeError("the pool was closed")
                if self._free:
                    return self._free.pop()
                if len(self._all) < self._limit:
                    break
                self._cond.wait()
            self._all.append(None)  # reserve the slot while the new object is built outside the lock
        try:
            item = self._factory()
        except BaseException:
            with self._cond:
                if None in self._all:  # not drained meanwhile
                    self._all.remove(None)
                self._cond.notify()
            raise
        with self._cond:
            if None in self._all:  # drained meanwhile: used once, closed when given back
                self._all[self._all.index(None)] = item
        return item

    def give(self, item: T) -> None:
        """Back to the pool; closed instead where the pool was drained while it was in use."""
        with self._cond:
            if not self._closed:
                self._free.append(item)
                self._cond.notify()
                return
        if self._close:
            self._close(item)

    def drain(self) -> None:
        """Close the free objects; those in use are closed as they come back. Waiting callers get RuntimeError."""
        with self._cond:
            self._closed = True
            items, self._free, self._all = self._free, [], []
            self._cond.notify_all()
        if self._close:
            for item in items:
                self._close(item)

    def __len__(self) -> int:
        return len(self._all)
