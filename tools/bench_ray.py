#!/usr/bin/env python3
"""Ray Data against one process on the same cores: N images (the shared photos repeated) decoded and
classified by ``edgeaccel.ray.map_batches`` on a local Ray, and by a plain loop (read_image + predict) in one
process, both end to end (model loads and, for Ray, actor start included) and both pinned to the same CPUs.

    python tools/bench_ray.py --images 2000 --cpus 2 --repeats 3

Prints each run's throughput (images/s), the medians, and the ratio Ray / single process (issue 20's target:
at least 0.8), and checks that both gave the same answers. Not a test: figures drift between runs on a shared
machine; compare within one run only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import edgeaccel  # noqa: E402

SHARED = Path(os.environ.get("EDGEACCEL_SHARED", ROOT.parent / "shared"))
EXECUTORS: dict[str, set] = {"single": set(), "ray": set()}  # what ran, both sides (calibrate=False on both)


def single_process(paths: list[str], model_path: Path, threads: int) -> tuple[float, float, Counter]:
    """(seconds end to end, seconds from the first answer to the last, answers)."""
    from edgeaccel.imageio import read_image

    start = time.perf_counter()
    labels: Counter = Counter()
    with edgeaccel.load(model_path, task="classify", threads=threads, calibrate=False) as model:
        EXECUTORS["single"].add(model.executor.name)
        for i, p in enumerate(paths):
            labels[model.predict(read_image(p)).top.class_id] += 1
            if i == 0:
                first = time.perf_counter()
    end = time.perf_counter()
    return end - start, end - first, labels


def on_ray(paths: list[str], model_path: Path, actors: int, num_cpus: float, threads: int | None,
           batch_size: int, source: str) -> tuple[float, float, Counter, int]:
    import ray.data

    import edgeaccel.ray

    start = time.perf_counter()
    if source == "bytes":  # the files' bytes; the actors decode them (in parallel, beside inference)
        ds, column = ray.data.read_binary_files(paths), "bytes"
    else:  # Ray's read tasks decode them
        ds, column = ray.data.read_images(paths, mode="RGB"), "image"
    out = edgeaccel.ray.map_batches(ds, model_path, task="classify", actors=actors, num_cpus=num_cpus,
                                    threads_per_actor=threads, batch_size=batch_size, column=column)
    labels: Counter = Counter()
    first, first_rows = None, 0
    for batch in out.iter_batches(batch_size=None, batch_format="numpy"):  # blocks as they come
        labels.update(int(c) for c in batch["class_id"])
        EXECUTORS["ray"].update(batch["executor"])
        if first is None:
            first, first_rows = time.perf_counter(), len(batch["class_id"])
    end = time.perf_counter()
    return end - start, end - first, labels, first_rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, default=2000)
    p.add_argument("--cpus", type=int, default=2, help="cores both sides are pinned to (and Ray's num_cpus)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--model", type=Path, default=SHARED / "models" / "mobilenet_v2_1.0_224_quant.tflite")
    p.add_argument("--actors", type=int, default=None, help="default: --cpus")
    p.add_argument("--num-cpus", type=float, default=0.5, help="CPUs Ray reserves per actor (the rest: readers)")
    p.add_argument("--threads-per-actor", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--source", choices=("bytes", "images"), default="bytes",
                   help="bytes: read_binary_files, decoded in the actors; images: read_images, decoded by the readers")
    args = p.parse_args()

    cores = sorted(os.sched_getaffinity(0))[: args.cpus]
    os.sched_setaffinity(0, cores)  # inherited by Ray's raylet and workers, started below
    photos = sorted(str(p) for p in (SHARED / "images").glob("*.png"))
    if not photos:
        p.error(f"no photos in {SHARED / 'images'}; set EDGEACCEL_SHARED to the shared folder")
    paths = [photos[i % len(photos)] for i in range(args.images)]
    actors = args.actors or args.cpus

    import ray

    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    import ray.data

    ray.data.DataContext.get_current().enable_progress_bars = False
    print(f"{args.images} images ({len(photos)} photos repeated), {args.model.name}, cores {cores}; Ray: {actors} "
          f"actors x {args.num_cpus:g} CPU, {args.threads_per_actor} thread(s) each, batch {args.batch_size}, "
          f"{args.source} decoded {'in the actors' if args.source == 'bytes' else 'by the readers'}; "
          f"single process: {args.cpus} threads")
    rates: dict[str, list[float]] = {"single": [], "ray": []}
    steady: dict[str, list[float]] = {"single": [], "ray": []}
    answers = {}
    for r in range(args.repeats):
        order = ["single", "ray"] if r % 2 == 0 else ["ray", "single"]
        for mode in order:
            if mode == "single":
                took, after_first, labels = single_process(paths, args.model, args.cpus)
                first_rows = 1
            else:
                took, after_first, labels, first_rows = on_ray(paths, args.model, actors, args.num_cpus,
                                                               args.threads_per_actor, args.batch_size, args.source)
            answers[mode] = labels
            rates[mode].append(args.images / took)
            steady[mode].append((args.images - first_rows) / after_first)
            print(f"  run {r + 1} {mode:<6} {took:7.2f} s  {args.images / took:7.1f} images/s end to end, "
                  f"{steady[mode][-1]:7.1f} images/s after the first answer ({took - after_first:.2f} s)")
    ray.shutdown()
    for what, table in (("end to end", rates), ("after the first answer", steady)):
        single, on = statistics.median(table["single"]), statistics.median(table["ray"])
        print(f"median {what}: single process {single:.1f} images/s, Ray Data {on:.1f} images/s; "
              f"ratio {on / single:.2f} (target >= 0.8)")
    print(f"executors: single process {sorted(EXECUTORS['single'])}, Ray actors {sorted(EXECUTORS['ray'])}")
    same = answers["single"] == answers["ray"]
    print("answers: " + ("the same top-1 classes on both sides" if same else
                         f"DIFFER: {answers['single'].most_common(3)} vs {answers['ray'].most_common(3)}"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
