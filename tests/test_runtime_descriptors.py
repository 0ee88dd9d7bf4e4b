"""Runtime descriptors (runtimes/*.yaml): the shipped ones validate; a broken one names file and key."""

from __future__ import annotations

import textwrap

import pytest

from edgeaccel.errors import ConfigError
from edgeaccel.executors.registry import load_descriptor, runtimes
from edgeaccel.modelinfo import Format

GOOD = """\
    name: demo
    executor: demo.module:DemoExecutor
    formats: [tflite]
    devices:
      - name: CPU
        kind: cpu
      - name: EdgeTPU
        kind: edgetpu
        delegate: libedgetpu.so.1
        formats: [edgetpu-tflite]
        requires: libedgetpu from an apt repository
        planned: true
"""


def write(tmp_path, text: str, name: str = "demo.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_shipped_descriptors_say_formats_devices_how_and_extra():
    found = runtimes()
    assert {"litert", "onnxruntime", "openvino"} <= set(found)
    ort = found["onnxruntime"]
    assert ort.target("CUDA").provider == "CUDAExecutionProvider"
    assert ort.install_hint("CUDA").startswith("pip install 'edgeaccel[gpu]'")
    assert ort.install_hint() == "pip install 'edgeaccel[onnx]'"  # the CPU build, as before
    assert found["openvino"].target("NPU").device_name == "NPU"
    edgetpu = found["litert"].target("EdgeTPU")
    assert edgetpu.delegate == "libedgetpu.so.1" and not edgetpu.planned
    assert ("EdgeTPU", "edgetpu") in found["litert"].devices  # the LiteRT executor drives it now
    # planned devices are described but not offered to the selector: LiteRT's NPU accelerator
    assert found["litert"].target("NPU").planned and ("NPU", "npu") not in found["litert"].devices
    assert found["litert"].reads(Format.EDGETPU_TFLITE, "EdgeTPU")
    assert not found["litert"].reads(Format.TFLITE, "EdgeTPU")
    assert not found["litert"].reads(Format.EDGETPU_TFLITE, "CPU")


def test_a_good_descriptor_parses(tmp_path):
    desc = load_descriptor(write(tmp_path, GOOD))
    assert desc.devices == (("CPU", "cpu"),)
    assert desc.install_hint("EdgeTPU") == "libedgetpu from an apt repository"


@pytest.mark.parametrize(
    "old, new, key, words",
    [
        ("kind: cpu", "kind: cpus", "devices[0].kind", "not one of"),
        ("delegate: libedgetpu.so.1", "delegate: [a]", "devices[1].delegate", "expected a string"),
        ("planned: true", "planned: yes-please", "devices[1].planned", "true or false"),
        ("formats: [edgetpu-tflite]", "formats: [pytorch]", "devices[1].formats[0]", "not one of"),
        ("    requires:", "    provides:", "devices[1].provides", "unknown key"),
        ("name: EdgeTPU", "name: CPU", "devices[1].name", "described twice"),
        ("executor: demo.module:DemoExecutor\n", "", "executor", "is required"),
    ],
)
def test_a_broken_descriptor_names_file_and_key(tmp_path, old, new, key, words):
    text = textwrap.dedent(GOOD)
    assert old in text
    path = write(tmp_path, text.replace(old, new, 1))
    with pytest.raises(ConfigError) as info:
        load_descriptor(path)
    assert str(path) in str(info.value) and f":{key}:" in str(info.value) and words in str(info.value)


PLUGIN = '''
import numpy as np
from edgeaccel.executors.base import Availability, Executor, ExecutorInfo
from edgeaccel.modelinfo import Format


class EchoExecutor(Executor):
    """A third-party executor: returns its inputs."""

    runtime = "echo"
    formats = frozenset({Format.TFLITE})
    devices = ("CPU",)
    distributions = (("echo_plugin", "echo-plugin"),)

    @classmethod
    def availability(cls, device=None):
        return Availability(True, "always")

    @property
    def info(self):
        return ExecutorInfo("echo", "1.0", self.device, "f32")

    def run(self, inputs):
        return [np.array(a) for a in inputs]

    def close(self):
        pass
'''


def test_a_plugin_executor_arrives_through_its_entry_point(tmp_path, monkeypatch):
    (tmp_path / "echo_plugin.py").write_text(PLUGIN)
    info = tmp_path / "echo_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[edgeaccel.executors]\necho = echo_plugin:EchoExecutor\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    runtimes.cache_clear()
    try:
        found = runtimes()
        assert found["echo"].executor == "echo_plugin:EchoExecutor"
        assert found["echo"].load_class().installed() == "1.0"
        assert "litert" in found  # the shipped ones stay
    finally:
        runtimes.cache_clear()
