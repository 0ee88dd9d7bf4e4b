"""The HTTP side's last moments at shutdown: connections that reach the listening socket after uvicorn stopped
accepting are answered 503, not reset.

Closing a listening socket resets every connection waiting in its backlog (the client had connected and sent
its request; it reads ECONNRESET). So uvicorn serves a duplicate of the socket; once it has stopped accepting,
``refuse_backlog`` accepts from the original for a moment, answers each request 503 with Retry-After and
``Connection: close``, and closes the socket. A connection completing its handshake between the last accept
and the close was still reset (seen about once in 50 SIGTERMs under a flood of clients reconnecting after each
503): on Linux a socket filter that drops every packet is attached to the listening socket first, so no new
connection can complete, the ones already queued are accepted and answered, and only then is the socket closed.
A client connecting meanwhile sees its SYN go unanswered, retries it, and is refused (ECONNREFUSED) once the
socket is closed, which says plainly that no server listens here any more."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import socket
import struct

SO_ATTACH_FILTER = 26  # Linux's socket option number (the socket module does not name it)
POLL_S = 0.005
READ_S = 1.0  # the longest a last-call client may take to send its request
MAX_HEAD = 64 << 10
BODY = json.dumps({"error": "the server is shutting down; send the request to another instance"}).encode()
ANSWER = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 5\r\n"
          b"connection: close\r\ncontent-length: " + str(len(BODY)).encode() + b"\r\n\r\n" + BODY)


async def refuse_backlog(sock: socket.socket, seconds: float, max_body: int) -> int:
    """Answer 503 to what reaches ``sock`` for ``seconds``, then close it; the number of connections answered."""
    loop = asyncio.get_running_loop()
    sock.setblocking(False)
    tasks: set[asyncio.Task] = set()
    answered = 0
    filtered = False
    end = loop.time() + seconds
    while True:
        while True:
            try:
                conn, _ = sock.accept()
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                end = 0.0
                break
            answered += 1
            task = loop.create_task(_answer(conn, max_body))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if loop.time() >= end:
            if not filtered:
                filtered = True
                if _refuse_new_connections(sock):
                    continue  # accept what completed before the filter, then close
            sock.close()  # right after an accept found the backlog empty
            break
        await asyncio.sleep(POLL_S)
    if tasks:
        await asyncio.wait(tasks, timeout=READ_S * 3)
    return answered


def _refuse_new_connections(sock: socket.socket) -> bool:
    """Attach a classic BPF program that drops every packet (``ret #0``) to the listening socket: SYNs go
    unanswered from now on, connections already queued stay acceptable. False where the system has no such
    option (then the close's narrow race stays)."""
    program = ctypes.create_string_buffer(struct.pack("HBBI", 0x06, 0, 0, 0))  # BPF_RET | BPF_K, 0
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, struct.pack("HP", 1, ctypes.addressof(program)))
    except OSError:
        return False
    return True


async def _answer(conn: socket.socket, max_body: int) -> None:
    loop = asyncio.get_running_loop()
    conn.setblocking(False)
    try:
        if not await asyncio.wait_for(_read_request(loop, conn, max_body), READ_S):
            return
        await loop.sock_sendall(conn, ANSWER)
        conn.shutdown(socket.SHUT_WR)
        await asyncio.wait_for(_read_to_end(loop, conn), READ_S)
    except (OSError, asyncio.TimeoutError):
        pass
    finally:
        with contextlib.suppress(OSError):
            conn.close()


async def _read_request(loop, conn: socket.socket, max_body: int) -> bool:
    """Read a request's head and body (closing with unread bytes would reset the connection after all)."""
    data = b""
    while b"\r\n\r\n" not in data and len(data) < MAX_HEAD:
        chunk = await loop.sock_recv(conn, 65536)
        if not chunk:
            return False
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    left = min(_content_length(head), max_body) - len(body)
    while left > 0:
        chunk = await loop.sock_recv(conn, min(left, 1 << 20))
        if not chunk:
            return False
        left -= len(chunk)
    return True


async def _read_to_end(loop, conn: socket.socket) -> None:
    while await loop.sock_recv(conn, 65536):
        pass


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            return int(value.strip())
    return 0
