"""NVIDIA CUDA GPUs: NVML through nvidia-ml-py (module ``pynvml``) when it is importable, else the
driver's /proc/driver/nvidia files, and the PCI bus for a GPU whose driver is not loaded.

/proc/driver/nvidia/version: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  <date>" (the
open kernel module says "NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  Release Build ...").
/proc/driver/nvidia/gpus/<bus>/information: "Model:", "GPU UUID:", "Bus Location:", "Device Minor:" lines;
the minor number N is the GPU's /dev/nvidiaN. Neither file gives memory nor compute capability: NVML does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .access import Access
from .common import Accelerator, Found, Looked, Problem, node_verdict
from .families import among_pci
from ..devfs import Root, as_tree
from .pci import PciDevice, read_pci

NVIDIA_VENDOR = "0x10de"
DEVICES = ("CUDA", "TensorRT")
NODE_FIX = "the NVIDIA driver makes /dev/nvidia* mode 0666; check NVreg_DeviceFileMode/NVreg_DeviceFileGID " \
           "in /etc/modprobe.d, or add the user to the group that owns the nodes"
NVML_FIX = "pip install nvidia-ml-py (in edgeaccel[gpu]) to read memory and compute capability through NVML"
LOOKED_FOR = ("the nvidia driver's /proc/driver/nvidia/version and /proc/driver/nvidia/gpus/<bus>/information",
              "PCI display controllers of vendor 0x10de (class 0x03xxxx) in /sys/bus/pci/devices",
              "NVML through nvidia-ml-py (this machine only)", "device nodes /dev/nvidiaN and /dev/nvidiactl")


@dataclass(frozen=True)
class ProcGpu:
    model: str | None
    bus: str | None
    minor: int | None
    uuid: str | None


def parse_driver_version(text: str) -> str | None:
    m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)", text)
    return m.group(1) if m else None


def parse_gpu_information(text: str) -> ProcGpu | None:
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    minor = fields.get("Device Minor", "")
    if "Model" not in fields and not minor.isdigit():
        return None
    return ProcGpu(fields.get("Model") or None, fields.get("Bus Location") or None,
                   int(minor) if minor.isdigit() else None, fields.get("GPU UUID") or None)


def _nvml_gpus(nvml) -> tuple[list[dict], str | None]:
    """Name, memory, driver and compute capability of each GPU through an initialized NVML module."""
    gpus = []
    try:
        nvml.nvmlInit()
    except Exception as exc:
        return [], f"NVML failed to initialize: {exc}"
    try:
        driver = nvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else str(driver)
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            name = nvml.nvmlDeviceGetName(handle)
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
            gpus.append({
                "index": index, "name": name.decode() if isinstance(name, bytes) else str(name),
                "memory_mib": int(nvml.nvmlDeviceGetMemoryInfo(handle).total) // (1 << 20),
                "driver_version": driver, "compute_capability": f"{major}.{minor}",
                "bus": _bus_id(nvml, handle), "minor": _minor(nvml, handle, index),
            })
    except Exception as exc:
        return gpus, f"NVML query failed: {exc}"
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass
    return gpus, None


def _minor(nvml, handle, index: int) -> int:
    try:
        return int(nvml.nvmlDeviceGetMinorNumber(handle))  # N of /dev/nvidiaN
    except Exception:
        return index


def _bus_id(nvml, handle) -> str | None:
    try:
        bus = nvml.nvmlDeviceGetPciInfo(handle).busId
        bus = bus.decode() if isinstance(bus, bytes) else str(bus)
        return bus[-12:].lower()  # NVML writes 8 domain digits, sysfs and /proc 4
    except Exception:
        return None


def _load_nvml():
    """The pynvml module, or the reason it cannot be used. Only called on the real root."""
    import importlib.util

    try:
        if importlib.util.find_spec("pynvml") is None:
            return None, "nvidia-ml-py is not installed"
        import pynvml

        return pynvml, None
    except Exception as exc:
        return None, f"pynvml failed to import: {exc}"


def read_nvidia(root: Root = Path("/"), access: Access | None = None, pci: list[PciDevice] | None = None,
                nvml: Any = None) -> Found:
    """NVIDIA GPUs below ``root``. ``nvml`` is an NVML module (``pynvml``); by default it is imported on
    the real root only, since NVML talks to this machine's driver."""
    tree = as_tree(root)
    access = access if access is not None else Access(tree)
    pci = read_pci(tree)[0] if pci is None else pci
    version_read = tree.read("/proc/driver/nvidia/version")
    driver = parse_driver_version(version_read.text or "")
    nvml_reason = None if tree.is_real else "NVML is only queried on the real root"
    if nvml is None and tree.is_real:
        nvml, nvml_reason = _load_nvml()
    nvml_gpus: list[dict] = []
    if nvml is not None:
        nvml_gpus, nvml_reason = _nvml_gpus(nvml)
    accelerators, problems = [], []
    names, gpus_reason = tree.listdir("/proc/driver/nvidia/gpus")
    reported = set()
    for position, bus in enumerate(names):
        source = f"/proc/driver/nvidia/gpus/{bus}/information"
        info_read = tree.read(source)
        info = parse_gpu_information(info_read.text or "")
        if info is None:
            problems.append(Problem(f"NVIDIA GPU {bus}", f"{source} " + (info_read.reason or "has no Model line")))
            continue
        match = next((g for g in nvml_gpus if g.get("bus") == bus.lower()), None)
        if match is None and len(nvml_gpus) == len(names):
            match = nvml_gpus[position]
        reported.add(bus.lower())
        minor = info.minor if info.minor is not None else position
        details = {"driver_version": driver, "bus": info.bus or bus, "uuid": info.uuid, "minor": minor}
        accelerators.append(_gpu(access, match, info.model or f"NVIDIA GPU {bus}", minor, details,
                                 f"NVML and {source}" if match else source, nvml_reason))
        if match:
            reported.add(match.get("bus"))
    for gpu in nvml_gpus:  # NVML sees it but /proc/driver/nvidia does not (a container with part of /proc)
        if gpu.get("bus") not in reported:
            reported.add(gpu.get("bus"))
            minor = gpu.get("minor", gpu["index"])
            accelerators.append(_gpu(access, gpu, gpu["name"], minor, {"bus": gpu.get("bus"), "minor": minor},
                                     "NVML", None))
    if accelerators and not nvml_gpus and nvml_reason and tree.is_real:
        problems.append(Problem("NVML", f"{nvml_reason}: GPU memory and compute capability are unknown", NVML_FIX))
    for dev in pci:
        if dev.vendor != NVIDIA_VENDOR or not (dev.pci_class or "").startswith("0x03"):
            continue  # 0x03xxxx: display controllers (VGA and 3D); the audio function shares the vendor id
        if dev.address.lower() in reported:
            continue
        if dev.driver == "nvidia":
            reason = "the nvidia driver has it but /proc/driver/nvidia/gpus has no entry for it"
            present, fix = True, "check that /proc/driver/nvidia is visible (containers: the NVIDIA Container Toolkit)"
        else:
            bound = f"bound to {dev.driver}, which CUDA cannot use" if dev.driver else "no driver bound"
            reason = f"an NVIDIA GPU is on the PCI bus but the nvidia driver does not have it ({bound})"
            present, fix = False, "install the NVIDIA driver (https://docs.nvidia.com/datacenter/tesla/" \
                                  "driver-installation-guide/) and reboot"
        accelerators.append(Accelerator(
            "nvidia-gpu", f"NVIDIA GPU {dev.device or '?'} at {dev.address}", DEVICES, f"PCI {dev.location}",
            present=present, usable=False, reason=reason, fix=fix,
            details={"bus": dev.address, "pci_device": dev.device}))
    driver_state = (f"the nvidia driver is not loaded ({version_read.path} {version_read.reason})"
                    if version_read.text is None else
                    f"the nvidia driver is loaded but {gpus_reason or '/proc/driver/nvidia/gpus is empty'}")
    return Found(tuple(accelerators), tuple(problems),
                 (Looked("cuda-gpu", LOOKED_FOR, _absent(tree.is_real, driver_state, pci, nvml_reason)),))


def _absent(real: bool, driver_state: str, pci: list[PciDevice], nvml_reason: str | None) -> str:
    """Why no NVIDIA GPU was found: the driver's files, the PCI bus, and what NVML said."""
    nvml = f"; NVML: {nvml_reason}" if nvml_reason and real else ""
    return f"{driver_state}; no NVIDIA display controller (vendor 0x10de, class 0x03xxxx) {among_pci(pci)}{nvml}"


def _gpu(access: Access, nvml_gpu: dict | None, name: str, minor: int, details: dict, found_by: str,
         nvml_reason: str | None) -> Accelerator:
    nodes = (access.node(f"/dev/nvidia{minor}"), access.node("/dev/nvidiactl"))
    usable, why, fix = node_verdict(nodes, NODE_FIX)
    details = {"driver_version": None, "memory_mib": None, "compute_capability": None, **details,
               "nvml": nvml_gpu is not None}
    if nvml_gpu:
        details.update({k: nvml_gpu[k] for k in ("memory_mib", "compute_capability", "driver_version")})
        name = nvml_gpu["name"]
    elif nvml_reason:
        details["nvml_reason"] = nvml_reason
    return Accelerator("nvidia-gpu", name, DEVICES, found_by, present=True, usable=usable,
                       reason=why or f"driver {details['driver_version'] or '?'} loaded, /dev/nvidia{minor} read-write",
                       fix=fix, nodes=nodes, details=details)
