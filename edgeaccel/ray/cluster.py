"""``edgeaccel probe --ray``: survey every node of a running Ray cluster, one task pinned to each node.

Connecting never starts a cluster: with no cluster to join, or nothing answering at the address, it is an
error that says how to start one. Each node reports its devices, runtimes, the executors edgeaccel can choose
from there, and the resources ``edgeaccel.ray.node_resources`` derives for it, checked against what the node
declared to Ray (an Edge TPU the node has but did not declare is one no actor asking for it will reach)."""

from __future__ import annotations

import socket

from ..errors import ConfigError
from ._import import import_ray

START_HINT = ("start one with `ray start --head $(edgeaccel probe --ray-resources)` (and `ray start --address "
              "HEAD:6379 $(edgeaccel probe --ray-resources)` on every other node), or give the address of a running "
              "one: --ray HOST:PORT (or $RAY_ADDRESS)")
NODE_TIMEOUT_S = 120.0  # a node whose task has not answered by then is listed as not answering


def survey_cluster(address: str = "auto", timeout_s: float = NODE_TIMEOUT_S) -> list[dict]:
    """One dict per alive node of the cluster at ``address`` ("auto": the one this machine runs or
    $RAY_ADDRESS), or of the cluster this process is already connected to."""
    ray = import_ray()
    if not ray.is_initialized():
        connect(ray, address)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [n for n in ray.nodes() if n.get("Alive")]
    remote = ray.remote(num_cpus=0, max_retries=0)(survey_node)
    refs = [remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote()
            for n in nodes]
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
    rows = []
    for node, ref in zip(nodes, refs, strict=True):
        base = {"node_id": node["NodeID"], "ip": node.get("NodeManagerAddress", "?"),
                "declared": _declared(node.get("Resources", {}))}
        if ref not in ready:
            ray.cancel(ref, force=True)
            rows.append({**base, "error": f"did not answer in {timeout_s:g} s"})
            continue
        try:
            rows.append({**base, **ray.get(ref)})
        except Exception as exc:  # edgeaccel missing or broken on that node: its row says so, the others stand
            rows.append({**base, "error": _first_line(exc)})
    for row in rows:
        row["undeclared"] = {k: v for k, v in row.get("resources", {}).items()
                             if row["declared"].get(k, 0) < v}
    return rows


def connect(ray, address: str) -> None:
    """Join the cluster at ``address`` or raise ConfigError with how to start one; quickly, in both cases
    (ray.init waits minutes for an address where nothing listens)."""
    target = address
    try:
        from ray._private.services import canonicalize_bootstrap_address

        target = canonicalize_bootstrap_address(address) or address
    except ConnectionError:
        raise ConfigError("no Ray cluster is running here to survey (and $RAY_ADDRESS is not set)",
                          hint=START_HINT) from None
    except ImportError:  # a Ray without that helper: ray.init says the same, only slower
        pass
    host, _, port = target.rpartition(":")
    if host and port.isdigit():
        try:
            socket.create_connection((host, int(port)), timeout=3).close()
        except OSError as exc:
            where = target if target == address else f"{address} ({target})"
            raise ConfigError(f"no Ray cluster answers at {where}: {exc.strerror or exc}", hint=START_HINT) from None
    try:
        ray.init(address=target, log_to_driver=False)
    except ConnectionError as exc:
        raise ConfigError(f"cannot join the Ray cluster at {target}: {exc}", hint=START_HINT) from None


def survey_node() -> dict:
    """Runs on the node: what it has (the probe without telemetry) and what edgeaccel can run there."""
    import ray

    import edgeaccel
    from edgeaccel import probe

    from .resources import node_resources

    report = probe(telemetry=False)
    runtimes = [r for r in report.runtimes.items if r.usable]
    usable = report.usable_devices()
    from ..executors.device import base_of

    return {
        "hostname": socket.gethostname(),
        "ray_node_id": ray.get_runtime_context().get_node_id(),
        "edgeaccel": edgeaccel.__version__,
        "devices": sorted(usable),
        "present_not_usable": sorted(report.present_devices() - usable),
        "runtimes": [f"{r.name} {r.version or '?'}" for r in runtimes],
        "executors": [f"{r.name}:{d}" for r in runtimes for d in r.reaches if base_of(d) in usable],
        "resources": node_resources(report),
        "problems": [f"{p.subject}: {p.reason}" for p in report.problems],
    }


def render(rows: list[dict]) -> str:
    """The table ``edgeaccel probe --ray`` prints: a line per node, then what to fix on which node."""
    head = ("node", "ip", "devices", "runtimes", "executors", "resources")
    table = []
    notes = []
    for row in rows:
        node = row["node_id"][:8]
        if "error" in row:
            table.append((node, row["ip"], "?", "?", "?", "?"))
            notes.append(f"{node}: {row['error']}")
            continue
        resources = ", ".join(f"{k}={v}" for k, v in row["resources"].items()) or "-"
        table.append((node, row["ip"], ", ".join(row["devices"]), ", ".join(row["runtimes"]) or "none",
                      ", ".join(row["executors"]) or "none", resources))
        if row["undeclared"]:
            from .resources import ray_start_args

            notes.append(f"{node}: has {', '.join(row['undeclared'])} but did not declare it to Ray; restart it with "
                         f"`ray start ... {' '.join(ray_start_args(row['resources']))}`")
        if row["present_not_usable"]:
            notes.append(f"{node}: {', '.join(row['present_not_usable'])} present but not usable by the Ray user "
                         "(run `edgeaccel probe` there for the fix)")
    widths = [max(len(str(r[i])) for r in [head, *table]) for i in range(len(head))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [head, *table]]
    lines.append(f"{len(rows)} node{'s' if len(rows) != 1 else ''}")
    return "\n".join(lines + (["", *notes] if notes else []))


def _declared(resources: dict) -> dict:
    return {k: v for k, v in resources.items() if not k.startswith(("node:", "accelerator_type:"))}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return next((line for line in reversed(text) if line.strip()), type(exc).__name__)
