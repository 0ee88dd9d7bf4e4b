"""Device profiles: every shipped one loads and cites its figures; a broken one names file and key."""

from __future__ import annotations

import textwrap

import pytest

from edgeaccel.errors import ConfigError
from edgeaccel.profiles import get_profile, load_profile, load_profiles

REQUIRED = {"generic-x86", "generic-arm", "rpi5", "rpi5-coral-usb", "coral-dev-board", "jetson-orin-nano",
            "x86-nvidia-gpu", "intel-core-ultra", "rk3588", "cloud-tpu-vm"}

GOOD = """\
    schema: edgeaccel.profile/1
    name: demo
    title: Demo board
    match:
      board: [Demo Board]
      priority: 10
    accelerators:
      - device: EdgeTPU
        kind: edgetpu
        name: Demo TPU
        precisions: [int8]
        tops_int8: 4
        source: https://example.com/datasheet
      - device: CPU
        kind: cpu
        name: Demo CPU
    preference:
      latency: [EdgeTPU, CPU]
      efficiency: [EdgeTPU, CPU]
    runtimes:
      - device: CPU
        order: [litert, onnxruntime]
        why: measured
    power:
      budget_w: 10
      idle_w: 2
      source: https://example.com/power
    thermal:
      passive_c: 80
      critical_c: 100
      source:
        passive_c: https://example.com/passive
        critical_c: https://example.com/critical
    notes: a demo
"""


def write(tmp_path, text: str, name: str = "demo.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def good() -> str:
    return textwrap.dedent(GOOD)


def test_every_shipped_profile_loads():
    profiles = load_profiles()
    assert REQUIRED <= set(profiles)
    for name, profile in profiles.items():
        assert profile.name == name and profile.title and profile.accelerators
        assert profile.source_file.endswith(f"{name}.yaml"), "one profile per file, named after it"
        assert set(profile.preference) == {"latency", "efficiency"}
        for goal, order in profile.preference.items():
            assert "CPU" in order, f"{name}: the CPU must rank somewhere for {goal}"


def test_every_shipped_figure_is_cited_with_a_url():
    for profile in load_profiles().values():
        for acc in profile.accelerators:
            figures = [acc.tops_int8, acc.tflops_f16, acc.tflops_bf16, acc.memory_mb, acc.typical_power_w]
            if any(f is not None for f in figures):
                assert "https://" in acc.source, (profile.name, acc.device)
        if profile.power_budget_w is not None or profile.idle_power_w is not None:
            assert "https://" in profile.power_source, profile.name
        if profile.thermal.passive_c is not None or profile.thermal.critical_c is not None:
            assert "https://" in profile.thermal.source, profile.name


def test_published_figures_reach_the_dataclasses():
    coral = load_profiles()["rpi5-coral-usb"].accelerator("EdgeTPU")
    assert (coral.tops_int8, coral.typical_power_w) == (4.0, 2.0)
    tpu = load_profiles()["cloud-tpu-vm"].accelerator("TPU")
    assert (tpu.tflops_bf16, tpu.tops_int8, tpu.tflops_f16) == (197.0, 393.0, None)
    rpi5 = load_profiles()["rpi5"]
    assert (rpi5.thermal.passive_c, rpi5.thermal.critical_c, rpi5.power_budget_w) == (80.0, 110.0, 25.0)


def test_aliases_and_ranks():
    jetson = get_profile("jetson-orin-nano")
    assert jetson.accelerator("TensorRT") is jetson.accelerator("CUDA:0")
    assert jetson.device_rank("latency", "TensorRT") < jetson.device_rank("latency", "CUDA")
    assert jetson.device_rank("latency", "NPU") == len(jetson.preference["latency"])  # unlisted: after all
    x86 = get_profile("generic-x86")
    assert x86.runtime_rank("CPU", "litert") == 0 and x86.runtime_rank("CPU", "openvino") == 2
    # the notes cite what a pip user has (docs/), never the development checkout's ../shared
    assert "docs/measurements.md" in x86.runtime_notes["CPU"] and "../shared" not in x86.runtime_notes["CPU"]
    arm = get_profile("generic-arm")  # a Coral stick on a board without a profile still ranks first
    assert arm.device_rank("latency", "EdgeTPU") < arm.device_rank("latency", "CPU")
    ultra = get_profile("intel-core-ultra")
    assert ultra.preference["efficiency"][0] == "NPU" and ultra.runtime_rank("NPU", "openvino") == 0


def test_unknown_profile_lists_the_known_names():
    with pytest.raises(ConfigError) as info:
        get_profile("rpi6")
    assert "unknown profile 'rpi6'" in str(info.value) and "rpi5-coral-usb" in str(info.value)


def test_a_profile_file_by_path(tmp_path):
    path = write(tmp_path, good())
    profile = get_profile(str(path))
    assert profile.name == "demo" and profile.runtimes["CPU"] == ("litert", "onnxruntime")
    assert profile.thermal.source.startswith("passive_c: https://example.com/passive")


BROKEN = [
    # (old, new, key, words): each edit of the good profile breaks one rule
    ("name: demo", "name: demo\nnmae: x", "nmae", "unknown key"),
    ("  budget_w: 10", "  budget_w: ten", "power.budget_w", "expected a number, got str 'ten'"),
    ("title: Demo board\n", "", "title", "is required"),
    ("  latency: [EdgeTPU, CPU]", "  latency: [NPU, CPU]", "preference.latency[0]",
     "names device 'NPU', which the profile does not list"),
    ("  latency: [EdgeTPU, CPU]", "  latency: [GPU0, CPU]", "preference.latency[0]", "does not list"),
    ("  efficiency: [EdgeTPU, CPU]", "  efficiency: [CPU, CPU]", "preference.efficiency[1]", "twice"),
    ("  passive_c: 80", "  passive_c: 80000", "thermal.passive_c", "above the maximum"),
    ("  passive_c: 80", "  passive_c: 120", "thermal.passive_c", "above critical_c"),
    ("  idle_w: 2", "  idle_w: 20", "power.idle_w", "above budget_w"),
    ("    source: https://example.com/datasheet\n", "", "accelerators[0].tops_int8", "no URL"),
    ("    source: https://example.com/datasheet", "    source: the datasheet", "accelerators[0].tops_int8", "no URL"),
    ("    critical_c: https://example.com/critical\n", "", "thermal.critical_c", "not cited"),
    ("    passive_c: https://example.com/passive", "    passive_c: https://example.com/p\n    tdp: https://x.org",
     "thermal.source.tdp", "not a figure"),
    ("    order: [litert, onnxruntime]", "    order: [litrt]", "runtimes[0].order[0]", "unknown runtime 'litrt'"),
    ("  - device: CPU\n    order: [litert, onnxruntime]", "  - device: EdgeTPU\n    order: [openvino]",
     "runtimes[0].order[0]", "runtime 'openvino' does not reach EdgeTPU"),
    ("  - device: CPU\n    kind: cpu", "  - device: EdgeTPU\n    kind: cpu", "accelerators[1].device",
     "already listed"),
    ("  board: [Demo Board]\n  priority: 10", "  priority: 10", "match", "at least one condition"),
    ("  board: [Demo Board]", "  board: ['']", "match.board[0]", "matches everything"),
    ("name: demo", "name: Demo Board", "name", "lower-case"),
    ("  board: [Demo Board]", "  compatible: [demo,board-1]", "match.compatible[0]", "quote it"),
    ("schema: edgeaccel.profile/1", "schema: edgeaccel.profile/2", "schema", "not one of"),
    ("    precisions: [int8]", "    precisions: [int9]", "accelerators[0].precisions[0]", "not one of"),
    ("  priority: 10", "  priority: -1", "match.priority", "below the minimum"),
]


@pytest.mark.parametrize("old, new, key, words", BROKEN, ids=[b[2] + ":" + b[3][:20] for b in BROKEN])
def test_a_broken_profile_names_file_and_key(tmp_path, old, new, key, words):
    text = good()
    assert old in text, "the edit must apply, or the test proves nothing"
    path = write(tmp_path, text.replace(old, new, 1))
    with pytest.raises(ConfigError) as info:
        load_profile(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{key}: "), message
    assert words in message, message


def test_the_good_profile_loads(tmp_path):
    # the baseline every broken case edits: it must load, or the cases above could fail for other reasons
    assert load_profile(write(tmp_path, good())).name == "demo"


@pytest.mark.parametrize(
    "text, words",
    [
        ("name: [unclosed\n", "is not valid YAML at line 2, column 1"),
        ("", "expected a mapping"),
        ("- a list\n", "expected a mapping"),
    ],
)
def test_a_file_that_is_not_a_profile(tmp_path, text, words):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_profile(path)
    assert str(path) in str(info.value) and words in str(info.value)
