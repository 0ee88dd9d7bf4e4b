"""uvicorn's HTTP protocol with the server's own answer to a request it cannot parse.

uvicorn answers a malformed request (a broken request line, a bad chunk size, a Content-Length that is not a
number, bytes after a body that are no request) with a text/plain 400 "Invalid HTTP request received." and
logs a WARNING for each: a client learns nothing of what was wrong, and anyone on the network can fill the
operator's log. Here the 400 is JSON like every other error of the server ({"error": ...}), names the parser's
reason, says what to send instead, and is logged at DEBUG.

httptools also takes a request head of any size (a 1 MB header was answered 200, buffered whole): past
``MAX_HEAD_BYTES`` of URL and headers the answer is 431. (uvicorn's h11 protocol has its own 16 KB limit.)

At shutdown uvicorn closes at once every connection without a request in progress: one a client had just
opened, or one it was about to reuse, and a request being written on it met a reset (EPIPE, flooding a
790 KB-tensor model with 16 clients: tools/serve_sigterm_flood.py). Such a connection gets ``IDLE_GRACE_S`` to
begin a request, which the server then refuses (503, Connection: close) like every request while it drains.

A connection closed while its request's body is still arriving is reset by the kernel, and the client, still
writing, meets EPIPE or ECONNRESET instead of reading the answer waiting for it (a 503 while the server drains,
a 400 for a broken chunk). The in-app discard (http_body.BodyWatch) reads up to 2 s of such a body first; a slow
upload outlasts it. So the close lingers, as nginx's lingering_close does: the answer goes out, then a FIN
(half close), and what the client still sends is read and dropped until it closes its side, sends nothing for
``LINGER_IDLE_S``, or ``LINGER_MAX_S`` have passed; then the connection closes."""

from __future__ import annotations

import json
import logging
import sys

log = logging.getLogger("edgeaccel.serve")
UVICORN_WORDS = "Invalid HTTP request received."
MAX_HEAD_BYTES = 64 << 10  # a request's URL and headers together (nginx's default allows 32 KB of headers)
IDLE_GRACE_S = 1.0  # at shutdown, what a connection without a request gets to begin one (last_call.READ_S's time)
LINGER_IDLE_S = 2.0  # a lingering close ends once the client sent nothing this long (nginx's lingering_timeout)...
LINGER_MAX_S = 10.0  # ...or after this long in all (nginx: 30 s; here a shutdown waits for it)


def protocol_class() -> type:
    """uvicorn's own protocol class (httptools where installed, else h11) with this module's answer to a parse
    error, its grace for idle connections at shutdown, and its lingering close."""
    try:
        import httptools  # noqa: F401

        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as Base
    except ImportError:
        from uvicorn.protocols.http.h11_impl import H11Protocol as Base
    logging.getLogger("uvicorn.error").addFilter(_not_parse_errors)

    class Protocol(Base):
        head_bytes = 0

        def connection_made(self, transport) -> None:
            super().connection_made(Lingering(transport, self))

        def data_received(self, data: bytes) -> None:
            if self.transport.lingering:  # the rest of a body nobody will read: dropped, not parsed
                self.transport.received()
                return
            super().data_received(data)

        def shutdown(self) -> None:
            if self.cycle is None or self.cycle.response_complete:  # idle: a request may be on its way
                self.loop.call_later(IDLE_GRACE_S, self._close_unless_busy)
            else:
                super().shutdown()

        def _close_unless_busy(self) -> None:
            if not self.transport.is_closing():
                super().shutdown()  # closes it now, or after the response of a request begun meanwhile

        def on_message_begin(self) -> None:  # httptools' callbacks (h11 has none: body_arriving asks h11)
            self.head_bytes = 0
            self.body_done = False
            super().on_message_begin()

        def on_message_complete(self) -> None:
            self.body_done = True  # noted even after the answer (uvicorn stops noting it then)
            super().on_message_complete()

        def body_arriving(self) -> bool:
            """The current request's body has not all come."""
            conn = getattr(self, "conn", None)
            if conn is not None:  # h11
                import h11

                return conn.their_state is h11.SEND_BODY
            return self.cycle is not None and not getattr(self, "body_done", True)

        def on_url(self, url: bytes) -> None:
            self._count(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._count(len(name) + len(value))
            super().on_header(name, value)

        def _count(self, n: int) -> None:
            self.head_bytes += n
            if self.head_bytes > MAX_HEAD_BYTES:  # the parser stops: uvicorn answers through send_400_response
                raise ValueError("head too large")

        def send_400_response(self, msg: str) -> None:
            if self.head_bytes > MAX_HEAD_BYTES:
                status, text = b"431 Request Header Fields Too Large", (
                    f"the request's URL and headers are more than {MAX_HEAD_BYTES} bytes; send large data in "
                    "the body")
            else:
                reason = sys.exc_info()[1]  # called inside uvicorn's `except` for the parser's error
                why = " ".join(str(reason).split())[:200] if reason is not None and str(reason) else msg.rstrip(".")
                status, text = b"400 Bad Request", (f"the request is not valid HTTP/1.1 ({why}); send a request "
                                                    "line, headers, and a body of exactly its Content-Length "
                                                    "(or chunked)")
            log.debug("unparsable HTTP request: %s", text)
            body = json.dumps({"error": text}).encode()
            self.transport.write(b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\nconnection: "
                                 b"close\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            self.transport.close()

    return Protocol


class Lingering:
    """A connection's transport whose ``close()`` lingers while the request's body is still arriving (the
    module's docstring says why); everything else is the transport's own."""

    def __init__(self, transport, protocol) -> None:
        self._transport, self._protocol = transport, protocol
        self.lingering = False
        self._ends = 0.0
        self._timer = None

    def __getattr__(self, name: str):
        return getattr(self._transport, name)

    def is_closing(self) -> bool:
        return self.lingering or self._transport.is_closing()

    def write(self, data) -> None:
        if not self.lingering:  # after the FIN nothing more can go out (the transport would raise)
            self._transport.write(data)

    def writelines(self, data) -> None:
        if not self.lingering:
            self._transport.writelines(data)

    def close(self) -> None:
        transport = self._transport
        if self.lingering or transport.is_closing():
            return
        cycle = self._protocol.cycle
        if cycle is None or cycle.disconnected or not self._protocol.body_arriving() or not transport.can_write_eof():
            transport.close()
            return
        if not cycle.response_complete:  # closed under the app (a parse error's 400): it reads the end, sends nothing
            cycle.disconnected = True
            cycle.message_event.set()
        self.lingering = True
        transport.write_eof()  # after the answer already written: the client reads it, then the end
        transport.resume_reading()  # uvicorn may have paused reading while the body was buffered
        self._ends = self._protocol.loop.time() + LINGER_MAX_S
        self.received()

    def received(self) -> None:
        """Bytes came while lingering: the client is still sending; wait for more, up to the limits."""
        loop = self._protocol.loop
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(min(loop.time() + LINGER_IDLE_S, self._ends), self._transport.close)


def _not_parse_errors(record: logging.LogRecord) -> bool:
    return record.getMessage() != UVICORN_WORDS
