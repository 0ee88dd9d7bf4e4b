"""Matching a machine to a profile: table-driven over facts of each board family, plus reading the facts
from a fake /proc tree."""

from __future__ import annotations

import pytest

from edgeaccel.profiles import DeviceFacts, load_profiles, match_profile, rank_profiles

PI5 = "Raspberry Pi 5 Model B Rev 1.0"
PI5_COMPAT = ("raspberrypi,5-model-b", "brcm,bcm2712")
EPYC = "AMD EPYC 7B13 64-Core Processor"

CASES = [
    # (id, facts, expected profile, words in the reason)
    ("x86 desktop", DeviceFacts(arch="x86_64", cpu_model=EPYC), "generic-x86", "arch x86_64 (generic fallback)"),
    ("amd64 spelling", DeviceFacts(arch="AMD64"), "generic-x86", "generic fallback"),
    ("arm board", DeviceFacts(arch="aarch64", board="Pine64 RockPro64"), "generic-arm", "arch aarch64"),
    ("pi 5", DeviceFacts(arch="aarch64", board=PI5, compatible=PI5_COMPAT), "rpi5", f"board {PI5!r}"),
    ("pi 5 by compatible only", DeviceFacts(arch="aarch64", compatible=PI5_COMPAT), "rpi5",
     "device-tree compatible 'raspberrypi,5-model-b'"),
    ("pi 5 + coral usb", DeviceFacts(arch="aarch64", board=PI5, devices=frozenset({"CPU", "EdgeTPU"})),
     "rpi5-coral-usb", f"board {PI5!r} and device EdgeTPU"),
    ("pi 4 + coral usb stays generic", DeviceFacts(arch="aarch64", board="Raspberry Pi 4 Model B Rev 1.4",
                                                    devices=frozenset({"CPU", "EdgeTPU"})), "generic-arm", "arch"),
    ("coral dev board (mendel)", DeviceFacts(arch="aarch64", board="Freescale i.MX8MQ Phanbell"), "coral-dev-board",
     "Phanbell"),
    ("coral dev board (mainline)", DeviceFacts(arch="aarch64", compatible=("google,imx8mq-phanbell", "fsl,imx8mq")),
     "coral-dev-board", "imx8mq-phanbell"),
    ("jetson orin nano", DeviceFacts(arch="aarch64", board="NVIDIA Jetson Orin Nano Developer Kit",
                                     devices=frozenset({"CPU", "CUDA", "TensorRT"})), "jetson-orin-nano", "Orin Nano"),
    ("x86 + nvidia", DeviceFacts(arch="x86_64", cpu_model=EPYC, devices=frozenset({"CPU", "CUDA"})),
     "x86-nvidia-gpu", "device CUDA"),
    ("core ultra", DeviceFacts(arch="x86_64", cpu_model="Intel(R) Core(TM) Ultra 7 155H",
                               devices=frozenset({"CPU", "GPU", "NPU"})), "intel-core-ultra", "Core(TM) Ultra 7 155H"),
    ("core ultra + nvidia dGPU", DeviceFacts(arch="x86_64", cpu_model="Intel(R) Core(TM) Ultra 9 185H",
                                             devices=frozenset({"CPU", "GPU", "NPU", "CUDA"})),
     "x86-nvidia-gpu", "CUDA"),
    ("rock 5b (mainline model)", DeviceFacts(arch="aarch64", board="Radxa ROCK 5 Model B",
                                             compatible=("radxa,rock-5b", "rockchip,rk3588")), "rk3588",
     "rockchip,rk3588"),
    ("orange pi 5 (rk3588s)", DeviceFacts(arch="aarch64", board="Orange Pi 5",
                                          compatible=("xunlong,orangepi-5", "rockchip,rk3588s")), "rk3588", "rk3588s"),
    ("vendor kernel model", DeviceFacts(arch="aarch64", board="Rockchip RK3588 EVB1 LP4 V10 Board"), "rk3588",
     "RK3588 EVB1"),
    ("rk3399 is not an rk3588", DeviceFacts(arch="aarch64", board="Pine64 RockPro64 v2.1",
                                            compatible=("pine64,rockpro64-v2.1", "rockchip,rk3399")), "generic-arm",
     "generic fallback"),
    ("pi 4 is not a pi 5", DeviceFacts(arch="aarch64", board="Raspberry Pi 4 Model B Rev 1.4",
                                       compatible=("raspberrypi,4-model-b", "brcm,bcm2711")), "generic-arm", "arch"),
    ("cloud tpu vm", DeviceFacts(arch="x86_64", cpu_model=EPYC, devices=frozenset({"CPU", "TPU"})), "cloud-tpu-vm",
     "device TPU"),
]


@pytest.mark.parametrize("facts, expected, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_most_specific_profile_wins(facts, expected, words):
    profile, reason = match_profile(facts, load_profiles())
    assert profile is not None and profile.name == expected, reason
    assert words in reason


def test_no_profile_for_an_unknown_arch():
    profile, reason = match_profile(DeviceFacts(arch="riscv64", board="StarFive VisionFive 2"), load_profiles())
    assert profile is None and "riscv64" in reason and "VisionFive" in reason


def test_ranking_shows_every_match_most_specific_first():
    facts = DeviceFacts(arch="aarch64", board=PI5, devices=frozenset({"CPU", "EdgeTPU"}))
    names = [m.profile.name for m in rank_profiles(facts, load_profiles())]
    assert names == ["rpi5-coral-usb", "rpi5", "generic-arm"]


def test_a_required_device_that_is_absent_fails_the_rule():
    facts = DeviceFacts(arch="x86_64", devices=frozenset({"CPU", "TensorRT"}))  # no CUDA in the facts
    assert match_profile(facts, load_profiles())[0].name == "generic-x86"


BOARDS = {
    "x86_server_with_cuda_gpu": "x86-nvidia-gpu",
    "jetson_agx_orin": None,  # an AGX Orin is not an Orin Nano: no shipped profile but the generic Arm one
    "rpi5_with_coral_usb": "rpi5-coral-usb",
    "coral_dev_board": "coral-dev-board",
    "intel_laptop_with_npu": "intel-core-ultra",
    "rk3588_board": "rk3588",
    "cloud_tpu_vm": "cloud-tpu-vm",
    "atlas_200_dk": "atlas-310",
}


@pytest.mark.parametrize("board", sorted(BOARDS))
def test_each_fake_board_survey_matches_its_profile(tmp_path, board):
    from edgeaccel import testing
    from edgeaccel import probe
    from edgeaccel.profiles.facts import facts_from_probe

    getattr(testing, board)(tmp_path)
    facts = facts_from_probe(probe(tmp_path))
    profile, reason = match_profile(facts, load_profiles())
    expected = BOARDS[board] or "generic-arm"
    assert profile.name == expected, reason


def test_an_empty_tree_matches_no_profile(tmp_path):
    from edgeaccel import probe
    from edgeaccel.profiles.facts import facts_from_probe

    facts = facts_from_probe(probe(tmp_path))
    assert facts.devices == {"CPU"}
    assert match_profile(facts, load_profiles())[0] is None