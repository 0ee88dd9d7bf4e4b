"""``edgeaccel run MODEL --duration S --policy P``: serve a model for a while under a scheduling policy, showing
throughput, latency and temperatures live (one line refreshed per second), then a summary; ``--trace`` writes
every scheduling decision as CSV. ``--simulate`` tries the policy on a simulated hot accelerator beside a CPU
(a scenario of the benchmark suite, chosen by --seed) for S simulated seconds; its figures are labelled simulated."""

from __future__ import annotations

import argparse
import json
import sys
import time


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sustained run (scheduling)")
    g.add_argument("--duration", type=float, metavar="SECONDS",
                   help="serve for this long under --policy instead of --runs timed runs")
    g.add_argument("--policy", choices=("latency", "efficiency", "thermal", "power"), default=None,
                   help="scheduling policy over every executor that can run the model (default with --duration: "
                        "thermal)")
    g.add_argument("--power-budget", type=float, metavar="WATTS", help="the budget for --policy power")
    g.add_argument("--trace", metavar="CSV", help="write every scheduling decision to this CSV file")
    g.add_argument("--concurrency", type=int, default=4, help="requests kept in flight (default 4)")
    g.add_argument("--rate", type=float, metavar="PER_S", help="offer this many requests per second instead")
    g.add_argument("--deadline-ms", type=float, help="each request must finish within this many milliseconds")
    g.add_argument("--simulate", action="store_true",
                   help="run the policy on a simulated accelerator + CPU (a benchmark scenario, --seed picks it; "
                        "simulated time; --duration in simulated s; default load 90%% of the sustainable optimum)")
    g.add_argument("--ambient", type=float, default=35.0, help="simulated ambient temperature in C (default 35)")


def wanted(args: argparse.Namespace) -> bool:
    return args.duration is not None or args.simulate or args.policy is not None


def main(args: argparse.Namespace) -> int:
    from ..errors import InputError

    if args.duration is None:
        args.duration = 60.0 if args.simulate else None
    if args.duration is None or args.duration <= 0:
        raise InputError("--policy/--simulate need a positive --duration in seconds", hint="e.g. --duration 60")
    if args.concurrency < 1 or (args.rate is not None and args.rate <= 0):
        raise InputError("--concurrency must be at least 1 and --rate positive")
    policy = args.policy or "thermal"
    if policy == "power" and not args.power_budget:
        raise InputError("--policy power needs --power-budget WATTS")
    if args.simulate:
        return _simulated(args, policy)
    return _real(args, policy)


def _real(args, policy: str) -> int:
    from ..loader import schedule
    from ..telemetry.utilization import UtilizationSampler
    from . import quiet_native_stderr
    from .inputs import prepare_inputs
    from .options import runtime_options, selection_options

    with quiet_native_stderr():
        model = schedule(args.model, policy, power_budget_w=args.power_budget, executor=args.executor,
                         device=args.device, selection=selection_options(args), runtime=runtime_options(args))
    live = Live(sys.stdout)
    with model:
        arrays, _ = prepare_inputs(model, args)
        out = sys.stderr if args.json else sys.stdout
        for name, info in model.executors.items():
            print(f"executor  {name}: {info.runtime} {info.version} on {info.device} ({info.reason})", file=out)
        for event in model.fallbacks:
            print(f"fallback  {event}", file=out)
        with UtilizationSampler() as sampler:  # CPU, memory and accelerators while serving
            failures, interrupted = _serve(model, arrays, args, live if not args.json else None)
        live.end()
        stats = model.stats
        if args.trace:
            model.trace.to_csv(args.trace)
        answer = _answer(model, arrays, args)
    if interrupted:
        print("interrupted: the summary covers the time served until Ctrl-C", file=sys.stderr)
    _summary(stats, args, failures, model.trace, answer, sampler)
    return 130 if interrupted else 0


def _answer(model, arrays, args) -> dict:
    """One more request after serving: what the model answers, shown as `run` shows it (labels, top-k)."""
    from .output_view import describe, read_labels

    return describe(model, list(model.run(arrays)), read_labels(args.labels), args.top_k)


def _serve(model, arrays, args, live) -> tuple[dict[str, int], bool]:
    """Closed loop (``--concurrency`` requests in flight) or open loop (``--rate``) for ``--duration`` seconds;
    Ctrl-C ends it early and the requests in flight are still settled, so that the summary can be printed."""
    deadline = args.deadline_ms / 1000.0 if args.deadline_ms else None
    failures: dict[str, int] = {}
    start = time.monotonic()
    end = start + args.duration
    pending: list = []

    def settle(block: bool) -> None:
        keep = []
        for f in pending:
            if block or f.done():
                exc = f.exception()
                if exc is not None:
                    failures[type(exc).__name__] = failures.get(type(exc).__name__, 0) + 1
            else:
                keep.append(f)
        pending[:] = keep

    interrupted = False
    try:
        _loop(model, arrays, args, live, deadline, start, end, pending, settle)
    except KeyboardInterrupt:
        interrupted = True
    settle(True)
    return failures, interrupted


def _loop(model, arrays, args, live, deadline, start, end, pending, settle) -> None:
    next_line = start + 1.0
    sent = 0
    while (now := time.monotonic()) < end:
        if args.rate:
            due = int((now - start) * args.rate) + 1
            while sent < due:
                pending.append(model.submit(arrays, deadline=deadline))
                sent += 1
            time.sleep(min(0.005, 1.0 / args.rate))
        else:
            while len(pending) < args.concurrency:
                pending.append(model.submit(arrays, deadline=deadline))
            pending[0].exception()  # wait for the oldest
        settle(False)
        if live is not None and now >= next_line:
            live.show(model, now - start)
            next_line += 1.0


class Live:
    """One status line refreshed per second ('\\r' on a terminal, a line per second otherwise)."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.last = (0.0, 0)
        self.shown = False

    def show(self, model, elapsed: float, simulated: bool = False) -> None:
        stats = model.stats if hasattr(model, "stats") else model
        done = stats.completed
        rate = (done - self.last[1]) / (elapsed - self.last[0]) if elapsed > self.last[0] else 0.0
        self.last = (elapsed, done)
        lat = [e.latency_ms for e in stats.executors.values() if e.latency_ms]
        p50 = _ms(max(x["p50"] for x in lat)) if lat else "    n/a"
        p99 = _ms(max(x["p99"] for x in lat)) if lat else "    n/a"
        temps = []
        for name, d in stats.devices.items():
            temps.append(f"{name} {d.last_temp_c:.1f}C" if d.last_temp_c is not None else f"{name} n/a")
        tag = "[simulated] " if simulated else ""
        text = (f"{tag}{elapsed:6.0f}s {rate:8.1f} inf/s  p50 {p50} ms  p99 {p99} ms  "
                f"{'  '.join(temps)}")
        if self.tty:
            self.stream.write("\r" + text.ljust(100))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self.shown = True

    def end(self) -> None:
        if self.tty and self.shown:
            self.stream.write("\n")
            self.stream.flush()


def _ms(value) -> str:
    """A latency for the live line; a device that served nothing yet has none (not NaN)."""
    return "    n/a" if value is None or value != value else f"{value:7.2f}"


def _summary(stats, args, failures: dict[str, int], trace, answer: dict | None = None, sampler=None) -> None:
    """``sampler``: the UtilizationSampler of a real run (a simulated one has no utilization to show)."""
    if args.json:
        body = stats.as_dict()
        figures = body["simulated"] if stats.simulated else body
        figures["failures"] = failures
        figures["trace"] = args.trace
        if answer is not None:
            body["answer"] = {k: answer[k] for k in ("kind", "top_k", "top_k_of")}
        if sampler is not None:
            body["utilization"] = sampler.summary()
        json.dump({"schema": "edgeaccel.run.sustained/1", **body}, sys.stdout, indent=2, default=str)
        print()
        return
    tag = "[simulated] " if stats.simulated else ""
    print(f"{tag}summary")
    for line in stats.lines():
        print(line)
    actions: dict[str, int] = {}
    for record in trace:
        actions[record.action] = actions.get(record.action, 0) + 1
    print(f"{tag}  decisions by action: " + ", ".join(f"{a} {n}" for a, n in sorted(actions.items())))
    if failures:
        print(f"{tag}  failed requests: " + ", ".join(f"{k} {v}" for k, v in sorted(failures.items())))
    if args.trace:
        print(f"{tag}  trace: {args.trace} ({len(trace)} decisions)")
    if sampler is not None:
        print("\n".join(sampler.lines()))
    if answer is not None:
        from .output_view import print_outputs

        print(f"answer    (one request after serving) {answer['kind']}")
        print_outputs(answer)


def _simulated(args, policy_name: str) -> int:
    """Run the policy in simulated time on one of the benchmark's scenarios (``--seed`` picks it): a hot, fast
    accelerator beside a slower CPU, at ``--ambient``. The model file is only described, not run: simulated
    devices have their own service times."""
    import dataclasses

    from ..formats import describe
    from ..scheduling.policies import make_policy
    from ..sim.optimum import sustained_optimum
    from ..sim.run import Arrivals, simulate
    from ..sim.scenarios import make_scenario

    info = describe(args.model[0] if isinstance(args.model, list) else args.model)
    scenario = make_scenario(args.seed)
    devices = [dataclasses.replace(d, ambient_c=args.ambient) for d in scenario.devices]
    scenario = dataclasses.replace(scenario, ambient_c=args.ambient, devices=tuple(devices))
    optimum, duty = sustained_optimum(devices)
    rate = args.rate or 0.9 * optimum
    out = sys.stderr if args.json else sys.stdout
    print(f"[simulated] {info.path.name} stands in as the workload; devices of scenario {scenario.describe()}",
          file=out)
    print(f"[simulated] sustained optimum under the passive trips {optimum:.1f} inf/s (duty "
          + ", ".join(f"{k} {v:.2f}" for k, v in duty.items()) + f"); offered {rate:.1f} req/s, bursty", file=out)
    live = Live(sys.stdout) if not args.json else None
    step = max(1.0, args.duration / 20)
    marks = {"next": step}

    def progress(t, scheduler):
        if live is not None and t >= marks["next"]:
            live.show(scheduler.stats(t), t, simulated=True)
            marks["next"] += step

    deadline = args.deadline_ms / 1000.0 if args.deadline_ms else None
    result = simulate(devices, make_policy(policy_name, args.power_budget), Arrivals(rate, deadline_s=deadline),
                      args.duration, seed=args.seed, keep_trace=True, progress=progress)
    if live is not None:
        live.end()
    if args.trace:
        result.trace.to_csv(args.trace)
    _summary(result.stats, args, {}, result.trace)
    if not args.json:
        for name, truth in result.truth.items():
            print(f"[simulated]   {name}: max {truth['max_temp_c']:.1f} C, above passive "
                  f"{truth['above_passive_s']:.1f} s, throttled by the kernel {truth['throttled_s']:.1f} s")
    return 0
