"""Serve every model of a folder over the Open Inference Protocol (KServe v2): HTTP/REST and gRPC, for any
client (tritonclient, curl). One process owns the devices: every model's requests go through one scheduler
policy and one concurrency limit per device. SIGTERM stops accepting and answers every accepted request."""

from __future__ import annotations

import argparse
import logging
import sys

from .names import executor_arg

HELP = "serve a folder of models over the Open Inference Protocol (HTTP and gRPC)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("repository", help="the model repository: one folder, bundle or model file per model "
                                      "(the name is the folder's name or the file's stem)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1, this machine only; any other needs --token)")
    p.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000; 0 picks a free one)")
    p.add_argument("--grpc-port", default="8001", help="gRPC port (default 8001; 0 picks a free one; off: none)")
    p.add_argument("--token", help="API token clients must send as 'Authorization: Bearer TOKEN' "
                                   "(default $EDGEACCEL_SERVE_TOKEN); required with a non-loopback --host")
    p.add_argument("--models", help="comma-separated names to load at start (default: every model in the folder; "
                                    "'none' to load only through the repository API)")
    p.add_argument("--policy", choices=("latency", "efficiency", "thermal", "power"), default="thermal",
                   help="scheduling policy over every model's executors (default thermal)")
    p.add_argument("--executor", type=executor_arg,
                   help="pin every model to one runtime (litert, onnxruntime, openvino, or a plug-in's name)")
    p.add_argument("--performance-hint", choices=("adaptive", "latency", "throughput"), default="adaptive",
                   help="adaptive (default): a lone request on every core, concurrent ones on streams (a thread "
                        "each below 8 cores, more on larger CPUs); latency: every request on all cores; "
                        "throughput: one stream per core (edgeaccel.load's performance_hint)")
    p.add_argument("--threads", type=int, metavar="N",
                   help="threads of one run on a CPU (default: every core for a lone request; the concurrent "
                        "streams of the adaptive and throughput hints then have N threads each, cores // N of "
                        "them). Leave cores to other work on the board, or size the streams to the clients")
    p.add_argument("--power-budget", type=float, metavar="WATTS", help="the budget for --policy power")
    p.add_argument("--isolate", action="store_true",
                   help="run each model in a worker process: a runtime crash fails its requests, not the server")
    p.add_argument("--priority", action="append", default=[], metavar="MODEL=N",
                   help="a model's priority at a shared device (higher first; default 0); repeat per model")
    p.add_argument("--device-limit", action="append", default=[], metavar="DEVICE=N",
                   help="runs at once on a device, all models together (default: its executors' concurrency, "
                        "1 for an Edge TPU); e.g. cpu=2")
    p.add_argument("--task", action="append", default=[], metavar="MODEL=TASK",
                   help="a model's vision task (classify, detect, segment, pose) for POST /v2/models/MODEL/predict "
                        "(default: its metadata's, or the one its outputs are recognized as); repeat per model")
    p.add_argument("--labels", action="append", default=[], metavar="MODEL=FILE",
                   help="a model's label file (.txt, one name a line, or a .pbtxt label map); repeat per model")
    p.add_argument("--max-queue", type=int, default=64,
                   help="requests accepted and unanswered at once; more get 503 + Retry-After (default 64)")
    p.add_argument("--timeout", type=float, default=30.0, metavar="S",
                   help="longest a request may take, queued and running (default 30 s); a client may ask less")
    p.add_argument("--max-request-mb", type=float, default=64.0, help="largest request body (default 64 MB): 413")
    p.add_argument("--max-batch", type=int, default=8,
                   help="rows per dynamic batch for models with a dynamic batch dimension (default 8; 1: off)")
    p.add_argument("--batch-window-ms", type=float, default=2.0,
                   help="how long a batch waits for more requests (default 2 ms)")
    p.add_argument("--log-json", action="store_true", help="one JSON line per request on stdout")
    p.add_argument("--telemetry-root", default="/", help=argparse.SUPPRESS)  # tests: a fake sensor tree


def main(args: argparse.Namespace) -> int:
    from ..serve.early_stop import StoppedEarly, exiting, watch

    early = watch()  # SIGTERM before the server listens: a clean exit 0 (early_stop.py); the CLI installed it
    started: list = []
    try:
        with early:
            _need_serve_packages()
            core, metrics, listen = _start(args, started)
    except StoppedEarly as stop:
        exiting()
        for core in started:
            core.close()
        print(f"edgeaccel serve: {stop} before serving; stopped: answered 0 of the 0 requests accepted",
              file=sys.stderr)
        return 0
    from ..serve.server import serve

    return serve(core, metrics, listen, early=early)


def _need_serve_packages() -> None:
    from ..errors import RuntimeNotInstalledError

    try:
        import grpc  # noqa: F401
        import prometheus_client  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise RuntimeNotInstalledError(f"edgeaccel serve needs {exc.name}, which is not installed",
                                       hint='pip install "edgeaccel[serve]"') from None


def _start(args: argparse.Namespace, started: list):
    """Check the flags, open the repository, load the models: (core, metrics, listen). ``started`` gets the
    core as soon as it exists, for a signal during the loads to close what was loaded."""
    from ..errors import ConfigError, InputError
    from ..serve.core import ServeCore, ServeOptions
    from ..serve.errors import ServeError
    from ..serve.metrics import Metrics
    from ..serve.repository import ModelRepository
    from ..serve.security import check_bind, resolve_token
    from ..serve.server import Listen, check_ports

    token = resolve_token(args.token)
    check_bind(args.host, token)  # before any model loads or any port is bound
    grpc_port = None if str(args.grpc_port).lower() in ("off", "none", "") else _port(args.grpc_port, "--grpc-port")
    _port(args.port, "--port")
    check_ports(args.host, args.port, grpc_port)  # before the models load: a taken port is said at once
    if args.max_queue < 1 or args.timeout <= 0 or args.max_request_mb <= 0 or args.max_batch < 1:
        raise InputError("--max-queue and --max-batch must be at least 1; --timeout and --max-request-mb positive")
    if args.policy == "power" and not args.power_budget:
        raise InputError("--policy power needs --power-budget WATTS")
    if args.threads is not None and args.threads < 1:
        raise InputError(f"--threads counts threads: 1 or more, not {args.threads} (leave it out for every core)")
    options = ServeOptions(policy=args.policy, executor=args.executor, power_budget_w=args.power_budget,
                           performance_hint=args.performance_hint, threads=args.threads,
                           isolate=args.isolate,
                           telemetry_root=args.telemetry_root, max_queue=args.max_queue, timeout_s=args.timeout,
                           max_batch=args.max_batch, batch_window_ms=args.batch_window_ms,
                           priorities=_pairs(args.priority, "--priority"),
                           device_limits=_pairs(args.device_limit, "--device-limit"),
                           tasks=_named(args.task, "--task"), labels=_labels(args.labels))
    _logging(args.log_json)
    try:
        repository = ModelRepository(args.repository)
    except ServeError as exc:
        raise ConfigError(exc.message) from None
    held = repository.entries()
    for option, given in (("--task", options.tasks), ("--labels", options.labels)):
        unknown = sorted(set(given) - set(held))
        if unknown:
            raise InputError(f"{option} names {unknown[0]!r}, which the repository {args.repository} does not hold",
                             hint=f"use a model's name (its folder or file stem): {', '.join(sorted(held)) or 'none'}")
    metrics = Metrics(log_json=args.log_json)
    core = ServeCore(repository, options, metrics)
    started.append(core)
    metrics.attach(core)
    names = list(repository.entries()) if args.models is None else \
        [] if args.models.strip().lower() == "none" else [n.strip() for n in args.models.split(",") if n.strip()]
    for name in names:
        try:
            core.load(name)
        except ServeError as exc:  # the server starts with the others; the index says why this one is missing
            from .error_view import short

            print(f"warning: {short(exc.message)}", file=sys.stderr)
    if names and not core.loaded():
        print("warning: no model loaded; the server starts for the repository API (GET /v2/repository/index says "
              "why each one is missing)", file=sys.stderr)
    listen = Listen(args.host, args.port, grpc_port, token, int(args.max_request_mb * (1 << 20)))
    return core, metrics, listen


def _port(value, option: str) -> int:
    try:
        port = int(value)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        from ..errors import InputError

        raise InputError(f"{option} must be a port number 0..65535, not {value!r}")
    return port


def _pairs(items: list[str], option: str) -> dict[str, int]:
    from ..errors import InputError

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        try:
            out[key.strip()] = int(value)
        except ValueError:
            sep = ""
        if not sep or not key.strip():
            raise InputError(f"{option} takes NAME=N, not {item!r}")
    return out


def _named(items: list[str], option: str) -> dict[str, str]:
    from ..errors import InputError

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise InputError(f"{option} takes MODEL=VALUE, not {item!r}")
        out[key.strip()] = value.strip()
    if option == "--task":
        from ..vision import TASKS

        for name, task in out.items():
            if task not in TASKS:
                raise InputError(f"--task {name}={task}: the task is one of {', '.join(TASKS)}")
    return out


def _labels(items: list[str]) -> dict[str, str]:
    from pathlib import Path

    from ..errors import InputError

    out = {}
    for name, value in _named(items, "--labels").items():
        path = Path(value).expanduser()
        if not path.is_file():
            raise InputError(f"--labels {name}={value}: no such file",
                             hint="give a text file with one name a line, or a .pbtxt label map")
        out[name] = str(path.resolve())
    return out


def _logging(log_json: bool) -> None:
    serve_log = logging.getLogger("edgeaccel.serve")
    serve_log.setLevel(logging.INFO)
    access = logging.getLogger("edgeaccel.serve.access")
    access.propagate = False
    if log_json:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(message)s"))
        access.addHandler(handler)
        access.setLevel(logging.INFO)
