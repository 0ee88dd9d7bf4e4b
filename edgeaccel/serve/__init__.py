"""``edgeaccel serve``: one process owns the accelerators and serves every model in a folder to many apps over
the Open Inference Protocol (KServe v2), HTTP/REST and gRPC.

    edgeaccel serve models/ --port 8000 --grpc-port 8001 --policy thermal

The pieces, each in its own module: ``repository`` (which models a folder holds, refusing path escapes),
``gate`` (one concurrency limit per device shared by every model, in priority order), ``core`` (the loaded
models, the bounded queue, timeouts), ``batching`` (dynamic batching), ``errors`` (one error type for
both protocols), ``tensors`` (protocol tensors to and from numpy),
``rest`` (the ASGI app), ``grpc_api`` (the gRPC servicer), ``metrics`` (Prometheus), ``security`` (bind
address and token), ``server`` (both protocols in one event loop, graceful shutdown on SIGTERM: refuse first,
stop the transports last), ``last_call`` (HTTP's backlog answered 503 at shutdown, not reset), ``shape_check``
(ONNX shape inference on a request's shapes), ``early_stop`` (SIGTERM while the models load: exit 0), ``rest_request`` (an /infer body to tensors), ``http_body`` (a body bounded in size and time), ``http_protocol`` (a JSON 400 for unparsable HTTP) and ``process`` (a server in a subprocess, for the tests and
tools/bench_serve.py). Task endpoints, images in and results out: ``tasks`` (decode, the task's halves, masks),
``images`` (decoding, multipart), ``image_tensors`` (BYTES tensors of images) and ``predict_http`` (the routes).
Needs the ``serve`` extra (uvicorn, grpcio, protobuf, prometheus-client); importing this package imports none.
"""
