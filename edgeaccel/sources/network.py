"""Network streams (RTSP, HTTP(S) including MJPEG, RTMP, ...) that reconnect with backoff and jitter.

A stream that drops (an error, a stall past ``read_timeout``, or its end) is opened again after 0.5 s, then
1, 2, 4 ... up to ``max_backoff`` seconds, each delay scaled by a random factor in [0.5, 1] so that many
clients of one server do not come back in step. The source ends with SourceLostError when it has had no frame
for ``reconnect_timeout`` seconds (30 by default; also when it never connected); the other sources go on.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator

from .errors import SourceError, SourceLostError
from .source import RawFrame, Source
from .video import DEFAULT_OPEN_TIMEOUT_S, DEFAULT_READ_TIMEOUT_S, decode, open_container

DEFAULT_RECONNECT_TIMEOUT_S = 30.0


class Backoff:
    """Exponential delays with jitter: ``next()`` gives the next wait, ``reset()`` after a success."""

    def __init__(self, initial: float = 0.5, maximum: float = 8.0, rng: random.Random | None = None) -> None:
        self.initial, self.maximum = initial, maximum
        self.rng = rng or random.Random()
        self.attempt = 0

    def next(self) -> float:
        delay = min(self.maximum, self.initial * 2 ** self.attempt)
        self.attempt += 1
        return delay * self.rng.uniform(0.5, 1.0)

    def reset(self) -> None:
        self.attempt = 0


class NetworkSource(Source):
    kind = "network"
    live = True

    def __init__(self, url: str, name: str, *, reconnect_timeout: float = DEFAULT_RECONNECT_TIMEOUT_S,
                 open_timeout: float = DEFAULT_OPEN_TIMEOUT_S, read_timeout: float = DEFAULT_READ_TIMEOUT_S,
                 backoff: Backoff | None = None, **_ignored) -> None:
        super().__init__(name)
        self.url = url
        self.reconnect_timeout = reconnect_timeout
        self.open_timeout = min(open_timeout, reconnect_timeout)
        self.read_timeout = read_timeout
        self.backoff = backoff or Backoff()
        self._container = None

    def _options(self) -> dict:
        if self.url.lower().startswith(("rtsp://", "rtsps://")):
            return {"rtsp_transport": "tcp"}  # interleaved over the one connection: no lost UDP packets
        return {}

    def frames(self, stop: threading.Event) -> Iterator[RawFrame]:
        down_since = time.monotonic()  # when the last frame came (or the start): the outage is measured from it
        connected_once = False
        segment = 0
        last_error = "not connected yet"
        while not stop.is_set():
            got_frame = False
            try:
                self._container = open_container(self.url, self.name, options=self._options(),
                                                  open_timeout=self.open_timeout, read_timeout=self.read_timeout)
                for raw in decode(self._container, self, stop, segment=segment):
                    if not got_frame:
                        got_frame = True
                        if connected_once:
                            outage = time.monotonic() - down_since
                            self.outage_s += outage
                            self.reconnects += 1
                            self.event(f"reconnected after {outage:.1f} s without frames")
                        connected_once = True
                        self.backoff.reset()
                    yield raw
                last_error = "the stream ended"
            except SourceError as exc:
                last_error = exc.message
            finally:
                self._close_container()
            if stop.is_set():
                return
            if got_frame:  # it was up and dropped: a new segment, with its own state, after it comes back
                down_since = time.monotonic()
                segment += 1
                self.event(f"lost: {last_error}; reconnecting")
            if time.monotonic() - down_since >= self.reconnect_timeout:
                what = "no frames" if connected_once else "could not connect"
                raise SourceLostError(f"{self.name}: {what} for {self.reconnect_timeout:g} s ({last_error})",
                                      hint="check the camera or server; reconnect_timeout= sets how long to wait")
            stop.wait(self.backoff.next())

    def _close_container(self) -> None:
        if self._container is not None:
            try:
                self._container.close()
            except Exception:  # a broken connection may fail to close; it is gone either way
                pass
            self._container = None

    def close(self) -> None:
        self._close_container()
