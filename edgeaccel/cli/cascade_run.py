"""``edgeaccel run --cascade pipeline.yaml --input IMAGE|VIDEO|FOLDER|/dev/videoN|URL``: a cascade (docs/cascade.md).
An image: the first stage's result with each box's later stages (JSON with --json, --save draws it). A live
source: one JSON line per frame to --jsonl, then the run's report (frames read/delivered/dropped, fps, each
stage's executor, device, p50/p95 ms and busy share; --json: the report as one document)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys


def main(args: argparse.Namespace) -> int:
    from ..cascade.config import read_pipeline
    from ..cascade.core import Cascade
    from ..errors import InputError
    from . import live, quiet_native_stderr

    if args.model:
        raise InputError("--cascade names its models in the pipeline file: give no MODEL as well",
                         hint="edgeaccel run --cascade pipeline.yaml --input IMAGE|VIDEO")
    is_live = live.wanted(args)
    if len(args.input) != 1 and not is_live:
        raise InputError("--cascade takes one image --input, or live ones: videos, folders, /dev/videoN, stream URLs")
    data = read_pipeline(args.cascade)
    with quiet_native_stderr():
        cascade = Cascade.from_file(args.cascade)
    with cascade:
        if is_live:
            options = dict(data.get("live") or {})
            if args.drop:
                options["drop"] = args.drop
            if getattr(args, "policy", None):
                options.update(policy=args.policy, power_budget_w=args.power_budget)
            return _live(cascade, args, {**options, **live.tracking_kwargs(args)})
        result = cascade.predict(args.input[0])
        if args.save:
            from ..cascade.render import render
            from ..vision.overlay import save_image

            save_image(render(result), args.save)
        document = {"stages": cascade.describe(), "placement": cascade.placement, **result.to_dict()}
        if args.json:
            json.dump(document, sys.stdout, indent=2)
            print()
        else:
            _print_image(cascade, result)
    return 0


def _live(cascade, args, options: dict) -> int:
    from . import live

    run = cascade.watch(*args.input, **options)
    with contextlib.ExitStack() as stack:
        stack.enter_context(run)
        metrics = live.serve_metrics(args, run.sources, run.tracking)
        if metrics is not None:
            stack.callback(metrics.shutdown)
        sink = stack.enter_context(open(args.jsonl, "w", encoding="utf-8")) if args.jsonl else None
        for frame in run:
            if sink is not None:
                sink.write(json.dumps(frame.to_dict()) + "\n")
    report = run.report()
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
        return 0
    frames = report["frames"]
    print(f"{report['source']}: {frames['read']} frames read, {frames['delivered']} delivered, dropped "
          f"{frames['dropped']}, {frames['abandoned']} abandoned; {report['fps']} fps (drop {report['drop']})")
    for s in report["sources"] if len(report["sources"]) > 1 else ():
        print(f"  source {s['source']}: {s['read']} read, {s['delivered']} delivered, dropped {s['dropped']}")
    for s in report["stages"]:
        shed = ", ".join(f"{n} ({why})" for why, n in s["shed"].items() if n)
        print(f"  {s['name']:<12} {s['executor']:<24} {s['frames']} frames, {s['calls']} calls, p50 {s['p50_ms']} ms "
              f"on the device, p95 {s['p95_ms']} ms, busy {s['busy']:.0%}"
              + (f", {s['skipped']} boxes skipped" if s["skipped"] else "") + (f", frames shed: {shed}" if shed else ""))
    if report["policy"]:
        print(f"  policy: {report['policy']['policy']}, {report['policy']['reason']}")
    for s in report["sources"]:
        if "tracking" in s:
            print(live._tracking_lines(s["tracking"]))
    for note in report["placement"]:
        print(f"  placement: {note}")
    return 0


def _print_image(cascade, result) -> None:
    from ..vision.results import ClassifyResult, PoseResult

    for s in cascade.describe():
        print(f"stage {s['name']}: {s['task']} on {s['executor']}")
    for note in cascade.placement:
        print(f"  placement: {note}")
    print(f"{len(result.boxes)} boxes")
    for box in result.boxes:
        line = f"  {box.label} {box.score:.2f} at {[round(v) for v in box.xyxy]}"
        for name, inner in box.stages.items():
            if isinstance(inner, ClassifyResult) and inner.top:
                line += f"; {name}: {inner.top.label} {inner.top.score:.2f}"
            elif isinstance(inner, PoseResult):
                line += f"; {name}: {len(inner.keypoints)} {inner.layout or 'keypoints'}"
            else:
                line += f"; {name}: {len(getattr(inner, 'boxes', []))} boxes"
        print(line)
    print("timing_ms: " + ", ".join(f"{k} {v:.1f}" for k, v in result.timing_ms.items()))
