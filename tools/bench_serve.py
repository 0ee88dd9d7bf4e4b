#!/usr/bin/env python3
"""Benchmark of `edgeaccel serve` beside in-process calls on the same model, in one run, against its targets.

    latency: HTTP (binary tensors) and gRPC p50 minus the in-process p50       target <= 1 ms each
    throughput: 4 concurrent clients over gRPC and HTTP / in-process async     target >= 0.8

For each model (several by default: a small and a larger classifier, the same one as ONNX, a segmenter), the
server is a real `edgeaccel serve` subprocess on 127.0.0.1 with its defaults (performance hint "adaptive"). In-process,
the model is loaded three times: alone as `edgeaccel.load` loads it (one executor, hint "latency": what an app
without a policy calls), and with the server's policy under the default hint and under the server's; the latency
figure compares with the faster lone request of the first two, the throughput figure with the faster of the
scheduled two (the best an app gets in-process with several requests in flight). Modes are measured in
alternating blocks (in-process, HTTP, gRPC, in-process, ...) so that drift on a shared machine hits them alike; each figure is the
median over blocks. Clients are tritonclient (HTTP binary, gRPC raw) for latency; for throughput, 4 client
threads, each with its own connection (http.client for HTTP, tritonclient.grpc for gRPC), against the
in-process models with 4 requests kept in flight through submit.

Beside them, the same clients call tools/serve_floor.py twice: answering a fixed tensor and running nothing (its
p50 is the floor the transport and the client library set on this machine), and with --model, a bare server of
the same stacks running the raw runtime on each request (LiteRT or ONNX Runtime, for .tflite and .onnx): what
serving the model costs before any code of ours, the cold start of each run between requests included. The
server's own share is what lies above the latter. The table prints, per model and protocol: in-process p50,
served p50, added p50, the floor, the bare server's p50, our own share, and 4 clients' throughput as a share
of in-process.

    python tools/bench_serve.py                         # the default models from ../shared/models ($EDGEACCEL_SHARED)
    python tools/bench_serve.py --model a.tflite --model b.onnx --blocks 7 --calls 60 --seconds 3
    python tools/bench_serve.py --model a.tflite --server-arg=--threads=4   # the server's streams of 4 threads
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHARED = Path(os.environ.get("EDGEACCEL_SHARED", ROOT.parent / "shared"))
DEFAULT_MODELS = ["mobilenet_v1_0.25_128_quant.tflite", "mobilenet_v2_1.0_224_quant.tflite",
                  "mobilenet_v2_1.0_224_quant.onnx", "deeplabv3_mnv2_dm05_pascal_quant.tflite"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, action="append",
                   help="a model to serve (repeat for several; default: " + ", ".join(DEFAULT_MODELS) + ")")
    p.add_argument("--policy", default="thermal")
    p.add_argument("--blocks", type=int, default=5, help="alternating blocks per mode (default 5)")
    p.add_argument("--calls", type=int, default=40, help="timed calls per latency block (default 40)")
    p.add_argument("--seconds", type=float, default=2.0, help="length of one throughput block (default 2 s)")
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--json", action="store_true")
    p.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                   help="passed on to `edgeaccel serve` (repeat; e.g. --server-arg=--threads=4); the in-process "
                        "baselines keep their defaults")
    args = p.parse_args()
    models = args.model or [SHARED / "models" / name for name in DEFAULT_MODELS]

    os.environ.setdefault("EDGEACCEL_CALIBRATE", "off")
    results = []
    for path in models:
        inputs = edgeaccel_inputs(path)
        if len(inputs) != 1:  # the clients send one tensor
            print(f"{path.name}: skipped, it takes {len(inputs)} inputs and this benchmark sends one", file=sys.stderr)
            continue
        results.append(_one_model(args, path))
        print(f"{path.name}: measured", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        _print(results, args)
    return 0


def edgeaccel_inputs(path: Path) -> list:
    import edgeaccel

    return list(edgeaccel.describe(path).inputs)


def _one_model(args, path: Path) -> dict:
    import numpy as np

    import edgeaccel

    info = edgeaccel.describe(path)
    answer_bytes = sum(int(np.prod([d or 1 for d in t.shape])) * np.dtype(t.dtype).itemsize for t in info.outputs)
    # the floor answers as many bytes as the model does: a large answer's transfer is the transport's cost
    floors = [_start_floor(["--answer-bytes", str(answer_bytes)])]
    try:
        # the bare server around the raw runtime, where the tool has one for the format
        floors.append(_start_floor(["--model", str(path)]) if path.suffix in (".tflite", ".onnx") else None)
        return _served_beside(args, path, *(f and f[1] for f in floors))
    finally:
        for floor in floors:
            if floor is not None:
                floor[0].kill()


def _start_floor(options: list[str]) -> tuple[subprocess.Popen, list[str]]:
    floor = subprocess.Popen([sys.executable, str(ROOT / "tools" / "serve_floor.py"), *options],
                             stdout=subprocess.PIPE, text=True)
    ports = floor.stdout.readline().split()
    if len(ports) != 2:
        floor.kill()
        raise SystemExit(f"tools/serve_floor.py {' '.join(options)} did not start: see its error above")
    return floor, ports


def _served_beside(args, path: Path, floor_ports, raw_ports) -> dict:
    import numpy as np

    import edgeaccel
    from edgeaccel.serve.process import ServerProcess

    folder = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    shutil.copy(path, folder / f"m{path.suffix}")
    plain = edgeaccel.load(path)
    model = edgeaccel.schedule(path, args.policy)
    adaptive = edgeaccel.schedule(path, args.policy, runtime=edgeaccel.RuntimeOptions(performance_hint="adaptive"))
    spec = model.inputs[0]
    x = np.random.default_rng(0).integers(0, 255, spec.shape, dtype=np.uint8) \
        if spec.dtype == np.uint8 else np.zeros(spec.shape, spec.dtype)
    server = ServerProcess([str(folder), "--port", "0", "--grpc-port", "0", "--policy", args.policy,
                            "--max-queue", "256", *args.server_arg])
    try:
        server.start()
        return {"model": path.name, "load_average": os.getloadavg(), "served_streams": _streams(server),
                **_measure(args, plain, model, adaptive, x, server, floor_ports, raw_ports)}
    finally:
        server.terminate()
        plain.close()
        model.close()
        adaptive.close()
        shutil.rmtree(folder, ignore_errors=True)


def _streams(server) -> str:
    """What the server runs overlapping requests on (its metadata's ``streams``), for the record."""
    with urllib.request.urlopen(f"http://{server.http}/v2/models/m", timeout=30) as answer:
        return json.load(answer)["parameters"].get("streams", "one configuration")


def _measure(args, plain, model, adaptive, x, server, floor_ports, raw_ports) -> dict:
    import tritonclient.grpc as tg
    import tritonclient.http as th

    name, in_name = "m", model.inputs[0].name
    datatype = {"uint8": "UINT8", "int8": "INT8", "float32": "FP32"}[str(x.dtype)]

    def http_call(url):
        client = th.InferenceServerClient(url, connection_timeout=10, network_timeout=30)

        def call():
            tensor = th.InferInput(in_name, list(x.shape), datatype)
            tensor.set_data_from_numpy(x, binary_data=True)
            client.infer(name, [tensor])  # tritonclient asks for binary outputs itself
        return call

    def grpc_call(url):
        client = tg.InferenceServerClient(url)

        def call():
            tensor = tg.InferInput(in_name, list(x.shape), datatype)
            tensor.set_data_from_numpy(x)
            client.infer(name, [tensor], client_timeout=30)
        return call

    def local_call():
        model.run(x)

    def plain_call():
        plain.run(x)

    http_floor, grpc_floor = (f"127.0.0.1:{port}" for port in floor_ports)
    latency = {"in-process": local_call, "in-process-load": plain_call, "http-binary": http_call(server.http),
               "grpc": grpc_call(server.grpc),
               "http-floor": http_call(http_floor), "grpc-floor": grpc_call(grpc_floor)}
    if raw_ports:
        http_raw, grpc_raw = (f"127.0.0.1:{port}" for port in raw_ports)
        latency.update({"http-raw": http_call(http_raw), "grpc-raw": grpc_call(grpc_raw)})
    for call in latency.values():  # warm up every path
        for _ in range(10):
            call()
    p50 = {mode: [] for mode in latency}
    for _ in range(args.blocks):
        for mode, call in latency.items():
            times = []
            for _ in range(args.calls):
                start = time.perf_counter()
                call()
                times.append(time.perf_counter() - start)
            p50[mode].append(statistics.median(times) * 1000)
    throughput_modes = {"in-process-async": lambda s: saturated_throughput(model, x, args.clients, s),
                        "in-process-async-adaptive": lambda s: saturated_throughput(adaptive, x, args.clients, s),
                        "grpc-4-clients": lambda s: _grpc_throughput(server, name, in_name, x, datatype,
                                                                     args.clients, s),
                        "http-4-clients": lambda s: _http_throughput(server, name, in_name, x, datatype,
                                                                     args.clients, s)}
    rates = {mode: [] for mode in throughput_modes}
    for _ in range(args.blocks):
        for mode, measure in throughput_modes.items():
            rates[mode].append(measure(args.seconds))
    med_p50 = {mode: statistics.median(v) for mode, v in p50.items()}
    med_rate = {mode: statistics.median(v) for mode, v in rates.items()}
    best_local = max(med_rate["in-process-async"], med_rate["in-process-async-adaptive"])
    lone = min(med_p50["in-process"], med_p50["in-process-load"])
    return {"policy": args.policy, "blocks": args.blocks, "calls": args.calls,
            "p50_ms": med_p50, "p50_ms_blocks": p50, "throughput_per_s": med_rate, "throughput_blocks": rates,
            "in_process_ms": lone,
            "added_ms": {m: med_p50[m] - lone for m in ("http-binary", "grpc")},
            "floor_ms": {"http-binary": med_p50["http-floor"], "grpc": med_p50["grpc-floor"]},
            "raw_server_ms": {"http-binary": med_p50.get("http-raw"), "grpc": med_p50.get("grpc-raw")},
            "throughput_ratio": {m: med_rate[m] / best_local
                                 for m in ("grpc-4-clients", "http-4-clients")}}


def saturated_throughput(model, x, in_flight: int, seconds: float) -> float:
    """Answers per second with ``in_flight`` requests kept in flight through ``model.submit`` for ``seconds``."""
    from collections import deque

    pending, done = deque(), 0
    end = time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < end:
        pending.append(model.submit(x))
        if len(pending) >= in_flight:
            pending.popleft().result()
            done += 1
    while pending:
        pending.popleft().result()
        done += 1
    return done / (time.perf_counter() - start)


def _threads(worker, clients: int, seconds: float) -> float:
    counts = [0] * clients
    end = time.perf_counter() + seconds
    start = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i, counts, end)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 60)
    return sum(counts) / (time.perf_counter() - start)


def _grpc_throughput(server, name, in_name, x, datatype, clients, seconds) -> float:
    import tritonclient.grpc as tg

    def worker(i, counts, end):
        client = tg.InferenceServerClient(server.grpc)
        tensor = tg.InferInput(in_name, list(x.shape), datatype)
        tensor.set_data_from_numpy(x)
        while time.perf_counter() < end:
            client.infer(name, [tensor], client_timeout=30)
            counts[i] += 1
        client.close()

    return _threads(worker, clients, seconds)


def _http_throughput(server, name, in_name, x, datatype, clients, seconds) -> float:
    header = json.dumps({"inputs": [{"name": in_name, "shape": list(x.shape), "datatype": datatype,
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "parameters": {"binary_data_output": True}}).encode()
    body = header + x.tobytes()
    headers = {"Inference-Header-Content-Length": str(len(header))}
    host, port = server.http.rsplit(":", 1)

    def worker(i, counts, end):
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        while time.perf_counter() < end:
            conn.request("POST", f"/v2/models/{name}/infer", body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"HTTP {response.status}")
            counts[i] += 1
        conn.close()

    return _threads(worker, clients, seconds)


def _print(results: list[dict], args) -> None:
    print(f"{args.blocks} alternating blocks of {args.calls} calls (latency) and {args.seconds:g} s with "
          f"{args.clients} clients (throughput); medians over blocks; policy {args.policy}; load average "
          + ", ".join(f"{r['model'][:20]} {r['load_average'][0]:.1f}" for r in results))
    print(f"{'model':42s} {'protocol':8s} {'in-proc':>8s} {'served':>8s} {'added':>7s} {'floor':>7s} "
          f"{'bare+raw':>8s} {'own':>7s} {'<=1ms':>5s} {'4 clients':>9s} {'>=0.8':>5s}")
    for r in results:
        for protocol, mode, clients in (("HTTP", "http-binary", "http-4-clients"), ("gRPC", "grpc", "grpc-4-clients")):
            added, floor, ratio = r["added_ms"][mode], r["floor_ms"][mode], r["throughput_ratio"][clients]
            raw = r["raw_server_ms"][mode]
            own = r["p50_ms"][mode] - raw if raw is not None else added - floor
            print(f"{r['model'][:42]:42s} {protocol:8s} {r['in_process_ms']:8.3f} {r['p50_ms'][mode]:8.3f} "
                  f"{added:+7.3f} {floor:7.3f} {'-' if raw is None else f'{raw:.3f}':>8s} {own:+7.3f} "
                  f"{'met' if added <= 1.0 else 'NO':>5s} {ratio:9.2f} {'met' if ratio >= 0.8 else 'NO':>5s}")
    print("served streams: " + ", ".join(f"{r['model'][:20]} {r['served_streams']}" for r in results))
    print("(ms; in-proc = the faster of edgeaccel.load and the same policy in-process; added = served - in-proc; "
          "floor = the same client against tools/serve_floor.py running nothing; bare+raw = against "
          "serve_floor.py --model, a bare server running the raw runtime; own = served - bare+raw (added - floor "
          "where there is no bare+raw); 4 clients = served / best in-process async throughput)")


if __name__ == "__main__":
    sys.exit(main())
