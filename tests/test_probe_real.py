"""The probe of this machine, checked against the machine itself: /proc/cpuinfo read here independently,
the installed runtime versions from package metadata, accelerators only where their kernel evidence is,
thermal sources or the reason there are none."""

from __future__ import annotations

import glob
import importlib.metadata
import os
import sys
from pathlib import Path

import pytest

import edgeaccel
from edgeaccel.hardware.schema import validate

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="surveys Linux's /proc and /sys")

# Where the kernel shows an accelerator that the probe knows; with none of these, it must find none.
EVIDENCE = ("/proc/driver/nvidia/gpus/*", "/etc/nv_tegra_release", "/sys/class/apex/*", "/sys/class/accel/*",
            "/dev/hailo*", "/dev/fastrpc-*", "/dev/adsprpc-smd", "/sys/class/misc/rknpu",
            "/dev/davinci*")


@pytest.fixture(scope="module")
def report():
    return edgeaccel.probe()


def cpuinfo_facts() -> tuple[int, str | None, set[str]]:
    text = Path("/proc/cpuinfo").read_text()
    processors = sum(1 for line in text.splitlines() if line.split(":")[0].strip() == "processor")
    model = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")), None)
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines()
                  if line.split(":")[0].strip() in ("flags", "Features")), [])
    return processors, model, set(flags)


def test_cpu_facts_match_proc_cpuinfo(report):
    processors, model, flags = cpuinfo_facts()
    cpu = report.machine.cpu
    assert cpu.reason is None and cpu.logical_cpus == processors
    if cpu.arch == "x86":
        assert cpu.model == model
        for feature in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile", "amx_int8"):
            assert cpu.isa[feature] == (feature in flags), feature
    else:
        assert cpu.isa["neon"] == bool({"asimd", "neon"} & flags)
        assert cpu.isa["dotprod"] == ("asimddp" in flags)
    assert cpu.usable_cpus == len(os.sched_getaffinity(0))


def test_memory_and_kernel(report):
    assert report.machine.memory.total_mib > 0
    assert report.machine.os.kernel == os.uname().release


@pytest.mark.parametrize("name, distributions", [("litert", ("ai-edge-litert",)), ("onnxruntime", ("onnxruntime",)),
                                                 ("openvino", ("openvino",))])
def test_the_three_runtimes_with_their_versions(report, name, distributions):
    runtime = report.runtimes.get(name)
    assert runtime is not None and runtime.installed and runtime.usable, runtime
    assert runtime.version == importlib.metadata.version(distributions[0])
    assert "CPU" in runtime.reaches and runtime.import_ms is not None


def test_accelerators_only_where_the_kernel_shows_one(report):
    evidence = [hit for pattern in EVIDENCE for hit in glob.glob(pattern)]
    if evidence:
        assert report.accelerators, f"evidence of an accelerator ({evidence}) but none reported"
    else:
        assert report.accelerators == () and report.present_devices() == {"CPU"}


def test_thermal_sources_or_the_reason_there_are_none(report):
    zones = glob.glob("/sys/class/thermal/thermal_zone*")
    assert len(report.telemetry.thermal_zones) == len(zones)
    if not zones:
        assert "/sys/class/thermal" in report.telemetry.reasons["thermal_zones"]
        assert any(p.subject == "telemetry" for p in report.problems)


def test_the_edgetpu_delegate_lookup_agrees_with_the_loader(report):
    import ctypes.util

    lookup = report.runtimes.libraries[0]
    assert lookup.found == (ctypes.util.find_library("edgetpu") is not None)


def test_report_validates_against_the_schema(report):
    assert validate(report.to_dict()) == []
    assert report.to_dict()["schema"] == "edgeaccel.probe/1"




def test_every_family_is_looked_for_here_and_absent_only_without_evidence(report):
    """On this machine too: each family says what it looked at, and one is absent only where the kernel
    shows none of it."""
    evidence = [hit for pattern in EVIDENCE for hit in glob.glob(pattern)]
    hardware = [f for f in report.families if f.id != "plugins"]
    assert len(hardware) == 11 and all(f.looked_for and f.reason for f in hardware)
    if not evidence:
        assert all(f.status == "absent" for f in hardware), [(f.id, f.status) for f in hardware]
        assert "/proc/driver/nvidia/version" in report.family("cuda-gpu").reason
    else:
        assert any(f.status != "absent" for f in hardware)


def test_the_hardware_survey_reaches_runtimes_only_through_the_survey_it_is_handed(report):
    """edgeaccel.hardware imports no executor: without a runtime survey handed in it says so, and
    edgeaccel.probe() hands in the one that knows the executors."""
    from edgeaccel.hardware import survey_device

    alone = survey_device(telemetry=False).runtimes
    assert not alone.surveyed and "handed in" in alone.reason and alone.items == ()
    assert report.runtimes.surveyed and report.runtimes.get("onnxruntime") is not None
