"""The HTTP side's last moments at shutdown: connections that reach the listening socket after uvicorn stopped
accepting are answered 503, not reset.

Closing a listening socket resets every connection waiting in its backlog (the client had connected and sent
its request; it reads ECONNRESET). So uvicorn serves a duplicate of the socket; once it has stopped accepting,
``refuse_backlog`` accepts from the original for a moment, answers each request 503 with Retry-After and
``Connection: close``, and closes the socket right after an accept finds nothing waiting: only a connection
completing its handshake in those microseconds can still be reset. A client connecting later is refused
(ECONNREFUSED), which says plainly that no server listens here any more."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket

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
            sock.close()  # right after an accept found the backlog empty
            break
        await asyncio.sleep(POLL_S)
    if tasks:
        await asyncio.wait(tasks, timeout=READ_S * 3)
    return answered


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
