"""The TensorFlow executor's Cloud TPU and CUDA checks: the probe's readers judge the hardware (on this
machine and on fake trees), and TensorFlow is not imported where there is no TPU or GPU to use."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import without
from edgeaccel.executors.tensorflow import TensorFlowExecutor
from edgeaccel.hardware import Identity
from edgeaccel.testing import cloud_tpu_vm, x86_server_with_cuda_gpu

pytestmark = pytest.mark.skipif(TensorFlowExecutor.installed() is None,
                                reason="the tensorflow extra is not installed (it is in dev)")
STRANGER = Identity(uid=4242, gids=frozenset({4242}))


@without("TPU", "CUDA")
def test_tpu_and_cuda_here_answer_without_importing_tensorflow():
    code = ("import json, sys\n"
            "from edgeaccel.executors.tensorflow import TensorFlowExecutor as T\n"
            "answers = {d: str(T.availability(d)) for d in ('TPU', 'CUDA', 'GPU')}\n"
            "print(json.dumps({'answers': answers, 'imported': 'tensorflow' in sys.modules}))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["imported"] is False
    assert result["answers"]["TPU"].startswith("not a Cloud TPU VM: no Google TPU chip (PCI vendor 0x1ae0 with a TPU "
                                               "device id) on this machine")
    assert result["answers"]["CUDA"].startswith("no NVIDIA GPU with its driver on this machine")
    assert result["answers"]["GPU"] == result["answers"]["CUDA"]  # GPU is the older name of the same device


@pytest.mark.parametrize("chip, node", [("v5e", "/dev/vfio/0"), ("v4", "/dev/accel0")])
def test_a_cloud_tpu_vm_tree(tmp_path, chip, node):
    tree = cloud_tpu_vm(tmp_path, chip=chip)
    available = TensorFlowExecutor.availability("TPU", root=tmp_path)
    assert available and available.reason.startswith(f"4 Cloud TPU {chip} chip(s) usable below {tmp_path}")
    assert "checked only on this machine's own root" in available.reason
    for k in range(4):  # nodes only their owner may open: another account is refused, with the reason
        tree.node(f"/dev/vfio/{k}" if chip == "v5e" else f"/dev/accel{k}", 0o600)
    denied = TensorFlowExecutor.availability("TPU", root=tmp_path, identity=STRANGER)
    assert not denied
    assert denied.reason.startswith(f"Cloud TPU {chip} chip 0: this user cannot read and write {node} (group ")
    assert denied.reason.endswith(", mode 0600)") and "udev rule" in denied.fix


def test_a_tpu_vm_whose_driver_made_no_nodes(tmp_path):
    tree = cloud_tpu_vm(tmp_path, chip="v4")
    for k in range(4):
        tree.local(f"/dev/accel{k}").unlink()
    available = TensorFlowExecutor.availability("TPU", root=tmp_path)
    assert not available and "/dev/accel0 is missing" in available.reason


def test_a_gpu_server_tree(tmp_path):
    x86_server_with_cuda_gpu(tmp_path)
    available = TensorFlowExecutor.availability("CUDA", root=tmp_path)
    assert available and available.reason.startswith("NVIDIA H100 80GB HBM3 usable below")


def test_unknown_devices_are_named():
    assert "not 'NPU'" in TensorFlowExecutor.availability("NPU").reason
