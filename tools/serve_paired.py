#!/usr/bin/env python3
"""Paired latency of `edgeaccel serve` against a bare server around the raw runtime, and optionally against
another build of edgeaccel: the way to see a tenth of a millisecond on a machine whose figures drift by 1-3 ms
between runs (tools/bench_serve.py's alternating blocks cannot).

Every server is up at once; each round calls every (server, protocol) once, in an order rotated round by round,
and the figure is the median over rounds of the per-round difference, so drift hits both sides of each
difference alike. Servers: ours (this tree), the bare one (tools/serve_floor.py --model: the same stacks, the
request's tensor through the raw runtime, nothing else), and with ``--against TREE`` an `edgeaccel serve` run from
another checkout (e.g. a `git worktree` of the previous commit). Clients: tritonclient, HTTP binary and gRPC.

    python tools/serve_paired.py MODEL.tflite [--rounds 300] [--against ../edgeaccel-before]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", type=Path, help="a .tflite or .onnx model with one input")
    p.add_argument("--rounds", type=int, default=300)
    p.add_argument("--against", type=Path, help="another checkout of edgeaccel to serve the same model beside")
    args = p.parse_args()
    if args.model.suffix not in (".tflite", ".onnx"):
        raise SystemExit(f"{args.model}: the bare server runs .tflite and .onnx models only")
    os.environ.setdefault("EDGEACCEL_CALIBRATE", "off")

    import numpy as np

    import edgeaccel
    from edgeaccel.serve.process import ServerProcess

    spec = edgeaccel.describe(args.model).inputs
    if len(spec) != 1:
        raise SystemExit(f"{args.model.name} takes {len(spec)} inputs; this tool sends one")
    spec = spec[0]
    x = np.random.default_rng(0).integers(0, 255, spec.shape, dtype=np.uint8) if spec.dtype == np.uint8 \
        else np.zeros(spec.shape, spec.dtype)
    folder = Path(tempfile.mkdtemp(prefix="serve-paired-"))
    shutil.copy(args.model, folder / f"m{args.model.suffix}")
    serve_args = [str(folder), "--port", "0", "--grpc-port", "0"]
    bare = subprocess.Popen([sys.executable, str(ROOT / "tools" / "serve_floor.py"), "--model", str(args.model)],
                            stdout=subprocess.PIPE, text=True)
    servers = []
    try:
        ports = bare.stdout.readline().split()
        if len(ports) != 2:
            raise SystemExit("tools/serve_floor.py --model did not start: see its error above")
        addresses = {"bare": (f"127.0.0.1:{ports[0]}", f"127.0.0.1:{ports[1]}")}
        for name, tree in (("ours", None), ("against", args.against)):
            if name == "against" and tree is None:
                continue
            where = str(tree.resolve()) if tree else None
            server = ServerProcess(serve_args, pythonpath=where, cwd=where).start()
            servers.append(server)
            addresses[name] = (server.http, server.grpc)
        times = _rounds(addresses, spec.name, x, args.rounds)
    finally:
        for server in servers:
            server.terminate()
        bare.kill()
        shutil.rmtree(folder, ignore_errors=True)
    _print(args, times)
    return 0


def _rounds(addresses: dict, input_name: str, x, rounds: int) -> dict:
    import tritonclient.grpc as tg
    import tritonclient.http as th

    datatype = {"uint8": "UINT8", "int8": "INT8", "float32": "FP32"}[str(x.dtype)]
    calls = {}
    for name, (http_at, grpc_at) in addresses.items():
        http_client, grpc_client = th.InferenceServerClient(http_at), tg.InferenceServerClient(grpc_at)
        http_input = th.InferInput(input_name, list(x.shape), datatype)
        http_input.set_data_from_numpy(x, binary_data=True)
        grpc_input = tg.InferInput(input_name, list(x.shape), datatype)
        grpc_input.set_data_from_numpy(x)
        calls[(name, "HTTP")] = lambda c=http_client, i=http_input: c.infer("m", [i])
        calls[(name, "gRPC")] = lambda c=grpc_client, i=grpc_input: c.infer("m", [i])
    for call in calls.values():  # warm every path
        for _ in range(20):
            call()
    keys = list(calls)
    times: dict = {key: [] for key in keys}
    for r in range(rounds):
        for key in keys[r % len(keys):] + keys[:r % len(keys)]:
            start = time.perf_counter()
            calls[key]()
            times[key].append(time.perf_counter() - start)
    return times


def _print(args, times: dict) -> None:
    def ms(values) -> float:
        return statistics.median(values) * 1000

    print(f"{args.model.name}: {args.rounds} rounds, every server called once per round in rotated order; "
          "medians (ms)")
    for protocol in ("HTTP", "gRPC"):
        line = [f"{protocol:5s}"] + [f"{name} {ms(times[(name, protocol)]):.3f}"
                                     for name in ("bare", "ours", "against") if (name, protocol) in times]
        ours = times[("ours", protocol)]
        for other in ("bare", "against"):
            if (other, protocol) in times:
                diffs = [a - b for a, b in zip(ours, times[(other, protocol)], strict=True)]
                line.append(f"ours - {other} {ms(diffs):+.3f} (paired)")
        print("  ".join(line))


if __name__ == "__main__":
    sys.exit(main())
