#!/usr/bin/env python3
"""What isolate=True costs per run() call: the same model loaded in process ("direct"), isolated with the
sandbox ("isolated", the default sandbox="auto") and isolated without it ("unsandboxed", sandbox="off"),
timed in alternating blocks (the order rotates; a short pause before each block: ORT threads spin after a run,
runtime facts).

    python tools/bench_isolation.py --blocks 20 --calls 25 --models ../shared/models
    python tools/bench_isolation.py --socket ...   # also "socket": isolated, tensors through the socket
    python tools/bench_isolation.py --session ...  # also "own-session": isolated, the worker in a session of its own

"socket" is the default sandbox with the channel's shared region refused while its first channel is made (as
where memfd_create is not allowed), so that the region and the socket are compared in the same run.
"own-session" is the default sandbox with the worker started in a session of its own (start_new_session, as
workers once were) instead of the host's: with the kernel's autogroup, another scheduling group.

Prints, per model, the median and p90 per-call latency of each mode over blocks x calls runs, the median
added cost and ratio of each isolated mode against direct, their spread over blocks (each block's median
against the direct block next to it in time: p10, p50, p90), how the isolated channel carried the tensors,
and the one-off cost of loading (for isolated modes: worker start + sandbox + runtime import + model load).
Figures drift 2x between runs on a shared machine; compare within one run only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import edgeaccel  # noqa: E402

CASES = {
    "tiny (split_concat.tflite, litert)": "split_concat.tflite",
    "mobilenet_v2 (tflite, litert)": "mobilenet_v2_1.0_224_quant.tflite",
    "mobilenet_v2 (onnx, onnxruntime)": "mobilenet_v2_1.0_224_quant.onnx",
}


MODES = {"direct": False, "isolated": edgeaccel.IsolationLimits(sandbox="auto"),
         "unsandboxed": edgeaccel.IsolationLimits(sandbox="off")}


@contextlib.contextmanager
def _no_shared_region():
    from edgeaccel.isolation import channel

    def refuse(size: int):
        raise OSError("refused by bench_isolation --socket")

    create, channel.Region.create = channel.Region.create, staticmethod(refuse)
    try:
        yield
    finally:
        channel.Region.create = create


@contextlib.contextmanager
def _own_session():
    from edgeaccel.isolation import executor

    group, executor._PROCESS_GROUP = executor._PROCESS_GROUP, {"start_new_session": True}
    try:
        yield
    finally:
        executor._PROCESS_GROUP = group


def bench(path: Path, blocks: int, calls: int, pause: float, socket_mode: bool = False,
          session_mode: bool = False) -> dict:
    modes = dict(MODES, socket=MODES["isolated"]) if socket_mode else dict(MODES)
    if session_mode:
        modes["own-session"] = MODES["isolated"]
    models, load_s = {}, {}
    for mode, isolate in modes.items():
        t0 = time.perf_counter()
        with _own_session() if mode == "own-session" else contextlib.nullcontext():
            models[mode] = edgeaccel.load(path, selection=edgeaccel.SelectionOptions(strict=True),
                                          runtime=edgeaccel.RuntimeOptions(isolate=isolate))
        load_s[mode] = round(time.perf_counter() - t0, 3)
    direct = models["direct"]
    rng = np.random.default_rng(0)
    inputs = [rng.integers(0, 256, s.shape, dtype=np.uint8) for s in direct.inputs]
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    block_medians: dict[str, list[float]] = {mode: [] for mode in modes}
    names = list(modes)
    try:
        for mode, model in models.items():
            with _no_shared_region() if mode == "socket" else contextlib.nullcontext():
                model.run(inputs)  # its first channel is made now
            for _ in range(20):
                model.run(inputs)
        for b in range(blocks):
            order = names[b % len(names):] + names[:b % len(names)]
            for mode in order:
                time.sleep(pause)
                run = models[mode].run
                block = []
                for _ in range(calls):
                    start = time.perf_counter()
                    run(inputs)
                    block.append(time.perf_counter() - start)
                times[mode] += block
                block_medians[mode].append(float(np.median(block)))
        sandbox = models["isolated"].executor.details["isolated"]["sandbox"]["active"]
        channel = models["isolated"].executor.details["isolated"].get("channel") or {}  # none before the region
        if socket_mode:
            assert models["socket"].executor.details["isolated"]["channel"]["transport"] == "socket"
    finally:
        for model in models.values():
            model.close()
    ms = {k: np.asarray(v) * 1e3 for k, v in times.items()}
    med = {k: float(np.median(v)) for k, v in ms.items()}
    return {
        "runs_per_mode": blocks * calls, "blocks": blocks, "calls_per_block": calls,
        "median_ms": {k: round(v, 4) for k, v in med.items()},
        "p90_ms": {k: round(float(np.percentile(v, 90)), 4) for k, v in ms.items()},
        "added_median_us": {k: round((med[k] - med["direct"]) * 1e3, 1) for k in names[1:]},
        "ratio": {k: round(med[k] / med["direct"], 3) for k in names[1:]},
        "added_us_over_blocks_p10_p50_p90": {k: _spread(block_medians[k], block_medians["direct"], 1e6, 1)
                                             for k in names[1:]},
        "ratio_over_blocks_p10_p50_p90": {k: _spread(block_medians[k], block_medians["direct"], None, 3)
                                          for k in names[1:]},
        "channel": {k: channel.get(k) for k in ("transport", "region_bytes", "socket_inputs", "socket_outputs")},
        "load_s": load_s, "sandbox_layers": sandbox,
        "input_bytes": int(sum(a.nbytes for a in inputs)),
    }


def _spread(mode: list[float], direct: list[float], scale: float | None, digits: int) -> list[float]:
    """p10, p50, p90 over blocks of a block's median against its direct neighbour's: added time, or a ratio."""
    per_block = [(m - d) * scale if scale else m / d for m, d in zip(mode, direct, strict=True)]
    return [round(float(v), digits) for v in np.percentile(per_block, [10, 50, 90])]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--blocks", type=int, default=20)
    p.add_argument("--calls", type=int, default=25)
    p.add_argument("--pause", type=float, default=0.05)
    p.add_argument("--models", type=Path,
                   default=Path(os.environ.get("EDGEACCEL_SHARED", ROOT.parent / "shared")) / "models")
    p.add_argument("--only", help="run only the cases whose label contains this text")
    p.add_argument("--socket", action="store_true", help='also time "socket": the socket channel, same run')
    p.add_argument("--session", action="store_true", help='also time "own-session": the worker in its own session')
    p.add_argument("--no-unsandboxed", action="store_true", help='leave out "unsandboxed" (shorter runs)')
    args = p.parse_args()
    for label, name in CASES.items():
        if args.only and args.only not in label:
            continue
        if args.no_unsandboxed:
            MODES.pop("unsandboxed", None)
        result = bench(args.models / name, args.blocks, args.calls, args.pause, args.socket, args.session)
        print(json.dumps({"model": label, **result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
