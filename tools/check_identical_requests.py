#!/usr/bin/env python3
"""Check that identical requests through a `policy=` model and through `edgeaccel serve` give
one answer, or, across an executor change, answers within the guard's tolerance, each labelled with its
executor.

In-process, the model is loaded with `policy=` twice: at the default tolerance (whatever the guard admits) and
at a loose one (``--loose``, so that LiteRT and OpenVINO both serve and the labels and the tolerance are
exercised). Requests are sent in bursts (submit, several in flight) with idle pauses between them, and the
re-measure interval is shortened (``--remeasure-s``), so that stale executors are probed and the device's work
may change hands during the run. Through `edgeaccel serve` (a real subprocess on 127.0.0.1), the same request
goes over HTTP (binary tensors) and gRPC, and each response's ``parameters.executor`` is read (the server keeps
its own 5 s re-measure interval).

For each run it prints: the executors the model holds and those the guard refused, requests per executor,
distinct answers per executor, and whether every pair of executors' answers agrees within the tolerance.
It fails (exit 1) when an executor gave two different answers to the identical input, when a result carries no
executor, or when two executors' answers disagree beyond the tolerance.

    python tools/check_identical_requests.py                     # mobilenet_v2 quant .tflite ($EDGEACCEL_SHARED)
    python tools/check_identical_requests.py --requests 1000 --no-serve
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

SHARED = Path(os.environ.get("EDGEACCEL_SHARED", ROOT.parent / "shared"))
DEFAULT_MODEL = SHARED / "models" / "mobilenet_v2_1.0_224_quant.tflite"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", default=str(DEFAULT_MODEL))
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--policy", default="latency")
    parser.add_argument("--loose", type=float, default=0.5, help="the loose accuracy_tolerance run (0 skips it)")
    parser.add_argument("--remeasure-s", type=float, default=0.1, help="re-measure interval (5 s by default)")
    parser.add_argument("--burst", type=int, default=50, help="requests in flight per burst; a pause follows")
    parser.add_argument("--no-serve", action="store_true", help="skip the edgeaccel serve check")
    args = parser.parse_args()

    import edgeaccel
    from edgeaccel.selection.calibration import sample_inputs

    info = edgeaccel.describe(args.model)
    x = sample_inputs(info.inputs, 1, 0)[0]  # the bundled photo fitted to the model's input
    ok = True
    for tolerance in [None] + ([args.loose] if args.loose else []):
        ok &= in_process(args, x, tolerance)
    if not args.no_serve:
        ok &= through_serve(args, x)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def in_process(args, x, tolerance: float | None) -> bool:
    import edgeaccel

    label = f"in-process, policy={args.policy}, accuracy_tolerance={tolerance if tolerance else 'default'}"
    started = time.perf_counter()
    with edgeaccel.schedule(args.model, args.policy, runtime=edgeaccel.RuntimeOptions(cache=False),
                            selection=edgeaccel.SelectionOptions(calibrate=False,
                                                                 accuracy_tolerance=tolerance)) as model:
        load_s = time.perf_counter() - started
        model._scheduler.remeasure_s = args.remeasure_s
        results = []
        while len(results) < args.requests:
            burst = [model.submit(x) for _ in range(min(args.burst, args.requests - len(results)))]
            results += [f.result(60) for f in burst]
            time.sleep(max(0.05, 2 * args.remeasure_s))  # idle: a stale executor is probed now
        probes = {name: s.probes for name, s in model.stats.executors.items()}
        refused = [str(f) for f in model.fallbacks if f.stage == "guard"]
        held = list(model.executors)
        specs = model.outputs
    print(f"\n{label}: load {load_s:.2f} s (guard included)")
    print(f"  executors held: {', '.join(held)}; probes: {probes}")
    for line in refused:
        print(f"  refused: {line}")
    return report([(r.executor, list(r)) for r in results], specs, tolerance)


def through_serve(args, x) -> bool:
    import tritonclient.grpc as grpc_client
    import tritonclient.http as http_client

    from edgeaccel.serve.process import ServerProcess

    folder = Path(tempfile.mkdtemp(prefix="edgeaccel-identical-"))
    shutil.copy(args.model, folder / f"m{Path(args.model).suffix}")
    server = ServerProcess([folder, "--port", "0", "--grpc-port", "0"])
    server.start()
    ok = True
    try:
        http = http_client.InferenceServerClient(server.http, network_timeout=60)
        grpc = grpc_client.InferenceServerClient(server.grpc)
        meta = http.get_model_metadata("m")
        print(f"\nedgeaccel serve: executors {meta['parameters']['executors']}; "
              f"refused: {meta['parameters'].get('refused', 'none')}")
        name, dtype = meta["inputs"][0]["name"], meta["inputs"][0]["datatype"]
        out_names = [o["name"] for o in meta["outputs"]]
        from edgeaccel import describe

        specs = describe(args.model).outputs
        for protocol, client, module in (("HTTP", http, http_client), ("gRPC", grpc, grpc_client)):
            tensor = module.InferInput(name, list(x[0].shape), dtype)
            tensor.set_data_from_numpy(x[0])
            answers = []
            for i in range(args.requests):
                result = client.infer("m", [tensor])
                response = result.get_response()
                executor = (response.get("parameters", {}).get("executor") if isinstance(response, dict)
                            else response.parameters["executor"].string_param or None)
                answers.append((executor, [result.as_numpy(n) for n in out_names]))
                if i % args.burst == args.burst - 1:
                    time.sleep(max(0.05, 2 * args.remeasure_s))
            print(f"  {protocol}:")
            ok &= report(answers, specs, None)
    finally:
        server.kill()
        shutil.rmtree(folder, ignore_errors=True)
    return ok


def report(answers: list[tuple[str | None, list]], specs, tolerance: float | None) -> bool:
    from edgeaccel.agreement import DEFAULT_TOLERANCE
    from edgeaccel.selection.guard import judge

    tolerance = tolerance or DEFAULT_TOLERANCE
    per = Counter(executor for executor, _ in answers)
    distinct: dict[str | None, dict[bytes, list]] = {}
    for executor, outputs in answers:
        key = b"".join(np.ascontiguousarray(o).tobytes() for o in outputs)
        distinct.setdefault(executor, {}).setdefault(key, outputs)
    ok = None not in per
    print(f"    {len(answers)} requests: " + ", ".join(f"{n} by {e}" for e, n in per.items()))
    for executor, found in distinct.items():
        print(f"    {executor}: {len(found)} distinct answer(s)")
        ok &= len(found) == 1
    names = [e for e in distinct if e is not None]
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            verdict = judge([next(iter(distinct[a].values()))], [next(iter(distinct[b].values()))], specs, specs,
                            tolerance)
            print(f"    {a} vs {b}: {'within' if verdict.ok else 'BEYOND'} the tolerance: {verdict.why}")
            ok &= verdict.ok
    return bool(ok)


if __name__ == "__main__":
    sys.exit(main())
