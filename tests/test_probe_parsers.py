"""The pure parsers, table-driven: real file formats in, facts out, and None (never an exception) for
text that is not in the format."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from edgeaccel.hardware.access import Identity, allowed, parse_group_file
from edgeaccel.hardware.board import classify, parse_dt_string, parse_dt_string_list
from edgeaccel.hardware.cpu import parse_cpu_list, parse_cpuinfo
from edgeaccel.hardware.edgetpu import parse_usb_id, parse_usb_speed
from edgeaccel.hardware.gpu_nvidia import _nvml_gpus, parse_driver_version, parse_gpu_information
from edgeaccel.hardware.jetson import parse_nvpmodel_conf, parse_nvpmodel_status, parse_tegra_release
from edgeaccel.hardware.libraries import parse_ld_so_cache, parse_ld_so_conf
from edgeaccel.hardware.memory import parse_cgroup_max, parse_meminfo
from edgeaccel.hardware.npu_rockchip import parse_rknpu_version
from edgeaccel.hardware.pci import parse_hex_id
from edgeaccel.hardware.schema import load_schema, validate
from edgeaccel.hardware.system import parse_os_release
from edgeaccel.testing import CORTEX_A53_FEATURES, arm64_cpuinfo

ARMV7_PI3 = """processor	: 0
model name	: ARMv7 Processor rev 4 (v7l)
BogoMIPS	: 38.40
Features	: half thumb fastmult vfp edsp neon vfpv3 tls vfpv4 idiva idivt vfpd32 lpae evtstrm crc32
CPU implementer	: 0x41
CPU architecture: 7
CPU variant	: 0x0
CPU part	: 0xd03
CPU revision	: 4

Hardware	: BCM2835
Revision	: a02082
Model		: Raspberry Pi 3 Model B Rev 1.2
"""


def test_armv7_cpuinfo_calls_neon_neon():
    info = parse_cpuinfo(ARMV7_PI3)
    assert info.arch == "arm" and info.isa["neon"] and not info.isa["dotprod"]
    assert info.core_types == {"Cortex-A53": 1} and info.board_model == "Raspberry Pi 3 Model B Rev 1.2"


def test_arm64_unknown_part_is_named_by_number():
    info = parse_cpuinfo(arm64_cpuinfo(CORTEX_A53_FEATURES + " i8mm sve", [(0x41, 0, 0xFFF, 0), (0x51, 0, 0x805, 0)]))
    assert info.core_types == {"part 0xfff": 1, "part 0x805": 1} and info.vendor == "Arm, Qualcomm"
    assert info.isa["i8mm"] and info.isa["sve"]


@pytest.mark.parametrize("text", ["", "garbage\n\x00\xff", "processor : 0\n", "flags : avx2\n"])
def test_cpuinfo_that_is_not_one(text):
    assert parse_cpuinfo(text) is None


@pytest.mark.parametrize("text, count", [("0-3\n", 4), ("0\n", 1), ("0-3,6,8-9", 7), ("", None), ("3-1", None),
                                         ("a-b", None)])
def test_cpu_lists(text, count):
    assert parse_cpu_list(text) == count


def test_meminfo_and_cgroup_limit():
    assert parse_meminfo("MemTotal:       24684092 kB\nMemAvailable:   24330196 kB\nbad line\n") == {
        "MemTotal": 24684092, "MemAvailable": 24330196}
    assert parse_cgroup_max("max\n") is None and parse_cgroup_max("2147483648\n") == 2048


def test_os_release_quoting():
    fields = parse_os_release('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n# comment\nVERSION=\'12\'\n')
    assert fields == {"PRETTY_NAME": "Debian GNU/Linux 12 (bookworm)", "ID": "debian", "VERSION": "12"}


def test_device_tree_strings():
    assert parse_dt_string("Raspberry Pi 5 Model B Rev 1.0\x00") == "Raspberry Pi 5 Model B Rev 1.0"
    assert parse_dt_string("\x01\x02\x00") is None
    assert parse_dt_string_list("radxa,rock-5b\x00rockchip,rk3588\x00") == ("radxa,rock-5b", "rockchip,rk3588")
    assert classify("Radxa ROCK 5B", ("radxa,rock-5b", "rockchip,rk3588"), None) == ("rockchip", "rk3588")
    assert classify("Google Compute Engine", (), "Google") == ("google-cloud", None)


def test_nvidia_proc_files():
    proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
    open_module = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  555.58.02  Release Build  (dvs)\n"
    arm = "NVRM version: NVIDIA UNIX Kernel Module for aarch64  34.1.1  Release Build  (buildbrain)\n"
    assert [parse_driver_version(t) for t in (proprietary, open_module, arm, "junk")] == \
        ["535.104.05", "555.58.02", "34.1.1", None]
    info = parse_gpu_information("Model: \t\t Tesla K80\nIRQ:   \t\t 33\nGPU UUID: \t GPU-be0a\n"
                                 "Bus Location: \t 0000:00:04.0\nDevice Minor: \t 0\nBlacklisted:\t No\n")
    assert (info.model, info.bus, info.minor, info.uuid) == ("Tesla K80", "0000:00:04.0", 0, "GPU-be0a")
    assert parse_gpu_information("hello") is None


class StandInNvml:
    """NVML's Python API surface used by the probe (NVML itself needs an NVIDIA driver, absent here)."""

    class _Memory:
        total = 80 * (1 << 30)

    class _Pci:
        busId = b"00000000:18:00.0"

    def nvmlInit(self): pass
    def nvmlShutdown(self): pass
    def nvmlSystemGetDriverVersion(self): return b"535.104.05"
    def nvmlDeviceGetCount(self): return 1
    def nvmlDeviceGetHandleByIndex(self, index): return index
    def nvmlDeviceGetName(self, handle): return "NVIDIA H100 80GB HBM3"
    def nvmlDeviceGetCudaComputeCapability(self, handle): return (9, 0)
    def nvmlDeviceGetMemoryInfo(self, handle): return self._Memory()
    def nvmlDeviceGetPciInfo(self, handle): return self._Pci()
    def nvmlDeviceGetMinorNumber(self, handle): return 0


def test_nvml_answers_become_gpu_facts():
    gpus, reason = _nvml_gpus(StandInNvml())
    assert reason is None
    assert gpus == [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_mib": 81920, "driver_version": "535.104.05",
                     "compute_capability": "9.0", "bus": "0000:18:00.0", "minor": 0}]


def test_nvml_that_fails_to_start_is_a_reason():
    class Broken(StandInNvml):
        def nvmlInit(self):
            raise RuntimeError("NVML Shared Library Not Found")

    assert _nvml_gpus(Broken()) == ([], "NVML failed to initialize: NVML Shared Library Not Found")


def test_jetson_files():
    release = parse_tegra_release("# R36 (release), REVISION: 3.0, GCID: 36923193, BOARD: generic, EABI: aarch64, "
                                  "DATE: Fri Jul 19 23:24:25 UTC 2024\n")
    assert (release.release, release.board) == ("36.3.0", "generic")
    assert parse_tegra_release("R36") is None
    modes, default = parse_nvpmodel_conf("< POWER_MODEL ID=0 NAME=MAXN >\n< POWER_MODEL ID=1 NAME=MODE_15W >\n"
                                         "< PM_CONFIG DEFAULT=1 >\n")
    assert modes == {0: "MAXN", 1: "MODE_15W"} and default == 1
    assert parse_nvpmodel_status("pmode:0003 fmode:quiet") == 3 and parse_nvpmodel_status("") is None


def test_ids_and_units():
    assert parse_hex_id("0x10DE\n") == "0x10de" and parse_hex_id("10de") is None and parse_hex_id(None) is None
    assert parse_usb_id("18d1\n") == "18d1" and parse_usb_id("0x18d1") is None
    assert parse_usb_speed("5000\n") == 5000 and parse_usb_speed("1.5") == 1.5 and parse_usb_speed("fast") is None
    assert parse_rknpu_version("RKNPU driver: v0.9.6\n") == "0.9.6" and parse_rknpu_version("?") is None


def test_loader_configuration():
    dirs, includes = parse_ld_so_conf("include /etc/ld.so.conf.d/*.conf\n# x\n/usr/local/lib  # local\n\n")
    assert dirs == ["/usr/local/lib"] and includes == ["/etc/ld.so.conf.d/*.conf"]


@pytest.mark.skipif(not Path("/etc/ld.so.cache").is_file(), reason="no glibc loader cache on this system")
def test_this_machines_loader_cache_names_libc():
    cache = parse_ld_so_cache(Path("/etc/ld.so.cache").read_bytes().decode("utf-8", "replace"))
    assert "libc.so.6" in cache and os.path.exists(cache["libc.so.6"])


def test_access_from_mode_bits():
    user = Identity(1000, frozenset({1000, 46}))
    assert allowed(0o660, 0, 46, user, os.W_OK)  # through the group
    assert not allowed(0o664, 0, 0, user, os.W_OK) and allowed(0o664, 0, 0, user, os.R_OK)  # through "other"
    assert allowed(0o600, 1000, 0, user, os.W_OK) and not allowed(0o060, 1000, 46, user, os.R_OK)  # owner bits win
    assert allowed(0o000, 5, 5, Identity(0, frozenset()), os.R_OK)
    assert parse_group_file("root:x:0:\nplugdev:x:46:pi\n#c\nbad\n") == {0: "root", 46: "plugdev"}


def test_the_validator_finds_what_is_wrong():
    schema = load_schema()
    assert validate({}, schema)[:2] == ["$: missing required key 'schema'",
                                        "$: missing required key 'edgeaccel_version'"]
    errors = validate({"schema": "edgeaccel.probe/2", "accelerators": [{"kind": "gpu"}], "timings_ms": {"x": -1}})
    assert any(e.startswith("$.schema: expected 'edgeaccel.probe/1'") for e in errors)
    assert any(e.startswith("$.accelerators[0].kind: 'gpu' is not one of") for e in errors)
    assert any(e.startswith("$.accelerators[0]: missing required key 'devices'") for e in errors)
    assert "$.timings_ms.x: -1 is below the minimum 0" in errors
    with pytest.raises(ValueError, match="does not know"):
        validate(1, {"oneOf": []})
