"""Reading an HTTP request's body, bounded in size and in time.

uvicorn has no limit on how long a body may take to arrive: a client that sent its head and part of its body
and then stopped (a stalled link, or a slowloris attack) held its connection and a request task forever, and at
shutdown kept the server waiting for uvicorn's graceful timeout (the request timeout plus its grace, 36 s by
default: past an orchestrator's 30 s before SIGKILL). A body that sends nothing for ``BODY_IDLE_S`` is answered
408 and its connection closed; while the server shuts down, 503 with Retry-After (the request never arrived
whole: another instance can take it), so a stalled upload delays the shutdown by that long at most."""

from __future__ import annotations

import asyncio

from .errors import ServeError

BODY_IDLE_S = 5.0  # the longest a request body may send nothing before it is given up (408)
DISCARD_S = 2.0  # the longest an answer that closes its connection reads the rest of a body nobody read


class Disconnected(Exception):
    """The client went away before its request was read: nothing to answer."""


async def read_body(headers: dict, receive, max_bytes: int, idle_s: float = BODY_IDLE_S,
                    draining=lambda: False) -> bytes:
    """The whole body; ``draining()`` says whether the server is shutting down (the answer to a stalled body)."""
    if headers.get(b"content-encoding", b"identity").lower() not in (b"identity", b""):
        raise ServeError(415, "compressed request bodies are not accepted; send them uncompressed")
    length = headers.get(b"content-length")
    if length is not None and length.isdigit() and int(length) > max_bytes:
        raise ServeError(413, f"the request body is {int(length)} bytes, more than the server's limit of "
                              f"{max_bytes} (--max-request-mb)")
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    stalled: list[bool] = []

    def give_up() -> None:
        stalled.append(True)
        task.cancel()

    chunks, size = [], 0
    while True:
        timer = loop.call_later(idle_s, give_up)  # a few microseconds: the body is usually there at once
        try:
            message = await receive()
        except asyncio.CancelledError:
            if not stalled:  # the shutdown's cancel, not ours
                raise
            task.uncancel()
            if draining():
                error = ServeError(503, "the server shut down before this request arrived whole; send it again "
                                        "(to another instance)", retry_after=5)
            else:
                error = ServeError(408, f"the request body stopped arriving: nothing came for {idle_s:g} s after "
                                        f"{size} bytes; send the whole body at once (Content-Length or chunked)")
            error.close_connection = True
            raise error from None
        finally:
            timer.cancel()
        if message["type"] == "http.disconnect":
            raise Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > max_bytes:
            raise ServeError(413, f"the request body is more than the server's limit of {max_bytes} bytes "
                                  "(--max-request-mb)")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


class BodyWatch:
    """A request's ASGI ``receive`` that remembers whether the body has arrived whole, so that an answer that closes
    the connection (every answer while the server shuts down) reads the rest of a body nobody read first: a socket
    closed with data unread is reset, and a client still writing a large body (deeplabv3's 790 KB tensor) got
    EPIPE instead of the 503 (tools/serve_sigterm_flood.py). Answers that keep the connection need none of this:
    uvicorn reads and drops the rest of the body itself."""

    __slots__ = ("_receive", "max_bytes", "whole", "began", "_expects_continue")

    def __init__(self, receive, max_bytes: int, headers: dict | None = None) -> None:
        self._receive = receive
        self.max_bytes = max_bytes
        self.whole = False
        self.began = False
        # Expect: 100-continue (curl's large uploads): the client waits for "100 Continue" before sending its
        # body, which a receive() would ask for; answered first, it sends nothing to leave unread
        self._expects_continue = (headers or {}).get(b"expect", b"").lower() == b"100-continue"

    async def __call__(self) -> dict:
        self.began = True
        message = await self._receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            self.whole = True  # the last part, or the client went away: nothing more to come
        return message

    async def discard(self, seconds: float | None = None) -> None:
        """Read and drop a body the request was answered before reading, up to ``max_bytes`` and for at most
        ``seconds`` (a slow upload does not hold the refusal, or the shutdown, longer than that). A body whose
        reading began was refused for itself (it stalled, it is too large): nothing more is waited for."""
        async def rest() -> None:
            size = 0
            while not self.whole and size <= self.max_bytes:
                size += len((await self()).get("body", b""))

        if not self.began and not self._expects_continue:
            try:
                await asyncio.wait_for(rest(), DISCARD_S if seconds is None else seconds)
            except asyncio.TimeoutError:
                pass
