"""The server's edges that need no server: a body that stops arriving, gRPC's wait for clients to go quiet
before it stops, a SIGTERM before the server listens (early_stop), and what HTTP answers while it drains."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from edgeaccel.serve.errors import ServeError


def _stalled_body(draining: bool) -> ServeError:
    from edgeaccel.serve.http_body import read_body

    async def receive():  # half a body came, the rest never will
        await asyncio.sleep(3600)

    async def main():
        with pytest.raises(ServeError) as err:
            await read_body({b"content-length": b"100"}, receive, 1 << 20, idle_s=0.05, draining=lambda: draining)
        assert not asyncio.current_task().cancelling()  # our own cancel is taken back: the task goes on
        return err.value

    return asyncio.run(asyncio.wait_for(main(), 10))


def test_a_body_that_stops_arriving_is_408_or_the_shutdowns_503():
    stalled = _stalled_body(draining=False)
    assert stalled.status == 408 and "stopped arriving" in stalled.message and stalled.close_connection
    shutting = _stalled_body(draining=True)
    assert shutting.status == 503 and shutting.retry_after == 5 and "send it again" in shutting.message


def test_a_body_that_arrives_in_pieces_is_read_whole():
    from edgeaccel.serve.http_body import read_body

    pieces = iter([b'{"a"', b":1", b"}"])

    async def receive():
        await asyncio.sleep(0.01)
        piece = next(pieces)
        return {"type": "http.request", "body": piece, "more_body": piece != b"}"}

    assert asyncio.run(read_body({}, receive, 100, idle_s=1.0)) == b'{"a":1}'


def test_grpc_stops_once_no_rpc_came_for_a_moment_or_at_the_limit(monkeypatch):
    from types import SimpleNamespace

    from edgeaccel.serve import server

    quiet = SimpleNamespace(last_arrival=time.monotonic() - 10, in_transit=lambda: 0)
    started = time.monotonic()
    asyncio.run(server._no_arrivals(quiet))
    assert time.monotonic() - started < server.HOLD_S + 0.5

    monkeypatch.setattr(server, "HOLD_QUIET_MAX_S", 0.4)
    busy = SimpleNamespace(last_arrival=time.monotonic(), in_transit=lambda: 0)

    async def keep_sending():
        task = asyncio.create_task(server._no_arrivals(busy))
        while not task.done():
            busy.last_arrival = time.monotonic()
            await asyncio.sleep(0.01)
        return task

    started = time.monotonic()
    asyncio.run(keep_sending())
    assert 0.4 <= time.monotonic() - started < 2.0  # waited for quiet, bounded


def test_a_signal_while_loading_interrupts_the_load_and_one_after_only_marks():
    from edgeaccel.serve.early_stop import EarlyStop, StoppedEarly

    before = {sig: signal.getsignal(sig) for sig in EarlyStop.SIGNALS}
    try:
        early = EarlyStop()
        with pytest.raises(StoppedEarly):
            with early:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)  # the handler raises in the main thread before this ends
        assert early.signalled == "SIGTERM"
        later = EarlyStop().install()
        os.kill(os.getpid(), signal.SIGTERM)  # after the loads: marked, nothing raised, the process lives
        time.sleep(0.05)
        assert later.signalled == "SIGTERM"
        with pytest.raises(StoppedEarly):  # a load that starts after a signal stops at once
            with later:
                pass
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def test_the_last_call_filter_lets_queued_connections_in_and_no_new_one():
    """What closes HTTP's last race: once the filter is on, a connection already queued is still accepted and
    answered, and a new one cannot complete (its SYN is dropped; after the close it is refused, not reset)."""
    import socket

    from edgeaccel.serve.last_call import _refuse_new_connections

    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen(8)
    port = listening.getsockname()[1]
    with socket.create_connection(("127.0.0.1", port)) as queued:
        queued.sendall(b"GET / HTTP/1.1\r\n\r\n")
        if not _refuse_new_connections(listening):
            listening.close()
            pytest.skip("no socket filters on this system")
        with pytest.raises(TimeoutError):
            socket.create_connection(("127.0.0.1", port), timeout=0.3)
        accepted, _ = listening.accept()
        with accepted:
            assert accepted.recv(100).startswith(b"GET / ")
    listening.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5)


def test_a_signal_that_lands_where_python_cannot_raise_is_raised_again_not_printed(capsys):
    """The handler's exception inside a weakref callback (importlib has them) was "Exception ignored in", a
    traceback on stderr, and the load went on: it is raised again at the next point that can raise."""
    import weakref

    from edgeaccel.serve.early_stop import EarlyStop, StoppedEarly

    class Thing:
        pass

    before = {sig: signal.getsignal(sig) for sig in EarlyStop.SIGNALS}
    try:
        early = EarlyStop()
        with pytest.raises(StoppedEarly):
            with early:
                thing = Thing()
                ref = weakref.ref(thing, lambda _: early._handle(signal.SIGTERM, None))  # a signal in a callback
                del thing
                time.sleep(5)  # raised again before this ends
        assert ref() is None
        assert "Exception ignored" not in capsys.readouterr().err
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def test_grpc_stops_only_once_no_call_is_in_transit(monkeypatch):
    """A call whose head came in while its large message was still arriving is not begun yet: the stop waits
    for its handler to begin (gRPC's core would CANCEL it), at most HOLD_QUIET_MAX_S."""
    from edgeaccel.serve import server
    from edgeaccel.serve.grpc_api import InferenceServicer

    servicer = InferenceServicer(None, None)
    servicer.last_arrival = time.monotonic() - 10
    token = servicer.arriving()  # its head, just now
    servicer.last_arrival = time.monotonic() - 10  # and nothing else came for a while

    async def begin_later():
        await asyncio.sleep(0.3)
        servicer.begun(token)

    async def main():
        started = time.monotonic()
        begun = asyncio.create_task(begin_later())
        await server._no_arrivals(servicer)
        await begun
        return time.monotonic() - started

    assert 0.3 <= asyncio.run(main()) < server.HOLD_QUIET_MAX_S + 0.5
    assert servicer.in_transit() == 0
    servicer.arriving()  # one that never begins (its client gave up): the stop waits at most the limit
    monkeypatch.setattr(server, "HOLD_QUIET_MAX_S", 0.3)
    started = time.monotonic()
    asyncio.run(server._no_arrivals(servicer))
    assert 0.3 <= time.monotonic() - started < 1.5


class _Draining:
    """A core shutting down: every new request is refused before its body is read (ServeCore.check_room)."""

    ready = False
    last_refusal = 0.0

    def get(self, name, version=""):
        return None

    def check_room(self):
        error = ServeError(503, "the server is shutting down; send the request to another instance", retry_after=5)
        error.close_connection = True
        raise error


def _refused(pieces: list[bytes], delay_s: float = 0.0, headers: list | None = None) -> tuple[list[dict], list[bytes]]:
    """An /infer request to a RestApp whose core is shutting down: what it sent, and the pieces of the body it
    read before answering."""
    from edgeaccel.serve.metrics import Metrics
    from edgeaccel.serve.rest import RestApp

    app = RestApp(_Draining(), Metrics())
    left, read, sent = list(pieces), [], []

    async def receive():
        await asyncio.sleep(delay_s)
        piece = left.pop(0)
        read.append(piece)
        return {"type": "http.request", "body": piece, "more_body": bool(left)}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v2/models/m/infer", "query_string": b"",
             "headers": [(b"content-length", str(sum(map(len, pieces))).encode()), *(headers or [])]}
    asyncio.run(asyncio.wait_for(app(scope, receive, send), 30))
    return sent, read


def test_a_refusal_that_closes_the_connection_reads_the_body_first():
    """Closing a socket with data unread resets it: a client still writing a large body (a 790 KB tensor) got
    EPIPE instead of its 503. The rest of the body is read (and dropped) before the 503 goes out."""
    pieces = [b"x" * 65536] * 12
    sent, read = _refused(pieces)
    assert read == pieces
    start = sent[0]
    assert start["status"] == 503 and (b"connection", b"close") in start["headers"]
    assert (b"retry-after", b"5") in start["headers"]


def test_a_slow_body_holds_the_refusal_for_discard_s_at_most(monkeypatch):
    from edgeaccel.serve import http_body

    monkeypatch.setattr(http_body, "DISCARD_S", 0.2)
    started = time.monotonic()
    sent, read = _refused([b"x"] * 100, delay_s=0.05)  # 5 s of body: given up after 0.2 s
    assert sent[0]["status"] == 503 and 0 < len(read) < 100
    assert time.monotonic() - started < 3


def test_a_client_that_waits_for_100_continue_is_refused_without_being_asked_for_its_body():
    """curl sends Expect: 100-continue before a large upload: reading would ask for the body it then sends in
    vain; answered at once, it sends nothing that could be left unread."""
    sent, read = _refused([b"x" * 65536] * 4, headers=[(b"expect", b"100-continue")])
    assert sent[0]["status"] == 503 and read == []


def test_every_answer_that_closes_its_connection_reads_the_body_first():
    """Not only the 503: an unknown model's 404 while the server drains closes the connection too."""
    sent, read = _refused([b"x" * 65536] * 4)
    assert read and sent[0]["status"] == 503
    from edgeaccel.serve.metrics import Metrics
    from edgeaccel.serve.rest import RestApp

    class Unknown(_Draining):
        def get(self, name, version=""):
            raise ServeError(404, f"no model named {name!r}")

    app, left, messages = RestApp(Unknown(), Metrics()), [b"y" * 65536] * 3, []

    async def receive():
        return {"type": "http.request", "body": left.pop(0), "more_body": len(left) > 1}

    async def send(message):
        messages.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v2/models/nope/infer", "query_string": b"", "headers": []}
    asyncio.run(asyncio.wait_for(app(scope, receive, send), 30))
    assert messages[0]["status"] == 404 and (b"connection", b"close") in messages[0]["headers"] and len(left) == 1


def test_answers_sent_while_the_server_drains_close_their_connection():
    """A keep-alive client answered while the server drains would write its next request on a connection
    uvicorn closes once the accepted requests are answered: every answer then says Connection: close."""
    from edgeaccel.serve import rest
    from edgeaccel.serve.http_body import BodyWatch

    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    async def nothing():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def answer(core):
        rest._REQUEST.set((core, BodyWatch(nothing, 100)))
        await rest._send(send, 200, b"{}", b"application/json")

    asyncio.run(answer(_Draining()))
    asyncio.run(answer(type("Serving", (), {"ready": True})()))
    closing, open_ = sent[0]["headers"], sent[2]["headers"]
    assert (b"connection", b"close") in closing and (b"connection", b"close") not in open_


class _Transport:
    """What the lingering close asks of uvloop's transport, recorded."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.closing = False

    def write(self, data) -> None:
        if "write_eof" in self.calls:
            raise RuntimeError("Cannot call write() after write_eof()")  # uvloop's and asyncio's answer
        self.calls.append("write")

    def write_eof(self) -> None:
        self.calls.append("write_eof")

    def can_write_eof(self) -> bool:
        return True

    def resume_reading(self) -> None:
        self.calls.append("resume_reading")

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.calls.append("close")
        self.closing = True


class _Cycle:
    def __init__(self, response_complete: bool) -> None:
        self.response_complete, self.disconnected = response_complete, False
        self.message_event = asyncio.Event()


class _Protocol:
    def __init__(self, cycle, arriving: bool, loop) -> None:
        self.cycle, self.arriving, self.loop = cycle, arriving, loop

    def body_arriving(self) -> bool:
        return self.arriving


def test_a_close_lingers_only_while_a_body_arrives_and_ends_at_the_idle_limit(monkeypatch):
    from edgeaccel.serve import http_protocol
    from edgeaccel.serve.http_protocol import Lingering

    monkeypatch.setattr(http_protocol, "LINGER_IDLE_S", 0.05)

    async def scenario():
        loop = asyncio.get_running_loop()
        done = Lingering(_Transport(), _Protocol(_Cycle(True), False, loop))
        done.close()
        assert done._transport.calls == ["close"], "a whole body: closed at once"
        transport = _Transport()
        lingering = Lingering(transport, _Protocol(_Cycle(True), True, loop))
        lingering.close()
        assert transport.calls == ["write_eof", "resume_reading"] and lingering.is_closing()
        await asyncio.sleep(0.03)
        lingering.received()  # the client is still sending: the idle limit starts again
        await asyncio.sleep(0.03)
        assert "close" not in transport.calls
        await asyncio.sleep(0.05)
        assert transport.calls[-1] == "close"

    asyncio.run(scenario())


def test_a_close_under_an_app_still_answering_drops_its_answer_and_tells_it():
    """A parse error's 400 closes while the app's task (begun on the head) has not answered: its answer is not
    written after the FIN (the transport would raise: 'Exception in ASGI application'), and its body read ends."""
    from edgeaccel.serve.http_protocol import Lingering

    async def scenario():
        transport, cycle = _Transport(), _Cycle(False)
        lingering = Lingering(transport, _Protocol(cycle, True, asyncio.get_running_loop()))
        lingering.close()
        assert cycle.disconnected and cycle.message_event.is_set()
        lingering.write(b"HTTP/1.1 200 OK\r\n\r\n")
        assert "write" not in transport.calls

    asyncio.run(scenario())
