"""Both protocols in one process over one ServeCore: uvicorn for HTTP on the event loop, grpcio's thread-pool
server for gRPC (why: grpc_api.py); graceful shutdown on SIGTERM (or SIGINT): stop accepting connections and
RPCs, answer every request already accepted, close the models, return 0.

A line on stdout says where the server listens once it does (``edgeaccel serve: ready http://127.0.0.1:8000
grpc 127.0.0.1:8001``): with port 0 the system picks a free port, and that line names it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import sys
from dataclasses import dataclass
from typing import Any

from .core import ServeCore
from .grpc_api import ArrivalWatch, InferenceServicer, add_to_server
from .metrics import Metrics
from .rest import GRACE_S, RestApp

log = logging.getLogger("edgeaccel.serve")
QUIET_S = 0.25  # at shutdown, refusing stops once no request came for this long...
LINGER_S = 2.0  # ...or after this long at most; then the ports close
HOLD_S = 0.1  # gRPC: refusals held this long before the stop and after it (grpc_api.InferenceServicer.holding)
HOLD_QUIET_MAX_S = 1.0  # ...and before the stop until no RPC came for HOLD_S, at most this long (< HOLD_MAX_S)
LAST_CALL_S = 0.2  # after HTTP stops accepting, requests on connections it accepted still get their 503
GRPC_SPARE_THREADS = 8  # gRPC handler threads beyond --max-queue: refusals and metadata while the queue is full


@dataclass
class Listen:
    host: str = "127.0.0.1"
    port: int = 8000
    grpc_port: int | None = 8001
    token: str | None = None
    max_request_bytes: int = 64 << 20


def serve(core: ServeCore, metrics: Metrics, listen: Listen, announce=print, early: Any = None) -> int:
    """Serve until SIGTERM/SIGINT; 0 after a graceful shutdown. On uvloop where it is installed (the serve
    extra brings it): the server's CPU time per HTTP request (read from /proc over 2,000 sequential requests of
    a tiny ONNX model, two runs each, a loaded 2-core machine) went from 650-850 to 480-500 us, time a small
    board takes from inference. ``early``: the EarlyStop that watched the signals while the models loaded; one
    that came after the loads, before the event loop took the signals over, stops the server before it binds."""
    import importlib.util

    if importlib.util.find_spec("httptools") is None:  # uvicorn falls back to h11: +0.6 ms a 150 KB request here
        log.info("httptools is not installed: uvicorn parses HTTP with h11, in Python (pip install httptools: faster)")
    try:
        import uvloop
    except ImportError:
        log.info("uvloop is not installed: serving on asyncio's own event loop (pip install uvloop: faster)")
        return asyncio.run(_serve(core, metrics, listen, announce, early))
    return uvloop.run(_serve(core, metrics, listen, announce, early))


async def _serve(core: ServeCore, metrics: Metrics, listen: Listen, announce, early: Any = None) -> int:
    try:
        return await _serve_until_stopped(core, metrics, listen, announce, early)
    finally:
        _signals_after_the_loop()


def _signals_after_the_loop() -> None:
    """Closing the event loop puts SIGTERM back to its default action: an orchestrator's second SIGTERM (or a
    client's ``terminate()`` racing the exit) then ended a server that had shut down cleanly with -15 instead of
    0. The loop's handlers give way to ignoring the signal (early_stop.exiting; removing a loop handler sets the
    default action for the microseconds until the next line)."""
    from .early_stop import EarlyStop, exiting

    loop = asyncio.get_running_loop()
    for sig in EarlyStop.SIGNALS:
        loop.remove_signal_handler(sig)
    exiting()


async def _serve_until_stopped(core: ServeCore, metrics: Metrics, listen: Listen, announce, early: Any) -> int:
    import uvicorn

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if early is not None and early.signalled:  # came after the loads, before these handlers: no port yet
        await loop.run_in_executor(None, core.close)
        log.info("%s before serving; stopped: answered 0 of the 0 requests accepted", early.signalled)
        return 0
    sock = _listen_socket(listen.host, listen.port)
    app = RestApp(core, metrics, listen.token, listen.max_request_bytes)
    from .http_protocol import protocol_class

    # proxy_headers off: nothing here reads the client's address, and the middleware ran on every request
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", proxy_headers=False,
                            http=protocol_class(),
                            timeout_graceful_shutdown=int(core.options.timeout_s + GRACE_S) + 1)
    http = _Server(config, sock, listen.max_request_bytes)
    # uvicorn gets a duplicate: the original stays open past uvicorn's close for last_call.refuse_backlog
    http_task = asyncio.create_task(http.serve(sockets=[sock.dup()]))
    grpc_server, grpc_port, servicer = _start_grpc(core, metrics, listen)
    while not http.started and not http_task.done():
        await asyncio.sleep(0.01)
    if http_task.done():  # uvicorn could not start: say why, stop gRPC
        if grpc_server is not None:
            grpc_server.stop(0)
        http_task.result()
        return 1
    host = f"[{listen.host}]" if ":" in listen.host else listen.host
    where = f"http://{host}:{sock.getsockname()[1]}"
    if grpc_port is not None:
        where += f" grpc {host}:{grpc_port}"
    announce(f"edgeaccel serve: ready {where}")
    sys.stdout.flush()
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait({stopped, http_task}, return_when=asyncio.FIRST_COMPLETED)
    # Refuse first, stop the transports last: while both still listen, a request that arrives is answered 503
    # (gRPC UNAVAILABLE, what clients' retry policies retry) and every accepted one runs to its answer. Stopping
    # gRPC at the signal cancelled the RPCs it had received but not yet handed to a thread (CANCELLED, which
    # clients do not retry), and closing HTTP's socket reset the connections waiting in its backlog.
    log.info("shutting down: refusing new requests; answering the %d accepted request(s)", core.pending)
    grace = core.options.timeout_s + GRACE_S
    core.refuse()
    if not http_task.done():
        await loop.run_in_executor(None, core.drain, grace)
        await _quiet(core)
    log.info("stopping the transports")
    http.should_exit = True
    waits = [http_task]
    if grpc_server is not None:  # stop() refuses new RPCs now; its event is set once the running ones are done
        servicer.holding.set()  # refusals wait, so their clients send nothing while the GOAWAY goes out
        await _no_arrivals(servicer)
        waits.append(loop.run_in_executor(None, grpc_server.stop(grace).wait))
        await asyncio.sleep(HOLD_S)
        servicer.released.set()
    await asyncio.gather(*waits, return_exceptions=True)
    stopped.cancel()
    await loop.run_in_executor(None, core.close)
    log.info("stopped: answered %d of the %d requests accepted", core.answered, core.accepted)
    return 0


async def _quiet(core: ServeCore) -> None:
    """Keep refusing until clients have stopped sending (no refusal for QUIET_S), at most LINGER_S: a client in
    the middle of a flood gets its 503 and backs off instead of meeting a closed port mid-request."""
    import time

    deadline = time.monotonic() + LINGER_S
    while time.monotonic() < deadline:
        quiet_for = time.monotonic() - core.last_refusal
        if quiet_for >= QUIET_S:
            return
        await asyncio.sleep(min(QUIET_S - quiet_for, deadline - time.monotonic()) + 0.001)


async def _no_arrivals(servicer: Any) -> None:
    """Before gRPC stops: wait until no RPC has come in for HOLD_S (every client still sending is then held
    waiting for its refusal), at most HOLD_QUIET_MAX_S. grpc's core cancels a call that arrives after the stop
    began and before the client read the GOAWAY, or that no handler thread had taken yet: CANCELLED, which
    clients do not retry. A fixed HOLD_S missed a client whose thread had been off the CPU that long (seen
    under a 24-client flood on 2 cores), and quiet alone missed a call whose head had come in while its large
    message was still arriving (1 in 20 SIGTERMs flooding deeplabv3's 790 KB tensors): none may be in transit."""
    import time

    deadline = time.monotonic() + HOLD_QUIET_MAX_S
    await asyncio.sleep(HOLD_S)
    while time.monotonic() < deadline and (time.monotonic() - servicer.last_arrival < HOLD_S
                                           or servicer.in_transit()):
        await asyncio.sleep(0.01)


class _Server:
    """uvicorn's Server without its own signal handling (this loop handles SIGTERM for both protocols, and
    uvicorn would raise the signal again after its shutdown, ending the process with it instead of 0)."""

    def __new__(cls, config, listening: socket.socket, max_body: int):
        import uvicorn

        from .last_call import refuse_backlog

        class Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self):
                yield

            async def shutdown(self, sockets=None):
                # uvicorn closes the listening socket and, at once, every connection without a request in
                # progress: a request already on its way over such a connection met a reset. Stop accepting,
                # give those requests LAST_CALL_S to arrive and get their 503 (Connection: close), then go on.
                for server in self.servers:
                    server.close()
                backlog = asyncio.create_task(refuse_backlog(listening, LAST_CALL_S, max_body))
                await asyncio.sleep(LAST_CALL_S)
                await super().shutdown(sockets)
                await backlog

        return Server(config)


def check_ports(host: str, port: int, grpc_port: int | None) -> None:
    """Refuse ports that are taken before the models load (which may take a while): a user learns it at once.
    The ports are bound again for real once the models are in (0, a free port, is not checked)."""
    from ..errors import ConfigError

    if port and port == grpc_port:
        raise ConfigError(f"--port and --grpc-port are both {port}", hint="give HTTP and gRPC a port each")
    for number, option in ((port, "--port"), (grpc_port, "--grpc-port")):
        if not number:
            continue
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, number))
        except OSError as exc:
            raise ConfigError(f"cannot listen on {host}:{number} ({option}): {exc.strerror}",
                              hint=f"choose another {option} (0 picks a free one) or stop what holds it") from None
        finally:
            sock.close()


def _listen_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # uvicorn writes a response's head and body separately: with Nagle's algorithm on, the body waits for the
    # client's delayed ACK (40 ms on Linux). Connections accepted from this socket inherit TCP_NODELAY.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        from ..errors import ConfigError

        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}",
                          hint="choose another --port (0 picks a free one) or stop what holds it") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _start_grpc(core: ServeCore, metrics: Metrics, listen: Listen) -> tuple[Any, int | None, Any]:
    if listen.grpc_port is None:
        return None, None, None
    from concurrent.futures import ThreadPoolExecutor

    import grpc

    size = listen.max_request_bytes
    # a thread per accepted request waiting for its answer, and some for refusals and metadata (grpc_api.py)
    threads = ThreadPoolExecutor(core.options.max_queue + GRPC_SPARE_THREADS, thread_name_prefix="edgeaccel-grpc")
    servicer = InferenceServicer(core, metrics, listen.token)
    server = grpc.server(threads, interceptors=[ArrivalWatch(servicer)],
                         options=[("grpc.max_receive_message_length", size),
                                  ("grpc.max_send_message_length", max(size, 256 << 20)),
                                  ("grpc.so_reuseport", 0)])
    add_to_server(servicer, server)
    host = f"[{listen.host}]" if ":" in listen.host else listen.host
    from ..native_log import filtered_native_stderr

    try:
        with filtered_native_stderr(lambda line: "add_port.cc" in line):  # gRPC's own log of what we say below
            port = server.add_insecure_port(f"{host}:{listen.grpc_port}")
    except RuntimeError as exc:
        from ..errors import ConfigError

        raise ConfigError(f"cannot listen for gRPC on {host}:{listen.grpc_port}: {exc}",
                          hint="choose another --grpc-port (0 picks a free one), or --grpc-port off") from None
    server.start()
    return server, port, servicer
