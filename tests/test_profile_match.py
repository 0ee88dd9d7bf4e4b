"""Matching a machine to a profile: table-driven over facts of each board family, plus reading the facts
from a fake /proc tree."""

from __future__ import annotations

import pytest

from edgeaccel.profiles import DeviceFacts, load_profiles, match_profile, rank_profiles
from edgeaccel.profiles.facts import local_facts, parse_cpuinfo

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


X86_CPUINFO = """\
processor\t: 0
vendor_id\t: AuthenticAMD
model\t\t: 1
model name\t: AMD EPYC 7B13 64-Core Processor
flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni
"""
PI_CPUINFO = """\
processor\t: 0
BogoMIPS\t: 108.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp
CPU part\t: 0xd0b

Revision\t: d04170
Model\t\t: Raspberry Pi 5 Model B Rev 1.0
"""


def test_parse_cpuinfo_on_x86_and_arm():
    model, flags, board = parse_cpuinfo(X86_CPUINFO)
    assert model == EPYC and "avx512_bf16" in flags and board == ""
    model, flags, board = parse_cpuinfo(PI_CPUINFO)
    assert model == "" and "asimddp" in flags and board == PI5


def test_local_facts_from_a_fake_tree(tmp_path):
    (tmp_path / "proc/device-tree").mkdir(parents=True)
    (tmp_path / "proc/cpuinfo").write_text(PI_CPUINFO)
    (tmp_path / "proc/device-tree/model").write_bytes(PI5.encode() + b"\0")
    (tmp_path / "proc/device-tree/compatible").write_bytes(b"raspberrypi,5-model-b\0brcm,bcm2712\0")
    facts = local_facts(tmp_path, arch="aarch64")
    assert facts.board == PI5 and facts.compatible == PI5_COMPAT and facts.devices == {"CPU"}
    assert match_profile(facts, load_profiles())[0].name == "rpi5"


def test_local_facts_never_raise_on_an_empty_tree(tmp_path):
    facts = local_facts(tmp_path)
    assert facts == DeviceFacts()  # no arch file, no cpuinfo, no device tree: everything empty
    assert match_profile(facts, load_profiles())[0] is None
