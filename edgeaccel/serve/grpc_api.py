"""The Open Inference Protocol over gRPC (grpcio's thread-pool server): KServe's GRPCInferenceService with the
repository methods tritonclient.grpc calls, on the same core as HTTP.

The thread-pool server rather than grpcio's asyncio one: measured with tritonclient.grpc against a servicer that
answers at once (150 KB requests, sequential, interleaved runs on a 2-core machine), a call took 0.86-0.98 ms
with it and 1.04-1.13 ms with the asyncio server on uvloop. A request waits for its answer in its handler
thread; the pool has ``--max-queue`` threads for them and a few more, so that a full queue is still refused at
once (UNAVAILABLE) and metadata calls are answered while every accepted request waits.

Tensors come in ``raw_input_contents`` (what tritonclient sends) or typed ``contents``; outputs go back in
``raw_output_contents``. Errors are gRPC status codes with the same messages HTTP gives (404 NOT_FOUND, 400
INVALID_ARGUMENT, 503 UNAVAILABLE, 504 DEADLINE_EXCEEDED, 401 UNAUTHENTICATED). A request's time limit is the
smaller of its gRPC deadline and its 'timeout' parameter (microseconds, as Triton's)."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict
from typing import Any

import grpc
import numpy as np

from .. import __version__
from .core import VERSION, ServeCore
from .errors import ServeError
from .proto import grpc_service_pb2 as pb
from .proto import grpc_service_pb2_grpc as pb_grpc
from .image_tensors import RESULT, check_count, join_bytes, result_bytes, split_bytes
from .repository import refuse_overrides
from .rest import EXTENSIONS, GRACE_S
from .security import authorized
from .task_options import from_parameters, grpc_values
from .tasks import TaskService
from .tensors import datatype_of, dtype_of, from_bytes, from_json, refuse_unserved, to_bytes

log = logging.getLogger("edgeaccel.serve")
NO_DEADLINE_S = 1e8  # time_remaining() beyond this: the client set no deadline (grpcio's thread-pool server
# reports one far beyond any wait a thread can make)
HOLD_MAX_S = 2.0  # the longest a refusal is held back while gRPC stops
IN_TRANSIT_KEEP_S = 10.0  # a call whose message has not come this long after its head is not waited for
# InferTensorContents field holding each datatype's values
CONTENTS = {"BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
            "INT64": "int64_contents", "UINT8": "uint_contents", "UINT16": "uint_contents", "UINT32": "uint_contents",
            "UINT64": "uint64_contents", "FP32": "fp32_contents", "FP64": "fp64_contents"}


class InferenceServicer(pb_grpc.GRPCInferenceServiceServicer):
    def __init__(self, core: ServeCore, metrics: Any, token: str | None = None) -> None:
        self.core = core
        self.metrics = metrics
        self.token = token
        self.tasks = TaskService(core)  # BYTES inputs of encoded images for a model with a task (tasks.py)
        # At shutdown (server.py): while gRPC stops, a refusal is held back (holding) until clients have had the
        # server's GOAWAY (released). A client held waiting sends nothing new meanwhile, and a call that arrived
        # after the stop began would be CANCELLED by gRPC's core instead of our UNAVAILABLE.
        self.holding = threading.Event()
        self.released = threading.Event()
        self.last_arrival = 0.0  # when an RPC last came in (server.py stops gRPC once none came for a moment)
        self._lock = threading.Lock()
        # RPCs whose head came in and whose handler has not begun, oldest first (ArrivalWatch)
        self._in_transit: OrderedDict[object, float] = OrderedDict()

    def arriving(self) -> object:
        """An RPC's head came in (ArrivalWatch): its message may still be on its way, or waiting for a thread."""
        token, now = object(), time.monotonic()
        with self._lock:
            while self._in_transit:  # heads whose message never came (the client gave up or timed out): forgotten
                oldest = next(iter(self._in_transit.values()))
                if now - oldest < IN_TRANSIT_KEEP_S:
                    break
                self._in_transit.popitem(last=False)
            self._in_transit[token] = now
            self.last_arrival = now
        return token

    def begun(self, token: object) -> None:
        with self._lock:
            self._in_transit.pop(token, None)

    def in_transit(self) -> int:
        """RPCs whose head came in during the last ``IN_TRANSIT_KEEP_S`` and whose handler has not begun."""
        now = time.monotonic()
        with self._lock:
            return sum(1 for at in self._in_transit.values() if now - at < IN_TRANSIT_KEEP_S)

    def _guard(self, context) -> None:
        self.last_arrival = time.monotonic()  # every method calls this first
        if self.token is not None:
            header = dict(context.invocation_metadata()).get("authorization")
            if not authorized(header, self.token):
                _abort(context, ServeError(401, "missing or wrong API token: send metadata "
                                                      "'authorization: Bearer <token>'"))

    def ServerLive(self, request, context):
        self._guard(context)
        return pb.ServerLiveResponse(live=True)

    def ServerReady(self, request, context):
        self._guard(context)
        return pb.ServerReadyResponse(ready=self.core.ready)

    def ServerMetadata(self, request, context):
        self._guard(context)
        return pb.ServerMetadataResponse(name="edgeaccel", version=__version__, extensions=EXTENSIONS)

    def ModelReady(self, request, context):
        self._guard(context)
        try:
            self.core.get(request.name, request.version)
        except ServeError:
            return pb.ModelReadyResponse(ready=False)
        return pb.ModelReadyResponse(ready=True)

    def ModelMetadata(self, request, context):
        self._guard(context)
        try:
            meta = self.core.metadata(request.name, request.version)
        except ServeError as exc:
            _abort(context, exc)
        tensor = pb.ModelMetadataResponse.TensorMetadata
        return pb.ModelMetadataResponse(
            name=meta["name"], versions=meta["versions"], platform=meta["platform"],
            inputs=[tensor(name=t["name"], datatype=t["datatype"], shape=t["shape"]) for t in meta["inputs"]],
            outputs=[tensor(name=t["name"], datatype=t["datatype"], shape=t["shape"]) for t in meta["outputs"]])

    def ModelConfig(self, request, context):
        self._guard(context)
        try:
            config = self.core.config(request.name, request.version)
        except ServeError as exc:
            _abort(context, exc)
        tensors = {"input": pb.ModelInput, "output": pb.ModelOutput}
        return pb.ModelConfigResponse(config=pb.ModelConfig(
            name=config["name"], platform=config["platform"], max_batch_size=config["max_batch_size"],
            **{key: [cls(name=t["name"], data_type=pb.DataType.Value(t["data_type"]), dims=t["dims"])
                     for t in config[key]] for key, cls in tensors.items()}))

    def RepositoryIndex(self, request, context):
        self._guard(context)
        index = pb.RepositoryIndexResponse.ModelIndex
        return pb.RepositoryIndexResponse(models=[index(**row) for row in self.core.index(request.ready)])

    def RepositoryModelLoad(self, request, context):
        self._guard(context)
        try:
            refuse_overrides(request.parameters, request.model_name)
        except ServeError as exc:
            _abort(context, exc)
        self._repository(self.core.load, request.model_name, context)
        return pb.RepositoryModelLoadResponse()

    def RepositoryModelUnload(self, request, context):
        self._guard(context)
        self._repository(self.core.unload, request.model_name, context)
        return pb.RepositoryModelUnloadResponse()

    def _repository(self, action, name: str, context) -> None:
        try:
            action(name)
        except ServeError as exc:
            _abort(context, exc)

    def ModelInfer(self, request, context):
        self._guard(context)
        started = time.perf_counter()
        name, status, error, failed = request.model_name, 200, None, None
        try:
            if any(t.datatype == "BYTES" for t in request.inputs) and \
                    self.tasks.has_task(request.model_name, request.model_version):
                return self._images(request, context)
            inputs = _inputs(request)
            timeout = _timeout_s(request, context)
            # here=True: this handler thread waits for the answer anyway, so a request an executor can start at
            # once runs in it (the future comes back done): no hand-off to a worker thread and back
            future = self.core.infer(name, inputs, request.model_version, timeout, here=math.inf)
            limit = self.core.options.timeout_s
            wait = (limit if timeout is None else min(timeout, limit)) + GRACE_S
            if not future.done():  # queued behind others: wait for the answer or the call's end, whichever first
                ended = threading.Event()
                context.add_callback(ended.set)
                future.add_done_callback(lambda _: ended.set())
                ended.wait(wait)
            if not context.is_active():  # the client cancelled the call: counted as HTTP's gone client, not a 200
                status, error = 499, "the client cancelled the call"
                return None
            if not future.done():
                raise ServeError(504, f"model '{name}' did not answer within {wait:g} s")
            return _response(request, future.result())
        except ServeError as exc:
            status, error, failed = exc.status, exc.message, exc
            if exc.close_connection and self.holding.is_set():
                self.released.wait(HOLD_MAX_S)
        except Exception as exc:  # a bug of the server: logged whole, answered INTERNAL in one line, not counted 200
            log.exception("internal error on ModelInfer %s", name)
            status, error = 500, f"internal error: {type(exc).__name__}: {exc}"
            failed = ServeError(500, error)
        finally:
            self.metrics.request(name, "grpc", status, time.perf_counter() - started, request.id, error)
        _abort(context, failed)  # outside the try: abort raises to end the call


    def _images(self, request, context):
        """Encoded images in a BYTES input: each image's task result JSON in the BYTES output 'result'."""
        if len(request.inputs) != 1:
            raise ServeError(400, "an image request has one BYTES input (the encoded images); the model's other "
                                  "inputs are the task's to fill")
        tensor = request.inputs[0]
        where = f"input '{tensor.name}'"
        self.tasks.task_of(request.model_name, request.model_version)
        if request.raw_input_contents:
            images = split_bytes(request.raw_input_contents[0], where)
        else:
            images = list(tensor.contents.bytes_contents)
        images = check_count(images, list(tensor.shape), where)
        for wanted in request.outputs:
            if wanted.name != RESULT:
                raise ServeError(400, f"an image request answers one output, '{RESULT}', not '{wanted.name}'")
        options = from_parameters(grpc_values(request.parameters))
        options.check_images(len(images))
        timeout = _timeout_s(request, context)
        results = [self.tasks.predict(request.model_name, request.model_version, image, options, timeout,
                                      f"image {i} of the request") for i, image in enumerate(images)]
        reply = pb.ModelInferResponse(model_name=request.model_name, model_version=VERSION, id=request.id)
        reply.outputs.add(name=RESULT, datatype="BYTES", shape=[len(results)])
        reply.raw_output_contents.append(join_bytes(result_bytes(results)))
        return reply


class ArrivalWatch(grpc.ServerInterceptor):
    """Tells the servicer when an RPC's head comes in, and when its handler begins: between the two, its
    message is still arriving (a 790 KB tensor takes a while on a loaded machine) or waits for a thread, and a
    stop begun then CANCELs it (server._no_arrivals waits for none in transit). Unary methods only: the
    protocol has no other kind."""

    def __init__(self, servicer: InferenceServicer) -> None:
        self._servicer = servicer

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        servicer, inner, token = self._servicer, handler.unary_unary, self._servicer.arriving()

        def behavior(request, context):
            servicer.begun(token)
            return inner(request, context)

        return grpc.unary_unary_rpc_method_handler(behavior, request_deserializer=handler.request_deserializer,
                                                   response_serializer=handler.response_serializer)


def _abort(context, exc: ServeError):
    """End the call with the error's status (grpcio raises from ``abort``)."""
    import grpc

    if exc.retry_after:  # as HTTP's Retry-After header: when a refused request may come back
        context.set_trailing_metadata((("retry-after", str(exc.retry_after)),))
    context.abort(getattr(grpc.StatusCode, exc.grpc_code), exc.message)


def _timeout_s(request, context) -> float | None:
    limits = []
    remaining = context.time_remaining()
    if remaining is not None and remaining < NO_DEADLINE_S:
        limits.append(max(remaining, 0.001))
    if "timeout" in request.parameters:
        given = request.parameters["timeout"]
        kind = given.WhichOneof("parameter_choice")
        value = getattr(given, kind) if kind else None
        if kind not in ("int64_param", "uint64_param") or value <= 0:  # a string or a double: say so, not "not 0"
            raise ServeError(400, f"parameter 'timeout' is a positive int64_param in microseconds, not "
                                  f"{kind or 'empty'} {value!r}")
        limits.append(value / 1e6)
    return min(limits) if limits else None


def _inputs(request) -> dict[str, np.ndarray]:
    if not request.inputs:
        raise ServeError(400, "the request has no inputs")
    raw = request.raw_input_contents
    if raw and len(raw) != len(request.inputs):
        raise ServeError(400, f"{len(raw)} raw_input_contents for {len(request.inputs)} inputs: give one per input, "
                              "in order, or none and each input's contents")
    for wanted in request.outputs:  # before the model runs for a request it cannot answer
        refuse_unserved(wanted.parameters, f"output '{wanted.name}'")
    arrays = {}
    for i, tensor in enumerate(request.inputs):
        where = f"input '{tensor.name}'"
        if tensor.name in arrays:
            raise ServeError(400, f"{where} is given twice")
        refuse_unserved(tensor.parameters, where)
        shape = list(tensor.shape)
        if raw:
            arrays[tensor.name] = from_bytes(raw[i], tensor.datatype, shape, where)
        else:
            dtype_of(tensor.datatype, where)
            field = CONTENTS.get(tensor.datatype)
            if field is None:  # FP16 (and BF16) have no typed field in InferTensorContents
                raise ServeError(400, f"{where}: {tensor.datatype} values have no typed contents field in the "
                                      "protocol; send them as raw little-endian bytes in raw_input_contents")
            values = getattr(tensor.contents, field)
            arrays[tensor.name] = from_json(list(values), tensor.datatype, shape, where)
    return arrays


def _response(request, outputs: dict):
    wanted = [o.name for o in request.outputs]
    for out_name in wanted:
        if out_name not in outputs:
            raise ServeError(400, f"model '{request.model_name}' has no output '{out_name}'; its outputs are "
                                  f"{list(outputs)}")
    reply = pb.ModelInferResponse(model_name=request.model_name, model_version=VERSION, id=request.id)
    executor = getattr(outputs, "executor", None)
    if executor:  # which executor answered (as HTTP's response parameters)
        reply.parameters["executor"].string_param = executor
    for out_name in wanted or list(outputs):
        array = outputs[out_name]
        reply.outputs.add(name=out_name, datatype=datatype_of(array.dtype), shape=list(array.shape))
        reply.raw_output_contents.append(to_bytes(array))
    return reply


def add_to_server(servicer: InferenceServicer, server) -> None:
    pb_grpc.add_GRPCInferenceServiceServicer_to_server(servicer, server)
