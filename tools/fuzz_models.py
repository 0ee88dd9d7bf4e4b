#!/usr/bin/env python3
"""Long fuzz campaign: seeded mutants of the shared models through ``edgeaccel.load`` + ``run``.

    python tools/fuzz_models.py --format tflite --count 1000 --seed 1
    python tools/fuzz_models.py --format onnx --count 1000 --seed 1 --isolate

Each mutant runs in a child process (one child is reused until it dies or hangs), so a crash of the default
path is observed and reported, not fatal. Defects (a death, a hang, an exception outside edgeaccel's tree, an
empty message) are kept under --out/kept with a JSON note; the summary goes to stdout and --out/summary-*.json.
Exit status 1 when any defect was seen. Run in small batches on a shared machine (--count, --start).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgeaccel.fuzzing import harness  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--format", choices=("tflite", "onnx", "ir"), required=True)
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--start", type=int, default=0, help="index of the first mutant (to resume or split a run)")
    p.add_argument("--isolate", action="store_true", help="load with isolate=True (worker process)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per mutant before it counts as a hang")
    p.add_argument("--load-timeout", type=float, default=20.0, help="isolation: worker load limit (s)")
    p.add_argument("--run-timeout", type=float, default=10.0, help="isolation: per-run limit (s)")
    p.add_argument("--rlimit-as", type=float, default=8.0, help="address-space limit of the trial process, GiB")
    p.add_argument("--models", type=Path, default=ROOT.parent / "shared" / "models")
    p.add_argument("--out", type=Path, default=Path("fuzz-out"))
    p.add_argument("--quiet", action="store_true", help="print only defects, not every mutant")
    p.add_argument("--raw", choices=("litert", "onnxruntime"),
                   help="baseline: hand the same mutants to this runtime directly, without edgeaccel")
    p.add_argument("--unchecked", choices=("litert", "onnxruntime", "openvino"),
                   help="with --isolate: hand each mutant to this runtime in a worker WITHOUT validation, so that "
                        "the mutants that crash it reach it (isolation alone must contain them)")
    args = p.parse_args()
    if args.unchecked and not args.isolate:
        p.error("--unchecked needs --isolate")

    seeds = harness.corpus(args.format, args.models, args.out / "zoo")
    limits = {"load_timeout": args.load_timeout, "run_timeout": args.run_timeout} if args.isolate else None
    mode = f"raw-{args.raw}" if args.raw else f"isolate-unchecked-{args.unchecked}" if args.unchecked \
        else "isolate" if args.isolate else "default"
    print(f"{args.format} {mode}: {args.count} mutants from seed {args.seed} (start {args.start}) of "
          f"{', '.join(s.name for s in seeds)}", flush=True)

    def log(result: dict) -> None:
        if args.quiet and result["outcome"] in ("ok", "error"):
            return
        what = result.get("error") or result.get("signal") or ""
        print(f"{result['index']:5d} {result['seed_model'][:34]:34s} {result['outcome']:7s} {what[:28]:28s} "
              f"{str(result.get('message', ''))[:90]!r}", flush=True)

    started = time.time()
    summary = harness.campaign(args.format, seeds, args.seed, args.count, args.out / f"{args.format}-{mode}",
                               isolate=args.isolate, limits=limits, timeout=args.timeout,
                               rlimit_as=int(args.rlimit_as * 2**30), start=args.start, log=log, raw=args.raw,
                               unchecked=args.unchecked)
    report = {"format": args.format, "mode": mode, "seed": args.seed, "start": args.start, "count": args.count,
              "command": " ".join(sys.argv), "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
              **summary.as_dict()}
    name = f"summary-{args.format}-{mode}-s{args.seed}-{args.start}-{args.start + args.count}.json"
    (args.out / name).write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if k != "defects"}, indent=2))
    for d in summary.defects:
        print("DEFECT", json.dumps(d)[:600])
    return 0 if summary.clean or args.raw else 1


if __name__ == "__main__":
    sys.exit(main())
