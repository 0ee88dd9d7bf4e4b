"""The HTTP side's two per-request hand-offs, made cheap: waiting on the event loop for the core's answer (Waiter), and
writing the response to the socket.

Measured with py-spy on `edgeaccel serve` under sequential tritonclient requests (tools/bench_serve.py): uvicorn
writes a response's head and body with one ``transport.write`` each, two send(2) calls and two TCP segments
that the client reads apart; the head's write alone took 6% of the server's samples. A response up to
``ONE_WRITE_MAX`` bytes is gathered and written once. A larger one is written part by part (its JSON header,
then each output tensor's bytes as the runtime gave them): joining them would copy megabytes (a segmenter's
class map) for less than one system call's saving."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from typing import Any

ONE_WRITE_MAX = 64 << 10


Body = bytes | list  # one bytes object, or parts (bytes or memoryviews) written in order


def body_length(body: Body) -> int:
    return len(body) if isinstance(body, bytes) else sum(len(part) for part in body)


async def respond(send, status: int, body: Body, headers: list) -> None:
    """An ASGI response (start and body) that reaches the socket in one write where the server lets us: uvicorn's
    ``send`` is a bound method of the request's cycle, whose ``transport`` is swapped for a gatherer during the
    two messages. Any other ASGI server (or a wrapped ``send``) gets the messages as usual. A body given in
    parts larger than ``ONE_WRITE_MAX`` goes out as one body message per part, not joined."""
    start = {"type": "http.response.start", "status": status, "headers": headers}
    cycle = getattr(send, "__self__", None)
    transport = getattr(cycle, "transport", None)
    if not isinstance(body, bytes) and body_length(body) > ONE_WRITE_MAX:
        await send(start)
        # uvicorn's cycles write a body message's bytes as given, a memoryview too; the ASGI spec says bytes
        as_given = transport is not None
        for i, part in enumerate(body):
            await send({"type": "http.response.body", "body": part if as_given else bytes(part),
                        "more_body": i < len(body) - 1})
        return
    end = {"type": "http.response.body", "body": body if isinstance(body, bytes) else b"".join(body)}
    if transport is None or len(end["body"]) > ONE_WRITE_MAX or not hasattr(transport, "write"):
        await send(start)
        await send(end)
        return
    gather = _Gather(transport)
    cycle.transport = gather
    try:
        await send(start)
        await send(end)
    finally:
        cycle.transport = transport
        gather.flush()


class _Gather:
    """Stands in for a connection's transport while one response is sent: its writes are kept and written
    once; closing writes them first. Everything else is the transport's."""

    def __init__(self, transport: Any) -> None:
        self._transport = transport
        self._parts: list = []

    def write(self, data) -> None:
        self._parts.append(data)

    def flush(self) -> None:
        parts, self._parts = self._parts, []
        if parts and not self._transport.is_closing():  # a client gone meanwhile: nothing to write to
            self._transport.write(parts[0] if len(parts) == 1 else b"".join(parts))

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str):
        return getattr(self._transport, name)


class Waiter:
    """Where the event loop waits for the core's answer to one request, made *before* the request is submitted:
    once it is, the loop goes straight back to its poll and lets go of the GIL, which the worker thread that
    runs the request needs to start it (every microsecond of Python on the loop after the submit was a
    microsecond the request waited; py-spy showed the woken worker waiting there).

    One loop future woken once from the worker thread, where ``wait_for(wrap_future())`` chained two futures
    and a task's worth of callbacks per request. ``result(future)`` gives the answer (its error raised), or
    TimeoutError after ``wait_s``; a cancelled wait (the shutdown) cancels ``future`` too, as ``wrap_future``
    did. ``close()`` drops the timer of a request that was never submitted."""

    def __init__(self, wait_s: float) -> None:
        self.wait_s = wait_s
        self._loop = asyncio.get_running_loop()
        self._waiter = self._loop.create_future()
        self._timer = self._loop.call_later(wait_s, _wake, self._waiter)

    def _done(self, _: Future) -> None:  # in the worker thread
        try:
            self._loop.call_soon_threadsafe(_wake, self._waiter)
        except RuntimeError:  # the loop is closed (the server is gone): nobody waits any more
            pass

    async def result(self, future: Future) -> Any:
        try:
            if not future.done():
                future.add_done_callback(self._done)
                try:
                    await self._waiter
                except asyncio.CancelledError:
                    future.cancel()
                    raise
        finally:
            self._timer.cancel()
        if not future.done():
            raise TimeoutError(f"no answer within {self.wait_s:g} s")
        return future.result()

    def close(self) -> None:
        self._timer.cancel()


def _wake(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_result(None)
