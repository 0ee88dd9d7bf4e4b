"""Benchmarks of the live-source pipeline (figures printed, nothing asserted):

1. pipeline FPS vs inference-only FPS with drop="none" on traffic_frames.mp4 looped (target >= 0.9);
2. a source 10x faster than the model with drop="latest": resident memory after the first 5 s and at the end
   of --seconds, and latency p99 against the inference time (target <= 3x).

    PYTHONPATH=$PWD python tools/bench_sources.py [SHARED] [--seconds 60] [--threads N]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np


def rss_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    import edgeaccel
    from edgeaccel.imageio import image_to_input

    p = argparse.ArgumentParser()
    p.add_argument("shared", nargs="?", default="../shared")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--skip-fps", action="store_true", help="only the fast-source part")
    p.add_argument("--frames", type=int, default=200)
    p.add_argument("--threads", type=int, help="the executor's CPU threads (default: usable cores)")
    args = p.parse_args()
    shared = Path(args.shared)
    video = shared / "video" / "traffic_frames.mp4"
    with edgeaccel.load(shared / "models" / "traffic_model.tflite", executor="litert",
                        runtime=edgeaccel.RuntimeOptions(threads=args.threads)) as model:
        import av

        image = next(av.open(str(video)).decode(video=0)).to_ndarray(format="rgb24")
        x = image_to_input(image, model.inputs[0])[0]
        state = [np.zeros(s.shape, s.dtype) for s in model.inputs[1:]]
        for _ in range(5):
            model.run([x, *state])

        def inference_only() -> float:
            nonlocal state
            begin = time.perf_counter()
            for _ in range(args.frames):
                out = model.run([x, *state])
                state = [out[4], out[5]]
            return (time.perf_counter() - begin) / args.frames

        def pipeline_fps() -> float:
            with model.watch(video, loop=True, drop="none") as pipeline:
                for n, _frame in enumerate(pipeline):
                    if n == 10:
                        begin = time.perf_counter()
                    if n == 10 + args.frames:
                        break
            return args.frames / (time.perf_counter() - begin)

        # alternated, on a shared machine: each pipeline figure against the inference figures around it
        times = [inference_only()]
        ratios = []
        for _ in range(0 if args.skip_fps else 3):
            fps = pipeline_fps()
            times.append(inference_only())
            ratios.append(fps * (times[-1] + times[-2]) / 2)
            print(f"pipeline (drop=none, looped file: decode + resize + state + inference) {fps:.1f} FPS; "
                  f"inference only {1 / times[-2]:.1f} before, {1 / times[-1]:.1f} after: ratio {ratios[-1]:.2f}")
        infer_s = float(np.median(times))
        print(f"ratio pipeline / inference-only: median {np.median(ratios) if ratios else float('nan'):.2f} "
              f"(inference {infer_s * 1e3:.2f} ms median, {model.executor.runtime} {model.executor.threads} threads)")

        frame_image = image
        rate = 10.0 / infer_s  # a source 10x faster than the model

        def fast_source():
            period = 1.0 / rate
            due = time.monotonic()
            while True:
                yield frame_image
                due += period
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)

        rss = []
        latencies = []
        with model.watch(fast_source(), drop="latest", names=["fast"]) as pipeline:
            begin = time.monotonic()
            after5 = None
            for frame in pipeline:
                now = time.monotonic() - begin
                if now >= 5.0:
                    if after5 is None:
                        after5 = rss_mb()
                    latencies.append(frame.latency_ms)
                    if len(rss) < now:
                        rss.append(rss_mb())
                if now >= args.seconds:
                    break
            summary = pipeline.summary()
        lat = np.asarray(latencies)
        print(f"source at {rate:.0f} frames/s (10x the model), drop=latest, {args.seconds:.0f} s: "
              f"in {summary['frames_in']}, out {summary['frames_out']}, dropped {summary['dropped']}")
        print(f"  RSS after 5 s {after5:.1f} MB, max after {max(rss):.1f} MB, end {rss[-1]:.1f} MB "
              f"(growth {max(rss) - after5:+.1f} MB)")
        print(f"  latency p50 {np.percentile(lat, 50):.2f} ms, p99 {np.percentile(lat, 99):.2f} ms = "
              f"{np.percentile(lat, 99) / (infer_s * 1e3):.2f} inference times")


if __name__ == "__main__":
    main()
