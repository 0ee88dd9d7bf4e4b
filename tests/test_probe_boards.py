"""The real readers on fake device trees of the boards edgeaccel targets (edgeaccel.testing builds them
from the documented layouts): each survey names its accelerators, how they were found, whether this user
can use them, and the fix when not."""

from __future__ import annotations

import pytest

import edgeaccel
from edgeaccel.hardware import Identity
from edgeaccel.hardware.schema import validate
from edgeaccel.testing import (
    BOARDS,
    FakeTree,
    cloud_tpu_vm,
    coral_dev_board,
    intel_laptop_with_npu,
    jetson_agx_orin,
    rk3588_board,
    rpi5_with_coral_usb,
    x86_server_with_cuda_gpu,
    x86_with_coral_m2,
)

# Someone else: not the owner of the files the test writes, in none of their groups, not root.
STRANGER = Identity(uid=4242, gids=frozenset({4242}))


def survey(builder, tmp_path, **kwargs):
    builder(tmp_path, **kwargs)
    return edgeaccel.probe(tmp_path)


def only(report, kind):
    found = [a for a in report.accelerators if a.kind == kind]
    assert len(found) == 1, [a.name for a in report.accelerators]
    return found[0]


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_every_board_survey_validates_and_skips_runtimes(tmp_path, name):
    report = survey(BOARDS[name], tmp_path)
    assert validate(report.to_dict()) == []
    assert not report.runtimes.surveyed and "not /" in report.runtimes.reason
    assert report.machine.cpu.reason is None and report.machine.memory.total_mib > 0
    assert not [p for p in report.problems if p.subject == "probe"], report.problems


def test_x86_server_with_cuda_gpu(tmp_path):
    report = survey(x86_server_with_cuda_gpu, tmp_path)
    gpu = only(report, "nvidia-gpu")
    assert gpu.name == "NVIDIA H100 80GB HBM3" and gpu.usable
    assert gpu.details["driver_version"] == "535.104.05" and gpu.details["bus"] == "0000:18:00.0"
    assert gpu.details["compute_capability"] is None  # only NVML knows it; not queried on a fake root
    assert [n.path for n in gpu.nodes] == ["/dev/nvidia0", "/dev/nvidiactl"]
    assert report.present_devices() == {"CPU", "CUDA", "TensorRT"}
    cpu = report.machine.cpu
    assert cpu.model == "Intel(R) Xeon(R) Platinum 8480+" and cpu.logical_cpus == 4 and cpu.physical_cores == 2
    assert cpu.isa["amx_int8"] and cpu.isa["avx512_bf16"] and cpu.isa["avx512_vnni"]
    assert report.machine.board.model == "SYS-821GE-TNHR"
    assert [d["label"] for d in report.to_dict()["telemetry"]["rapl"]] == ["package-0", "dram"]


def test_nvml_fills_in_memory_and_compute_capability(tmp_path):
    from edgeaccel.hardware.gpu_nvidia import read_nvidia
    from test_probe_parsers import StandInNvml

    tree = x86_server_with_cuda_gpu(tmp_path)
    gpu = read_nvidia(tmp_path, nvml=StandInNvml()).accelerators[0]
    assert gpu.found_by == "NVML and /proc/driver/nvidia/gpus/0000:18:00.0/information"
    assert (gpu.details["memory_mib"], gpu.details["compute_capability"]) == (81920, "9.0")
    # in a container that shows NVML but not /proc/driver/nvidia, NVML alone finds it
    tree.local("/proc/driver/nvidia/gpus/0000:18:00.0/information").unlink()
    found = read_nvidia(tmp_path, nvml=StandInNvml())
    assert [(a.found_by, a.name, a.usable) for a in found.accelerators] == [("NVML", "NVIDIA H100 80GB HBM3", True)]


def test_nvidia_gpu_without_its_driver_is_found_on_the_pci_bus(tmp_path):
    tree = FakeTree(tmp_path)
    tree.pci_device("0000:01:00.0", 0x10DE, 0x2684, 0x030000, driver="nouveau")
    tree.pci_device("0000:01:00.1", 0x10DE, 0x22BA, 0x040300, driver="snd_hda_intel")  # its audio function
    report = edgeaccel.probe(tmp_path)
    gpu = only(report, "nvidia-gpu")
    assert not gpu.present and "nouveau" in gpu.reason and "NVIDIA driver" in gpu.fix
    assert report.present_devices() == {"CPU"}


def test_jetson_orin(tmp_path):
    report = survey(jetson_agx_orin, tmp_path)
    gpu = only(report, "jetson-gpu")
    assert gpu.present and gpu.usable and gpu.devices == ("CUDA", "TensorRT")
    assert gpu.details["l4t_release"] == "35.4.1"
    assert (gpu.details["power_mode_id"], gpu.details["power_mode"]) == (0, "MAXN")
    assert report.machine.board.family == "jetson" and report.machine.board.soc == "tegra234"
    assert report.machine.cpu.core_types == {"Cortex-A78AE": 12}
    assert report.machine.cpu.isa["dotprod"] and not report.machine.cpu.isa["i8mm"]
    hwmon = report.to_dict()["telemetry"]["hwmon"]
    assert [h["chip"] for h in hwmon] == ["ina3221", "ina3221"]
    assert hwmon[0]["sensors"]["curr"] == ["curr1_input", "curr2_input", "curr3_input"]


def test_jetson_power_mode_falls_back_to_the_configured_default(tmp_path):
    tree = jetson_agx_orin(tmp_path)
    tree.local("/var/lib/nvpmodel/status").unlink()
    gpu = only(edgeaccel.probe(tmp_path), "jetson-gpu")
    assert (gpu.details["power_mode_id"], gpu.details["power_mode"]) == (2, "MODE_30W")
    assert "default" in gpu.details["power_mode_source"]


def test_jetson_gpu_node_needs_group_video(tmp_path):
    jetson_agx_orin(tmp_path)
    gpu = only(edgeaccel.probe(tmp_path, identity=STRANGER), "jetson-gpu")
    assert gpu.present and not gpu.usable
    assert "/dev/nvhost-ctrl-gpu" in gpu.reason and "usermod -aG video" in gpu.fix


@pytest.mark.parametrize("firmware_loaded, usb_id, port", [(True, "18d1:9302", "4-1"), (False, "1a6e:089a", "3-1")])
def test_rpi5_with_coral_usb_before_and_after_firmware(tmp_path, firmware_loaded, usb_id, port):
    report = survey(rpi5_with_coral_usb, tmp_path, firmware_loaded=firmware_loaded)
    tpu = only(report, "edgetpu")
    assert tpu.present and tpu.usable
    assert tpu.details["usb_id"] == usb_id and tpu.details["firmware_loaded"] is firmware_loaded
    assert tpu.details["usb_port"] == port
    assert tpu.details["delegate_library"] == "/usr/lib/aarch64-linux-gnu/libedgetpu.so.1"
    assert {"EdgeTPU", "EdgeTPU:usb"} <= report.present_devices()
    if not firmware_loaded:
        assert "firmware not loaded yet" in tpu.reason
    # before the firmware loads the device is a USB 2 bootloader: its 480 Mb/s is not a problem
    assert not [p for p in report.problems if "USB 2" in p.reason]
    assert report.machine.board.model == "Raspberry Pi 5 Model B Rev 1.0"
    assert report.machine.cpu.core_types == {"Cortex-A76": 4}
    zone = report.to_dict()["telemetry"]["thermal_zones"][0]
    assert [t["temp_c"] for t in zone["trip_points"]] == [50.0, 60.0, 67.5, 75.0, 110.0]


def test_coral_usb_on_a_usb2_port_is_reported(tmp_path):
    tree = rpi5_with_coral_usb(tmp_path)
    tree.file("/sys/devices/platform/usb4/4-1/speed", "480\n")
    report = edgeaccel.probe(tmp_path)
    assert only(report, "edgetpu").usable
    slow = [p for p in report.problems if "USB 2" in p.reason]
    assert len(slow) == 1 and "USB 3 port" in slow[0].fix


def test_coral_usb_not_writable_names_the_group_or_the_udev_rule(tmp_path):
    tree = rpi5_with_coral_usb(tmp_path)
    tpu = only(edgeaccel.probe(tmp_path, identity=STRANGER), "edgetpu")
    assert tpu.present and not tpu.usable
    assert "cannot write /dev/bus/usb/004/002" in tpu.reason and "usermod -aG plugdev" in tpu.fix
    report = edgeaccel.probe(tmp_path, identity=STRANGER)
    assert "EdgeTPU" in report.present_devices() and "EdgeTPU" not in report.usable_devices()
    # without the udev rule the node stays 0644 for its group: joining the group would not help
    tree.node("/dev/bus/usb/004/002", 0o644)
    tpu = only(edgeaccel.probe(tmp_path, identity=STRANGER), "edgetpu")
    assert "99-edgetpu-accelerator.rules" in tpu.fix and 'ATTRS{idVendor}=="18d1"' in tpu.fix


def test_coral_without_the_delegate_library_says_how_to_install_it(tmp_path):
    tree = rpi5_with_coral_usb(tmp_path)
    tree.local("/usr/lib/aarch64-linux-gnu/libedgetpu.so.1").unlink()
    report = edgeaccel.probe(tmp_path)
    assert only(report, "edgetpu").usable  # the device is fine; the runtime side is missing
    missing = [p for p in report.problems if "libedgetpu.so.1" in p.reason]
    assert len(missing) == 1 and "libedgetpu1-std" in missing[0].fix
    assert not report.runtimes.libraries[0].found


def test_coral_dev_board(tmp_path):
    report = survey(coral_dev_board, tmp_path)
    tpu = only(report, "edgetpu")
    assert tpu.name == "Coral Dev Board Edge TPU apex_0" and tpu.usable
    assert tpu.found_by == "/sys/class/apex/apex_0" and tpu.devices == ("EdgeTPU", "EdgeTPU:pci")
    assert tpu.details["temp_c"] == 43.05 and tpu.details["trip_points_c"] == [85.0, 90.0, 95.0]
    assert report.machine.board.family == "coral-dev-board"
    assert report.machine.cpu.core_types == {"Cortex-A53": 4} and not report.machine.cpu.isa["dotprod"]


def test_coral_m2_card(tmp_path):
    report = survey(x86_with_coral_m2, tmp_path)
    tpu = only(report, "edgetpu")
    assert tpu.name == "Coral Edge TPU (PCIe/M.2) apex_0" and tpu.usable
    assert report.present_devices() == {"CPU", "EdgeTPU", "EdgeTPU:pci"}


def test_coral_m2_card_before_gasket_is_installed(tmp_path):
    report = survey(x86_with_coral_m2, tmp_path, driver_loaded=False)
    tpu = only(report, "edgetpu")
    assert not tpu.present and "apex driver" in tpu.reason and "gasket-dkms" in tpu.fix
    assert report.present_devices() == {"CPU"}


def test_coral_m2_node_needs_the_apex_group(tmp_path):
    x86_with_coral_m2(tmp_path)
    tpu = only(edgeaccel.probe(tmp_path, identity=STRANGER), "edgetpu")
    assert not tpu.usable and "usermod -aG apex" in tpu.fix


def test_intel_laptop_with_npu(tmp_path):
    report = survey(intel_laptop_with_npu, tmp_path)
    npu, gpu = only(report, "intel-npu"), only(report, "intel-gpu")
    assert npu.usable and npu.details["generation"] == "Meteor Lake" and npu.devices == ("NPU",)
    assert npu.found_by == "/sys/class/accel/accel0 (driver intel_vpu)"
    assert gpu.usable and gpu.details["driver"] == "i915" and [n.path for n in gpu.nodes] == ["/dev/dri/renderD128"]
    assert report.present_devices() == {"CPU", "NPU", "GPU"}
    isa = report.machine.cpu.isa
    assert isa["avx_vnni"] and isa["avx2"] and not isa["avx512f"]


def test_intel_npu_for_a_user_outside_group_render(tmp_path):
    intel_laptop_with_npu(tmp_path)
    report = edgeaccel.probe(tmp_path, identity=STRANGER)
    npu = only(report, "intel-npu")
    assert not npu.usable and "usermod -aG render" in npu.fix
    rapl = [p for p in report.problems if p.subject == "RAPL energy counters"]
    assert len(rapl) == 1 and "5.10" in rapl[0].fix


def test_intel_npu_without_its_driver(tmp_path):
    FakeTree(tmp_path).pci_device("0000:00:0b.0", 0x8086, 0x643E, 0x120000)
    npu = only(edgeaccel.probe(tmp_path), "intel-npu")
    assert not npu.present and "Lunar Lake" in npu.name and "intel_vpu" in npu.fix


def test_rk3588_with_the_vendor_rknpu_driver(tmp_path):
    report = survey(rk3588_board, tmp_path)
    npu = only(report, "rockchip-npu")
    assert npu.usable and npu.details["driver"] == "rknpu" and npu.details["driver_version"] == "0.9.6"
    assert [n.path for n in npu.nodes] == ["/dev/dri/renderD129"]  # not the Mali GPU's renderD128
    assert report.present_devices() == {"CPU", "RKNPU"}
    assert report.machine.cpu.core_types == {"Cortex-A55": 4, "Cortex-A76": 4}
    assert report.machine.board.soc == "rk3588"
    assert len(report.telemetry.thermal_zones) == 7


def test_rk3588_with_the_mainline_rocket_driver(tmp_path):
    npu = only(survey(rk3588_board, tmp_path, driver="rocket"), "rockchip-npu")
    assert npu.usable and npu.details["driver"] == "rocket" and len(npu.nodes) == 3


def test_rk3588_with_the_npu_disabled_in_the_device_tree(tmp_path):
    report = survey(rk3588_board, tmp_path, driver="disabled")
    npu = only(report, "rockchip-npu")
    assert not npu.present and "disabled" in npu.reason and "overlay" in npu.fix
    assert report.present_devices() == {"CPU"}


@pytest.mark.parametrize("chip, node", [("v5e", "/dev/vfio/0"), ("v4", "/dev/accel0")])
def test_cloud_tpu_vm(tmp_path, chip, node):
    report = survey(cloud_tpu_vm, tmp_path, chip=chip)
    chips = [a for a in report.accelerators if a.kind == "cloud-tpu"]
    assert len(chips) == 4 and all(a.usable and a.details["chip"] == chip for a in chips)
    assert chips[0].nodes[0].path == node
    assert report.present_devices() == {"CPU", "TPU"}
    assert report.machine.board.family == "google-cloud"


def test_hailo_and_qualcomm_nodes(tmp_path):
    tree = FakeTree(tmp_path)
    tree.node("/dev/hailo0", 0o666).node("/dev/fastrpc-cdsp", 0o660).node("/dev/fastrpc-adsp", 0o660)
    report = edgeaccel.probe(tmp_path)
    assert only(report, "hailo").usable and only(report, "qualcomm-dsp").devices == ("QNN",)
    assert report.present_devices() == {"CPU", "Hailo", "QNN"}


def test_a_reader_works_on_its_own_from_a_root_path(tmp_path):
    from edgeaccel.hardware.edgetpu import read_edgetpu

    coral_dev_board(tmp_path)
    found = read_edgetpu(tmp_path)
    assert [a.name for a in found.accelerators] == ["Coral Edge TPU (PCIe/M.2) apex_0"] and not found.problems


def test_a_bare_tree_has_only_the_cpu_device(tmp_path):
    report = edgeaccel.probe(tmp_path)
    assert report.accelerators == () and report.present_devices() == {"CPU"}


def test_the_telemetry_section_lists_apex_and_jetson_rails(tmp_path):
    """Sources only edgeaccel.telemetry read before the probe asked it: a Jetson's INA3221 rails (reached
    through the ina3221 driver's folder) and a Coral's die temperature with the apex driver's trips."""
    from edgeaccel.cli.probe_cmd import render

    orin = jetson_agx_orin(tmp_path)
    coral = FakeTree(tmp_path).pci_device("0000:01:00.0", 0x1AC1, 0x089A, 0x0000FF, driver="apex")
    orin.class_device("apex", "apex_0", coral).file(f"{coral}/apex/apex_0/temp", "43050\n")
    for k, trip in enumerate((85000, 90000, 95000)):
        orin.file(f"{coral}/apex/apex_0/trip_point{k}_temp", f"{trip}\n")
    report = edgeaccel.probe(tmp_path)
    telemetry = report.to_dict()["telemetry"]
    assert validate(report.to_dict()) == []
    rails = [s for s in telemetry["sources"] if s["kind"] == "ina3221"]
    assert [s["name"] for s in rails] == ["ina3221:VDD_GPU_SOC", "ina3221:VDD_CPU_CV", "ina3221:VIN_SYS_5V0",
                                          "ina3221:VDDQ_VDD2_1V8AO"]
    assert all(s["readable"] and s["quantities"] == ["power", "voltage", "current"] for s in rails)
    assert rails[0]["path"] == "/sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon0"  # as on the device
    (apex,) = [s for s in telemetry["sources"] if s["kind"] == "apex"]
    assert apex["name"] == "apex:apex_0" and apex["readable"] and apex["path"] == "/sys/class/apex/apex_0/temp"
    assert apex["trips"] == [{"type": "passive", "temp_c": t} for t in (85.0, 90.0, 95.0)]
    text = render(report.to_dict())
    assert "ina3221:VDD_GPU_SOC" in text and "trips: passive 85 C, passive 90 C, passive 95 C" in text


def test_telemetry_readability_is_judged_for_another_account(tmp_path):
    """The probe reads as this process; for someone else it narrows that with each file's mode bits."""
    tree = x86_server_with_cuda_gpu(tmp_path)  # RAPL energy_uj 0400 as since Linux 5.10; the rest 0644
    tree.file("/sys/class/powercap/intel-rapl:0/energy_uj", "48223117211\n", 0o440)  # a group may read package-0
    power = Identity(uid=4242, gids=frozenset({tree.local("/").stat().st_gid}))

    def readable(identity):
        return {s.name: s.readable for s in edgeaccel.probe(tmp_path, identity=identity).telemetry.sources}

    assert all(readable(None).values())
    assert readable(power) == {**readable(None), "rapl:dram": False}
    stranger = edgeaccel.probe(tmp_path, identity=STRANGER)
    rapl = {s.name: s for s in stranger.telemetry.sources if s.kind == "rapl"}
    assert not any(s.readable for s in rapl.values())
    assert "energy_uj is not readable by uid 4242" in rapl["rapl:package-0"].reason
    assert all(s.readable for s in stranger.telemetry.sources if s.kind != "rapl")  # 0644: anyone may read them
    assert [p.fix for p in stranger.problems if p.subject == "RAPL energy counters"] == [
        "energy_uj is readable by root only since Linux 5.10: run as root, or allow a group with a udev rule or "
        "systemd-tmpfiles, e.g. 'z /sys/class/powercap/intel-rapl:0/energy_uj 0440 root power'"]
