"""Ray node resources from ``edgeaccel probe``: what ``ray start --resources`` should declare so that actors
asking for a device (``map_batches(..., device="EdgeTPU")``) land on the nodes that have it.

The names are edgeaccel's device names (the ones ``edgeaccel.load(device=...)`` takes), one unit per
accelerator this user can open now: {"EdgeTPU": 2} for two Coral sticks, {"RKNPU": 1}, {"TPU": 4}; renamed
where Ray already gives the name a meaning (RAY_NAMES). Ray's "GPU" is an NVIDIA GPU: edgeaccel's "CUDA" (and
"TensorRT") is Ray's own "GPU" resource, which Ray counts by itself and ``ray start`` takes as ``--num-gpus``,
never in ``--resources``; edgeaccel's "GPU" (an Intel GPU, OpenVINO's name) is declared as "IntelGPU" so that Ray
does not hand it to actors that asked for a CUDA device. Likewise Ray's "NPU" is a Huawei Ascend NPU (its
accelerator manager for Ascend counts them): edgeaccel's "CANN" is declared as "NPU", and edgeaccel's "NPU" (an
Intel NPU, OpenVINO's name) as "IntelNPU".
"""

from __future__ import annotations

import json

from ..errors import ConfigError

# edgeaccel device name -> Ray resource
RAY_NAMES = {"CUDA": "GPU", "TensorRT": "GPU", "GPU": "IntelGPU", "NPU": "IntelNPU", "CANN": "NPU"}
RAY_OWN = ("CPU", "GPU", "memory", "object_store_memory")  # resources Ray declares itself


def node_resources(report=None) -> dict[str, int]:
    """{resource: count} for this node (or for ``report``, a ProbeReport, e.g. of a fake tree): one unit per
    usable accelerator under its first device name (renamed by RAY_NAMES). The CPU is Ray's own: not listed."""
    if report is None:
        from .. import probe

        report = probe(runtimes=False, telemetry=False)
    counts: dict[str, int] = {}
    for acc in report.accelerators:
        if not acc.usable or not acc.devices or acc.kind == "cpu":
            continue
        name = resource_of(acc.devices[0])
        counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items()))


def resource_of(device: str) -> str:
    """The Ray resource a device string asks for: its base name ("EdgeTPU:usb:0" -> "EdgeTPU"), renamed by
    RAY_NAMES ("CUDA" -> "GPU", "GPU" -> "IntelGPU", "CANN" -> "NPU")."""
    from ..executors.device import DeviceRef

    try:
        base = DeviceRef.parse(device).base
    except ValueError as exc:
        raise ConfigError(str(exc), key="device") from None
    return RAY_NAMES.get(base, base)


def actor_request(device: str | None, cpus: float) -> dict:
    """Ray options for one actor that runs on ``device`` with ``cpus`` CPUs: num_cpus, and num_gpus or
    resources. An Edge TPU takes one process at a time, so every device is asked for as one whole unit."""
    options: dict = {"num_cpus": cpus}
    if device is None or resource_of(device) == "CPU":
        return options
    name = resource_of(device)
    if name == "GPU":
        options["num_gpus"] = 1
    else:
        options["resources"] = {name: 1}
    return options


def check_offered(ray, device: str | None) -> None:
    """ConfigError now, instead of actors that wait forever, when no node of the cluster offers the device."""
    if device is None or resource_of(device) == "CPU":
        return
    name = resource_of(device)
    offered = ray.cluster_resources().get(name, 0)
    if offered < 1:
        how = "--num-gpus" if name == "GPU" else "--resources"
        raise ConfigError(f"no node of this Ray cluster offers the resource {name!r} that device={device!r} needs "
                          f"(the cluster offers {_offered(ray)})", key="device",
                          hint=f"start each node that has one with `ray start ... $(edgeaccel probe --ray-resources)`"
                               f" (it declares {how} from the survey), or leave device= out to run on CPUs")


def ray_start_args(resources: dict[str, int]) -> list[str]:
    """Arguments for ``ray start``: ``--resources={...}`` (compact JSON, one shell word) and ``--num-gpus``."""
    own = {k: v for k, v in resources.items() if k not in RAY_OWN}
    args = [f"--resources={json.dumps(own, separators=(',', ':'))}"] if own else []
    if resources.get("GPU"):
        args.append(f"--num-gpus={resources['GPU']}")
    return args


def _offered(ray) -> str:
    have = {k: v for k, v in ray.cluster_resources().items()
            if not k.startswith(("node:", "accelerator_type:")) and k not in ("memory", "object_store_memory")}
    return ", ".join(f"{k}={v:g}" for k, v in sorted(have.items())) or "nothing"
