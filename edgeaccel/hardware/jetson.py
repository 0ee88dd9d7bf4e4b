"""NVIDIA Jetson: the L4T release, the nvpmodel power mode, and the integrated GPU that CUDA and
TensorRT run on.

/etc/nv_tegra_release: "# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64, ..."
(parsed the same way by jetson_stats, jtop/core/jetson_l4t.py). nvpmodel keeps the current mode as
"pmode:0000 ..." in /var/lib/nvpmodel/status and names modes in /etc/nvpmodel.conf as
"< POWER_MODEL ID=0 NAME=MAXN >" with "< PM_CONFIG DEFAULT=2 >" (NVIDIA's nvpmodel.py frontend). The
integrated GPU is the devfreq device whose of_node is named gp10b/gv11b/ga10b/gpu (jtop/core/gpu.py);
CUDA opens /dev/nvhost-ctrl-gpu (/dev/nvgpu/igpu0/ctrl on newer L4T), which L4T's udev rules give to
group video.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .access import Access
from .common import Accelerator, Found, Looked, Problem, node_verdict
from ..devfs import Root, Tree, as_tree

IGPU_NAMES = ("gp10b", "gv11b", "ga10b", "gb10b", "gpu")
GPU_NODES = ("/dev/nvhost-ctrl-gpu", "/dev/nvgpu/igpu0/ctrl")
VIDEO_FIX = "add the user to group 'video': sudo usermod -aG video $USER, then log in again"
LOOKED_FOR = ("the L4T release in /etc/nv_tegra_release",
              f"a devfreq device in /sys/class/devfreq whose of_node is {'/'.join(IGPU_NAMES)} (the integrated GPU)",
              f"the GPU's device node {' or '.join(GPU_NODES)}")


@dataclass(frozen=True)
class L4tRelease:
    release: str  # "35.4.1"
    board: str | None


def parse_tegra_release(text: str) -> L4tRelease | None:
    m = re.search(r"#\s*R(\d+)\s*\(release\),\s*REVISION:\s*([\d.]+)", text)
    if not m:
        return None
    board = re.search(r"BOARD:\s*([^,\s]+)", text)
    return L4tRelease(f"{m.group(1)}.{m.group(2)}", board.group(1) if board else None)


def parse_nvpmodel_conf(text: str) -> tuple[dict[int, str], int | None]:
    """(mode id -> name, default id) from an nvpmodel.conf."""
    modes = {int(i): name for i, name in re.findall(r"<\s*POWER_MODEL\s+ID=(\d+)\s+NAME=(\S+)\s*>", text)}
    default = re.search(r"<\s*PM_CONFIG\s+DEFAULT=(\d+)\s*>", text)
    return modes, int(default.group(1)) if default else None


def parse_nvpmodel_status(text: str) -> int | None:
    m = re.search(r"pmode:(\d+)", text)
    return int(m.group(1)) if m else None


def _power_mode(tree: Tree) -> dict:
    conf = tree.read("/etc/nvpmodel.conf")
    modes, default = parse_nvpmodel_conf(conf.text or "")
    status = tree.read("/var/lib/nvpmodel/status")
    current = parse_nvpmodel_status(status.text or "")
    if current is not None:
        return {"power_mode_id": current, "power_mode": modes.get(current), "power_mode_source": status.path}
    if default is not None:
        return {"power_mode_id": default, "power_mode": modes.get(default),
                "power_mode_source": f"{conf.path} default ({status.path} {status.reason or 'has no pmode'})"}
    return {"power_mode_id": None, "power_mode": None,
            "power_mode_source": f"{status.path} {status.reason or 'has no pmode'}; "
                                 f"{conf.path} {conf.reason or 'has no PM_CONFIG'}"}


def _igpu(tree: Tree) -> tuple[str | None, str]:
    """The devfreq device of the integrated GPU, or None and what /sys/class/devfreq holds instead."""
    names, reason = tree.listdir("/sys/class/devfreq")
    for name in names:
        of_name = tree.read(f"/sys/class/devfreq/{name}/device/of_node/name").strip()
        if of_name in IGPU_NAMES:
            return name, ""
    return None, reason or (f"none of the {len(names)} devfreq devices is an NVIDIA GPU" if names
                            else "/sys/class/devfreq is empty")


def read_jetson(root: Root = Path("/"), access: Access | None = None, board_model: str | None = None) -> Found:
    tree = as_tree(root)
    access = access if access is not None else Access(tree)
    release_read = tree.read("/etc/nv_tegra_release")
    release = parse_tegra_release(release_read.text or "")
    igpu, no_igpu = _igpu(tree)
    if release is None and igpu is None:
        release_state = f"{release_read.path} {release_read.reason}" if release_read.text is None else \
            f"{release_read.path} is not in the known form"
        looked = (Looked("jetson", LOOKED_FOR, f"not a Jetson: {release_state} and {no_igpu}"),)
        if release_read.text is not None:  # the file is there but not in the known form
            return Found(problems=(Problem("Jetson", f"/etc/nv_tegra_release is not in the known form: "
                                           f"{release_read.text.strip()[:60]!r}"),), looked=looked)
        return Found(looked=looked)
    details = {"l4t_release": release.release if release else None, "l4t_board": release.board if release else None,
               "devfreq": igpu, **_power_mode(tree)}
    name = f"{board_model or 'NVIDIA Jetson'} integrated GPU"
    found_by = ", ".join(filter(None, ("/etc/nv_tegra_release" if release else None,
                                       f"/sys/class/devfreq/{igpu}" if igpu else None)))
    node_path = next((p for p in GPU_NODES if tree.exists(p)), None)
    if igpu is None or node_path is None:
        what = "no devfreq GPU device" if igpu is None else f"none of {', '.join(GPU_NODES)}"
        return Found((Accelerator("jetson-gpu", name, ("CUDA", "TensorRT"), found_by, present=False, usable=False,
                                  reason=f"L4T is installed but the GPU driver (nvgpu) is not loaded: {what}",
                                  fix="reflash or repair the L4T BSP (sudo apt install --reinstall nvidia-l4t-core)",
                                  details=details),), looked=(Looked("jetson", LOOKED_FOR, ""),))
    nodes = (access.node(node_path),)
    usable, why, fix = node_verdict(nodes, VIDEO_FIX)
    return Found((Accelerator("jetson-gpu", name, ("CUDA", "TensorRT"), found_by, present=True, usable=usable,
                              reason=why or f"nvgpu loaded, {node_path} read-write", fix=fix, nodes=nodes,
                              details=details),), looked=(Looked("jetson", LOOKED_FOR, ""),))
