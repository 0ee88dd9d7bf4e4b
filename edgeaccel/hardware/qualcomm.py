"""Qualcomm Hexagon DSP/NPU through FastRPC: the upstream fastrpc driver makes /dev/fastrpc-cdsp (compute
DSP, where the HTP that ONNX Runtime's QNN provider uses lives), /dev/fastrpc-adsp and -sdsp; Android and
downstream kernels name it /dev/adsprpc-smd.
"""

from __future__ import annotations

from pathlib import Path

from .access import Access
from .common import Accelerator, Found, Looked, node_verdict
from ..devfs import Root, as_tree

CDSP_NODES = ("fastrpc-cdsp", "fastrpc-cdsp-secure", "adsprpc-smd")
RULE_FIX = "give the FastRPC node to a group the user is in with a udev rule, e.g. " \
           "KERNEL==\"fastrpc-*\", MODE=\"0660\", GROUP=\"render\", and add the user to that group"
LOOKED_FOR = (f"the FastRPC compute-DSP node: {', '.join('/dev/' + n for n in CDSP_NODES)}",)


def read_qualcomm(root: Root = Path("/"), access: Access | None = None) -> Found:
    tree = as_tree(root)
    access = access if access is not None else Access(tree)
    names, dev_reason = tree.listdir("/dev")
    fastrpc = [n for n in names if n.startswith("fastrpc-") or n == "adsprpc-smd"]
    compute = [n for n in fastrpc if n in CDSP_NODES]
    if not compute:
        others = f"only {', '.join('/dev/' + n for n in fastrpc)}, which are not the compute DSP" if fastrpc \
            else dev_reason or "no /dev/fastrpc-* or /dev/adsprpc-smd node (no FastRPC driver)"
        return Found(looked=(Looked("qualcomm-npu", LOOKED_FOR, others),))
    nodes = (access.node(f"/dev/{compute[0]}"),)
    usable, why, fix = node_verdict(nodes, RULE_FIX)
    return Found((Accelerator(
        "qualcomm-dsp", "Qualcomm Hexagon compute DSP (FastRPC)", ("QNN",), f"/dev/{compute[0]}", present=True,
        usable=usable, reason=why or f"/dev/{compute[0]} read-write", fix=fix, nodes=nodes,
        details={"fastrpc_nodes": [f"/dev/{n}" for n in fastrpc], "runtime": "the QNN HTP backend"}),),
        looked=(Looked("qualcomm-npu", LOOKED_FOR, ""),))
