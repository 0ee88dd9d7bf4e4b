#!/usr/bin/env python3
"""Ray against one process on the same cores, N images (the shared photos repeated) decoded and classified,
both pinned to the same CPUs. Three modes:

    python tools/bench_ray.py --mode data --images 2000 --cpus 2 --repeats 3
    python tools/bench_ray.py --mode pool --sizes 25,50,100,200,400 --cpus 2 --repeats 3
    python tools/bench_ray.py --mode nodes --nodes 1,2,3 --images 200

data: ``edgeaccel.ray.map_batches`` (Ray Data: a new actor pool per dataset) end to end against a plain loop
(read_image + predict) that loads the model itself; prints the ratio Ray / single process (target >= 0.8).
pool: one ``edgeaccel.ray.Pool`` started once and kept warm, against one model loaded once in this process, over
batches of each size; prints each side's start-up, the warm ratio per size, and the crossover sizes (warm: the
smallest batch where the pool is faster; cold: the batch from which the pool's start-up is paid back).
nodes: SIMULATED nodes, all on this machine (``ray.cluster_utils.Cluster``, 1 CPU each), one actor per node
(``spread=True``): the pool's throughput as nodes are added. They share this machine's cores, so this shows
the scheduling and shipping across nodes work and what they cost, not what real machines would add.

Checks that every side gave the same answers. Not a test: figures drift between runs on a shared machine;
compare within one run only.
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
    with edgeaccel.load(model_path, task="classify", selection=edgeaccel.SelectionOptions(calibrate=False),
                        runtime=edgeaccel.RuntimeOptions(threads=threads)) as model:
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
    p.add_argument("--mode", choices=("data", "pool", "nodes"), default="data")
    p.add_argument("--images", type=int, default=2000, help="data and nodes: images per run")
    p.add_argument("--sizes", default="25,50,100,200,400", help="pool: batch sizes, comma-separated")
    p.add_argument("--nodes", default="1,2,3", help="nodes: simulated node counts, comma-separated")
    p.add_argument("--cpus", type=int, default=2, help="cores both sides are pinned to (and Ray's num_cpus)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--model", type=Path, default=SHARED / "models" / "mobilenet_v2_1.0_224_quant.tflite")
    p.add_argument("--actors", type=int, default=None, help="default: --cpus")
    p.add_argument("--num-cpus", type=float, default=None,
                   help="CPUs Ray reserves per actor (default: data 0.5, the rest for readers; pool 1)")
    p.add_argument("--threads-per-actor", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=None, help="default: data 16, pool 8")
    p.add_argument("--source", choices=("bytes", "images"), default="bytes",
                   help="data: bytes: read_binary_files, decoded in the actors; images: read_images, decoded "
                        "by the readers")
    args = p.parse_args()

    cores = sorted(os.sched_getaffinity(0))[: args.cpus]
    os.sched_setaffinity(0, cores)  # inherited by Ray's raylet and workers, started below
    photos = sorted(str(p) for p in (SHARED / "images").glob("*.png"))
    if not photos:
        p.error(f"no photos in {SHARED / 'images'}; set EDGEACCEL_SHARED to the shared folder")
    args.actors = args.actors or args.cpus
    if args.mode == "nodes":
        return nodes_mode(args, photos)
    import ray

    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    try:
        if args.mode == "pool":
            return pool_mode(args, photos, cores)
        return data_mode(args, photos, cores)
    finally:
        ray.shutdown()


def data_mode(args, photos: list[str], cores: list[int]) -> int:
    import ray.data

    paths = [photos[i % len(photos)] for i in range(args.images)]
    actors, num_cpus = args.actors, args.num_cpus or 0.5
    batch_size = args.batch_size or 16
    ray.data.DataContext.get_current().enable_progress_bars = False
    print(f"{args.images} images ({len(photos)} photos repeated), {args.model.name}, cores {cores}; Ray Data: {actors} "
          f"actors x {num_cpus:g} CPU, {args.threads_per_actor} thread(s) each, batch {batch_size}, "
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
                took, after_first, labels, first_rows = on_ray(paths, args.model, actors, num_cpus,
                                                               args.threads_per_actor, batch_size, args.source)
            answers[mode] = labels
            rates[mode].append(args.images / took)
            steady[mode].append((args.images - first_rows) / after_first)
            print(f"  run {r + 1} {mode:<6} {took:7.2f} s  {args.images / took:7.1f} images/s end to end, "
                  f"{steady[mode][-1]:7.1f} images/s after the first answer ({took - after_first:.2f} s)")
    for what, table in (("end to end", rates), ("after the first answer", steady)):
        single, on = statistics.median(table["single"]), statistics.median(table["ray"])
        print(f"median {what}: single process {single:.1f} images/s, Ray Data {on:.1f} images/s; "
              f"ratio {on / single:.2f} (target >= 0.8)")
    print(f"executors: single process {sorted(EXECUTORS['single'])}, Ray actors {sorted(EXECUTORS['ray'])}")
    return report_answers(answers["single"], answers["ray"])


def report_answers(single: Counter, other: Counter, what: str = "both sides") -> int:
    same = single == other
    print("answers: " + (f"the same top-1 classes on {what}" if same else
                         f"DIFFER: {single.most_common(3)} vs {other.most_common(3)}"))
    return 0 if same else 1


def pool_mode(args, photos: list[str], cores: list[int]) -> int:
    """A warm Pool against a model loaded once here, over batches of each size."""
    import edgeaccel.ray
    from edgeaccel.imageio import read_image

    sizes = sorted(int(x) for x in args.sizes.split(","))
    num_cpus, batch_size = args.num_cpus or 1, args.batch_size or 8
    print(f"batches of {sizes} images ({len(photos)} photos repeated), {args.model.name}, cores {cores}; Pool: "
          f"{args.actors} actors x {num_cpus:g} CPU, {args.threads_per_actor} thread(s) each, {batch_size} images a "
          f"call, paths read on the driver and decoded in the actors; single process: {args.cpus} threads, "
          "read_image + predict")
    start = time.perf_counter()
    model = edgeaccel.load(args.model, task="classify", selection=edgeaccel.SelectionOptions(calibrate=False),
                           runtime=edgeaccel.RuntimeOptions(threads=args.cpus))
    model.predict(read_image(photos[0]))
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    pool = edgeaccel.ray.Pool(args.model, task="classify", actors=args.actors, num_cpus=num_cpus,
                              threads_per_actor=args.threads_per_actor, batch_size=batch_size)
    pool.predict_batch(photos[:1])
    start_s = time.perf_counter() - start
    print(f"start-up to the first answer: single process {load_s:.2f} s (load), Pool {start_s:.2f} s (actors "
          f"start and load; paid once, then kept)")
    rows, failed = [], 0
    executor = model.executor.name
    with model, pool:
        for n in sizes:
            paths = [photos[i % len(photos)] for i in range(n)]
            took: dict[str, list[float]] = {"single": [], "pool": []}
            answers: dict[str, Counter] = {}
            for r in range(args.repeats):
                for mode in (["single", "pool"] if r % 2 == 0 else ["pool", "single"]):
                    t = time.perf_counter()
                    if mode == "single":
                        labels = Counter(model.predict(read_image(p)).top.class_id for p in paths)
                    else:
                        labels = Counter(r.top.class_id for r in pool.predict_batch(paths))
                    took[mode].append(time.perf_counter() - t)
                    answers[mode] = labels
            failed |= answers["single"] != answers["pool"]
            single, warm = statistics.median(took["single"]), statistics.median(took["pool"])
            rows.append((n, single, warm))
            print(f"  {n:5d} images: single {n / single:6.1f} images/s, warm Pool {n / warm:6.1f} images/s, Pool/single "
                  f"{single / warm:.2f}; with start-up: single {load_s + single:6.2f} s, Pool {start_s + warm:6.2f} s")
    warm_from = _wins_from([(n, warm < single) for n, single, warm in rows])
    cold_from = _wins_from([(n, start_s + warm < load_s + single) for n, single, warm in rows])
    print("crossover, warm (Pool kept across calls): " +
          (f"the Pool is faster at every size from {warm_from} images a call" if warm_from else
           f"none up to {sizes[-1]} images (the Pool is not faster at the largest size) on these cores"))
    n, single, warm = rows[-1]
    per_single, per_pool = single / n, warm / n
    if cold_from:
        cold = f"from {cold_from} images (measured)"
    elif per_pool < per_single:
        cold = f"about {(start_s - load_s) / (per_single - per_pool):.0f} images (extrapolated from {n})"
    else:
        cold = "never on these cores (the warm Pool is not faster per image)"
    print(f"crossover, cold (start-up counted once): {cold}")
    print(f"executors: single process {executor}, Pool actors {sorted(set(pool.executors))}")
    print("answers: " + ("the same top-1 classes on both sides at every size" if not failed else "DIFFER"))
    return int(failed)


def _wins_from(wins: list[tuple[int, bool]]) -> int | None:
    """The smallest size from which the Pool wins at every larger size measured (None: not at the largest)."""
    first = None
    for n, won in wins:
        first = (first or n) if won else None
    return first


def nodes_mode(args, photos: list[str]) -> int:
    """SIMULATED nodes on this machine: one Ray cluster of k nodes of 1 CPU each, one actor per node."""
    import ray
    from ray.cluster_utils import Cluster

    import edgeaccel.ray

    counts = [int(x) for x in args.nodes.split(",")]
    paths = [photos[i % len(photos)] for i in range(args.images)]
    print(f"SIMULATED nodes (ray.cluster_utils.Cluster on this one machine, 1 CPU each, sharing cores "
          f"{sorted(os.sched_getaffinity(0))}): {args.images} images, {args.model.name}, one Pool actor per node "
          f"(spread=True), {args.threads_per_actor} thread(s) each")
    base, answers = None, {}
    for k in counts:
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        for _ in range(k - 1):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        try:
            start = time.perf_counter()
            with edgeaccel.ray.Pool(args.model, task="classify", actors=k, num_cpus=1, spread=True,
                                    threads_per_actor=args.threads_per_actor,
                                    batch_size=args.batch_size or 8) as pool:
                pool.predict_batch(photos[:k])
                start_s = time.perf_counter() - start
                took = []
                for _ in range(args.repeats):
                    t = time.perf_counter()
                    answers[k] = Counter(r.top.class_id for r in pool.predict_batch(paths))
                    took.append(time.perf_counter() - t)
                nodes = len({a["node_id"] for a in pool.actors})
        finally:
            ray.shutdown()
            cluster.shutdown()
        rate = args.images / statistics.median(took)
        base = base or rate
        print(f"  {k} simulated node(s), actors on {nodes} distinct node(s): start-up {start_s:.2f} s, "
              f"{rate:6.1f} images/s warm (median of {args.repeats}), x{rate / base:.2f} of the first")
    first = answers[counts[0]]
    return max([report_answers(first, answers[k], f"{counts[0]} and {k} nodes") for k in counts[1:]], default=0)

if __name__ == "__main__":
    sys.exit(main())
