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
        self._cond = threading.Condition(threading.Lock())

    def prime(self, item: T) -> None:
        with self._cond:
            self._all.append(item)
            self._free.append(item)

    def take(self) -> T:
        with self._cond:
            while True:
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
                self._all.remove(None)
                self._cond.notify()
            raise
        with self._cond:
            self._all[self._all.index(None)] = item
        return item

    def give(self, item: T) -> None:
        with self._cond:
            self._free.append(item)
            self._cond.notify()

    def drain(self) -> None:
        with self._cond:
            items, self._free, self._all = [i for i in self._all if i is not None], [], []
        if self._close:
            for item in items:
                self._close(item)

    def __len__(self) -> int:
        return len(self._all)
