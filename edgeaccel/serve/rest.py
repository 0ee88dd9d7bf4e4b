"""The Open Inference Protocol over HTTP/REST, as a small ASGI app served by uvicorn.

A plain ASGI callable rather than a framework: the protocol has a dozen fixed routes, the binary tensor
extension needs the raw body anyway, and the app stays free of a dependency that the gRPC side does not need.

Routes: ``/v2/health/live``, ``/v2/health/ready``, ``/v2`` (server metadata), ``/v2/models/{m}[/versions/{v}]``
(metadata), ``.../ready``, ``.../config`` (Triton's model configuration, the tensors and batching part),
``.../infer`` (JSON tensors and the binary tensor extension:
``Inference-Header-Content-Length``, ``binary_data_size``, ``binary_data`` / ``binary_data_output``), the
repository extension (``/v2/repository/index``, ``/v2/repository/models/{m}/load`` and ``/unload``) and
``/metrics``. Every error is ``{"error": "..."}`` with its status.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import re
import time
from typing import Any

import numpy as np

from .. import __version__
from .core import ServeCore
from .errors import ServeError
from .http_answer import Body, Waiter, body_length, respond
from .http_body import BodyWatch, Disconnected, read_body
from .repository import refuse_overrides
from . import predict_http
from .security import authorized
from .tasks import TaskService
from .rest_request import parameters, parse, parse_json, request_id as request_id_of, split, timeout_s
from .rest_response import HEADER_LENGTH, chosen_outputs, infer_response

log = logging.getLogger("edgeaccel.serve")
EXTENSIONS = ["binary_tensor_data", "model_repository", "metrics"]
MODEL_ROUTE = re.compile(r"^/v2/models/(?P<name>[^/]+)(?:/versions/(?P<version>[^/]+))?"
                         r"(?P<action>/ready|/infer|/config|/predict)?$")
REPO_ROUTE = re.compile(r"^/v2/repository/models/(?P<name>[^/]+)/(?P<action>load|unload)$")
GRACE_S = 5.0  # beyond a request's timeout, the most the HTTP side waits for the core's answer
PARSE_INLINE_BYTES = 1 << 20  # JSON parsed on the event loop up to this size; larger in a worker thread
RESPOND_INLINE_VALUES = 1 << 16  # answers with more output values are encoded in a worker thread too


# the request being answered (each runs in a context of its own): its app's core, whether draining, and its body
_REQUEST: contextvars.ContextVar[tuple[ServeCore, BodyWatch]] = contextvars.ContextVar("edgeaccel_request")


class RestApp:
    def __init__(self, core: ServeCore, metrics: Any, token: str | None = None,
                 max_request_bytes: int = 64 << 20) -> None:
        self.core = core
        self.metrics = metrics
        self.token = token
        self.max_request_bytes = max_request_bytes
        self.tasks = TaskService(core)  # images in, task results out (tasks.py, predict_http.py)
        self._in_flight = 0  # /infer requests begun and not answered (the loop's own count: no lock)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        headers = dict(scope["headers"])
        receive = BodyWatch(receive, self.max_request_bytes, headers)
        _REQUEST.set((self.core, receive))
        if not authorized(headers.get(b"authorization"), self.token):
            await _send_json(send, 401, {"error": "missing or wrong API token: send 'Authorization: Bearer <token>'"},
                             extra=[(b"www-authenticate", b"Bearer")])
            return
        method, path = scope["method"], scope["path"].rstrip("/") or "/"
        try:
            await self._route(method, path, headers, receive, send, scope.get("query_string", b""))
        except ServeError as exc:
            await _send_error(send, exc)
        except Disconnected:
            return
        except asyncio.CancelledError:  # uvicorn's shutdown stopped waiting for it (a body that never came whole):
            with contextlib.suppress(Exception):  # an answer, not a traceback in the log and a text/plain 500
                await _send_error(send, ServeError(503, "the server shut down before this request arrived whole; "
                                                        "send it again (to another instance)", retry_after=5))
        except Exception as exc:  # a bug of the server: logged whole, answered in one line, the server lives on
            log.exception("internal error on %s %s", method, path)
            await _send_error(send, ServeError(500, f"internal error: {type(exc).__name__}: {exc}"))

    async def _route(self, method: str, path: str, headers: dict, receive, send, query: bytes = b"") -> None:
        if path == "/v2/health/live":
            await _send_json(send, 200, {"live": True})
        elif path == "/v2/health/ready":
            await _send_json(send, 200 if self.core.ready else 503, {"ready": self.core.ready})
        elif path == "/v2":
            await _send_json(send, 200, {"name": "edgeaccel", "version": __version__, "extensions": EXTENSIONS})
        elif path == "/metrics":
            body, content_type = self.metrics.render()
            await _send(send, 200, body, content_type.encode())
        elif path == "/v2/repository/index":
            _method(method, "POST", "GET")
            body = await self._body(headers, receive)
            ready = parse_json(body).get("ready", False) if body.strip() else False
            if not isinstance(ready, bool):  # bool("false") is True: a string here is a mistake to say, not guess
                raise ServeError(400, f"'ready' is true or false, not {ready!r}")
            await _send_json(send, 200, self.core.index(ready_only=ready))
        elif (m := REPO_ROUTE.match(path)) is not None:
            _method(method, "POST")
            body = await self._body(headers, receive)
            if m["action"] == "load" and body.strip():
                refuse_overrides(parameters(parse_json(body), "the load request"), m["name"])
            action = self.core.load if m["action"] == "load" else self.core.unload
            await asyncio.get_running_loop().run_in_executor(None, action, m["name"])
            await _send_json(send, 200, {})
        elif (m := MODEL_ROUTE.match(path)) is not None:
            name, version, action = m["name"], m["version"] or "", m["action"]
            if action == "/infer":
                _method(method, "POST")
                await self._infer(name, version, headers, receive, send)
            elif action == "/predict" and method == "GET":
                self.tasks.task_of(name, version)
                await _send(send, 200, predict_http.page(name), b"text/html; charset=utf-8")
            elif action == "/predict":
                _method(method, "POST", "GET")
                await self._predict(name, version, headers, receive, send, query)
            elif action == "/ready":
                self.core.get(name, version)
                await _send_json(send, 200, {"name": name, "ready": True})
            elif action == "/config":
                await _send_json(send, 200, self.core.config(name, version))
            else:
                await _send_json(send, 200, self.core.metadata(name, version))
        else:
            raise ServeError(404, f"no route {method} {path}: see the Open Inference Protocol's /v2 routes")

    async def _body(self, headers: dict, receive) -> bytes:
        return await read_body(headers, receive, self.max_request_bytes, draining=lambda: not self.core.ready)

    async def _infer(self, name: str, version: str, headers: dict, receive, send) -> None:
        started = time.perf_counter()
        request_id, status, error = "", 200, None
        self._in_flight += 1
        try:
            self.core.get(name, version)  # an unknown model is a 404 before its body is read,
            self.core.check_room()  # and a full queue a 503: a flood of large bodies is not buffered to be refused
            body = await self._body(headers, receive)
            if (images := self._images(name, version, body, headers)) is not None:
                request, images = images
                request_id = request_id_of(request)
                payload, extra = await predict_http.infer_images(self.tasks, name, version, request, images,
                                                                 timeout_s(request.get("parameters")))
                await _send(send, 200, payload, *extra)
                return
            if len(body) > PARSE_INLINE_BYTES:  # a big JSON body takes a while to parse: not on the event loop,
                request, inputs = await asyncio.get_running_loop().run_in_executor(  # where others wait
                    None, parse, body, headers.get(HEADER_LENGTH))
            else:
                request, inputs = parse(body, headers.get(HEADER_LENGTH))
            request_id = request_id_of(request)
            timeout = timeout_s(request.get("parameters"))
            here = await self._here(name)
            waiter = Waiter((timeout or self.core.options.timeout_s) + GRACE_S)  # before the submit (why: there)
            try:
                future = self.core.infer(name, inputs, version, timeout, here=here)
            except BaseException:
                waiter.close()
                raise
            try:
                outputs = await waiter.result(future)
            except TimeoutError:
                raise ServeError(504, f"model '{name}' did not answer within {waiter.wait_s:g} s") from None
            chosen = chosen_outputs(name, request, outputs)
            if sum(np.size(outputs[n]) for n, binary in chosen if not binary) > RESPOND_INLINE_VALUES:
                payload, extra = await asyncio.get_running_loop().run_in_executor(  # JSON of 1M floats: 0.5 s,
                    None, infer_response, name, request, outputs, chosen)  # every client waiting on it
            else:  # binary outputs are views of the arrays: nothing to take off the loop
                payload, extra = infer_response(name, request, outputs, chosen)
            await _send(send, 200, payload, *extra)
        except ServeError as exc:
            status, error = exc.status, exc.message
            await _send_error(send, exc)
        except Disconnected:
            status, error = 499, "the client disconnected before its request was read"
            raise
        except BaseException as exc:  # a bug (__call__ answers 500) or the shutdown's cancel (503): never counted 200
            status, error = (503 if isinstance(exc, asyncio.CancelledError) else 500), f"{type(exc).__name__}: {exc}"
            raise
        finally:
            self._in_flight -= 1
            self.metrics.request(name, "http", status, time.perf_counter() - started, request_id, error)

    async def _here(self, name: str) -> float:
        """How long a run this request may make on the event loop (``ServeCore.quick``), where it is the only
        one: other requests whose heads the loop read in the same pass have tasks that have not run yet, so
        they count nowhere. One turn of the loop lets them begin (and count) first; without it, requests
        arriving together ran one by one on the loop while the device could take them side by side."""
        if not self.core.quick(name):
            return 0.0
        await asyncio.sleep(0)
        return self.core.quick(name) if self._in_flight == 1 else 0.0


    def _images(self, name: str, version: str, body: bytes, headers: dict) -> tuple[dict, list[bytes]] | None:
        """An /infer request of BYTES inputs for a model with a task: its encoded images; None otherwise."""
        length = headers.get(HEADER_LENGTH)
        head = body[:int(length)] if length is not None and length.isdigit() else body
        if b'"BYTES"' not in head:  # a tensor request (the common case) pays one substring search
            return None
        if not self.tasks.has_task(name, version):
            return None  # a tensor model: its BYTES input is refused as any string tensor is
        request, binary = split(body, headers.get(HEADER_LENGTH))
        parameters(request, "the request")
        images = predict_http.bytes_inputs(request, binary)
        return None if images is None else (request, images)

    async def _predict(self, name: str, version: str, headers: dict, receive, send, query: bytes) -> None:
        started = time.perf_counter()
        status, error = 200, None
        try:
            self.tasks.task_of(name, version)  # 404 / no task before the body is read,
            self.core.check_room()  # and a full queue a 503
            body = await self._body(headers, receive)
            payload = await predict_http.predict(self.tasks, name, version, body, headers,
                                                 predict_http.query_options(query))
            await _send(send, 200, payload, b"application/json")
        except ServeError as exc:
            status, error = exc.status, exc.message
            await _send_error(send, exc)
        except Disconnected:
            status, error = 499, "the client disconnected before its request was read"
            raise
        except BaseException as exc:
            status, error = (503 if isinstance(exc, asyncio.CancelledError) else 500), f"{type(exc).__name__}: {exc}"
            raise
        finally:
            self.metrics.request(name, "http", status, time.perf_counter() - started, "", error)


def _method(method: str, *allowed: str) -> None:
    if method not in allowed:
        raise ServeError(405, f"use {' or '.join(allowed)} here, not {method}")


async def _send_error(send, exc: ServeError) -> None:
    extra = [(b"retry-after", str(exc.retry_after).encode())] if exc.retry_after else []
    if exc.close_connection:
        extra.append((b"connection", b"close"))
    await _send_json(send, exc.status, {"error": exc.message}, extra=extra)


async def _send_json(send, status: int, value: Any, extra: list | None = None) -> None:
    await _send(send, status, json.dumps(value, separators=(",", ":")).encode(), b"application/json", extra)


async def _send(send, status: int, body: Body, content_type: bytes, extra: list | None = None) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(body_length(body)).encode()),
               *(extra or [])]
    request = _REQUEST.get(None)
    if request is not None:
        core, body_watch = request
        closing = (b"connection", b"close") in headers
        if not core.ready and not closing:
            # shutting down: no answer invites the client to reuse its connection, which uvicorn closes once the
            # accepted requests are answered (a request written on it then is reset: tools/serve_sigterm_flood.py)
            headers.append((b"connection", b"close"))
            closing = True
        if closing:  # the rest of a body not read first: closing with it unread resets the client's upload
            await body_watch.discard()
    await respond(send, status, body, headers)


async def _lifespan(receive, send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
