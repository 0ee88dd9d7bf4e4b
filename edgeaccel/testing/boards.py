"""Fake device trees for the probe (re-exported by ``edgeaccel.testing``).

One function per board builds a whole device's file system (sysfs, procfs, /dev, /etc) below a directory
with ``edgeaccel.devfs.fake.DeviceFiles`` (temperatures in degrees C), from the layouts its kernel drivers and
vendors document, and returns that writer::

    from edgeaccel.testing import rpi5_with_coral_usb
    rpi5_with_coral_usb(tmp_path)
    report = edgeaccel.probe(root=tmp_path)
    assert "EdgeTPU" in report.present_devices()

Device nodes are empty regular files: only their presence and permission bits matter to the probe. The
files a test writes belong to the test's own user and group; each board names that group in its
/etc/group as the group udev gives the real nodes (plugdev, render, video), so that a survey for another
user (``edgeaccel.probe.Identity``) gets the same advice it would get on the board.

Where the layouts come from (each fixture below names the fact it takes from these):
- sysfs and procfs: as ``edgeaccel.devfs.fake`` and ``.cpuinfo`` say, and arch/arm64/include/asm/cputype.h.
- NVIDIA: /proc/driver/nvidia formats as printed by the driver (e.g. "NVRM version: NVIDIA UNIX x86_64 Kernel
  Module  535.104.05 ..."); Jetson: jetson_stats (github.com/rbonghi/jetson_stats, jtop/core/jetson_l4t.py,
  gpu.py) and NVIDIA's nvpmodel.py (/etc/nvpmodel.conf, /var/lib/nvpmodel/status), NVIDIA Jetson Linux
  Developer Guide, Platform Power and Performance (docs.nvidia.com/jetson).
- Coral: github.com/google-coral/libedgetpu debian/edgetpu-accelerator.rules (USB ids, plugdev),
  github.com/google/gasket-driver src/apex_driver.c (PCI 1ac1:089a, /sys/class/apex attributes),
  coral.ai/docs/accelerator/get-started and coral.ai/docs/m2/get-started (apex group rule, packages).
- Intel NPU: drivers/accel/ivpu/ivpu_drv.h (PCI ids, driver intel_vpu), github.com/intel/linux-npu-driver.
- Rockchip: rknpu_drv.c / rknpu_debugger.c of Rockchip's vendor kernel (platform driver "RKNPU", debugfs
  version), Documentation/accel/rocket (mainline driver), rk3588s.dtsi (npu@fdab0000, thermal zones).
- Cloud TPU: github.com/AI-Hypercomputer/cloud-accelerator-diagnostics tpu_info/device.py (PCI ids,
  /dev/accelN vs /dev/vfio/N).
- Ascend: the driver's nodes and version file as Ascend's container recipes pass them through (vLLM-Ascend,
  MindIE: /dev/davinciN, davinci_manager, devmm_svm, hisi_hdc, /usr/local/Ascend/driver/version.info), PCI ids
  from Ascend's log-collection script (19e5:d100 Ascend 310), npu-smi's table as its guides reproduce it.
- Raspberry Pi 5: bcm2712.dtsi (cpu-thermal, critical trip 110 C) and the Pi 5 fan trips (50/60/67.5/75 C)
  of raspberrypi/linux bcm2712-rpi-5-b.dts.
"""

from __future__ import annotations

import os

from ..devfs.fake import DeviceFiles
from .cpuinfo import (
    CORTEX_A53_FEATURES,
    CORTEX_A76_FEATURES,
    CORTEX_A78AE_FEATURES,
    EPYC_MILAN_FLAGS,
    METEOR_LAKE_FLAGS,
    SAPPHIRE_RAPIDS_FLAGS,
    arm64_cpuinfo,
    x86_cpuinfo,
)
from .fake_tree import FakeTree

# Names that lived here before the writer moved to edgeaccel.devfs and /proc/cpuinfo to .cpuinfo.
__all__ = ["BOARDS", "CORTEX_A53_FEATURES", "CORTEX_A76_FEATURES", "CORTEX_A78AE_FEATURES", "EPYC_MILAN_FLAGS",
           "METEOR_LAKE_FLAGS", "NPU_SMI_310_SAMPLE", "SAPPHIRE_RAPIDS_FLAGS", "DeviceFiles", "FakeTree",
           "arm64_cpuinfo", "atlas_200_dk", "cloud_tpu_vm", "coral_dev_board", "intel_laptop_with_npu",
           "jetson_agx_orin", "rk3588_board", "rpi5_with_coral_usb", "x86_cpuinfo", "x86_server_with_cuda_gpu",
           "x86_with_coral_m2"]


# --- boards ------------------------------------------------------------------------------------------

def x86_server_with_cuda_gpu(root: str | os.PathLike) -> DeviceFiles:
    """A Sapphire Rapids server with one NVIDIA H100 on driver 535 (CUDA 12.2)."""
    t = DeviceFiles(root)
    # cpuinfo: arch/x86/kernel/cpu/proc.c format, flags of a Xeon Platinum 8480+ (AMX, AVX512-FP16, VNNI, bf16);
    # trimmed to 4 logical CPUs (2 cores x 2 threads).
    t.file("/proc/cpuinfo", x86_cpuinfo("GenuineIntel", "Intel(R) Xeon(R) Platinum 8480+", SAPPHIRE_RAPIDS_FLAGS, 4, 2))
    t.cpus_online(4).meminfo(527_961_324, 510_002_112)
    t.os_release("Ubuntu 22.04.4 LTS", "5.15.0-105-generic", "x86_64").dmi("Supermicro", "SYS-821GE-TNHR")
    # /proc/driver/nvidia/version: NVRM line format of the proprietary module (see gpu_nvidia.py).
    t.file("/proc/driver/nvidia/version",
           "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
           "GCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04)\n")
    # /proc/driver/nvidia/gpus/<bus>/information: "Key: \t value" lines, "Device Minor" = /dev/nvidiaN.
    t.file("/proc/driver/nvidia/gpus/0000:18:00.0/information",
           "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 254\nGPU UUID: \t GPU-5d6a2b8e-8f1c-3c6e-1f2d-9b1d2e3f4a5b\n"
           "Video BIOS: \t 96.00.74.00.11\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n"
           "Bus Location: \t 0000:18:00.0\nDevice Minor: \t 0\nGPU Excluded:\t No\n")
    # PCI: NVIDIA vendor 0x10de, H100 SXM5 device 0x2330, class 0x030200 (3D controller), driver nvidia.
    t.pci_device("0000:18:00.0", 0x10DE, 0x2330, 0x030200, driver="nvidia")
    # The driver creates /dev/nvidiaN and /dev/nvidiactl with mode 0666 (NVreg_DeviceFileMode default).
    t.node("/dev/nvidia0", 0o666).node("/dev/nvidiactl", 0o666).node("/dev/nvidia-uvm", 0o666)
    # coretemp hwmon (Documentation/hwmon/coretemp.rst) and the package RAPL domain (root-only energy_uj).
    t.hwmon(0, "coretemp", {"temp1_input": "45000", "temp1_label": "Package id 0", "temp2_input": "41000"})
    t.rapl_zone("intel-rapl:0", "package-0", 48_223_117_211, mode=0o400)
    t.rapl_zone("intel-rapl:0:0", "dram", 9_871_002_333, mode=0o400)
    t.thermal_zone(0, "x86_pkg_temp", 45.0, trips=())
    return t


def jetson_agx_orin(root: str | os.PathLike) -> DeviceFiles:
    """A Jetson AGX Orin Developer Kit on L4T R35.4.1 (JetPack 5.1.2) in MAXN."""
    t = DeviceFiles(root).device_group("video")  # L4T's udev rules give the GPU nodes to group video
    # 12 Cortex-A78AE cores (implementer 0x41, part 0xd42) with the arm64 hwcaps Orin reports.
    t.file("/proc/cpuinfo", arm64_cpuinfo(CORTEX_A78AE_FEATURES, [(0x41, 0x0, 0xD42, 1)] * 12))
    t.cpus_online(12).meminfo(64_335_836, 58_114_320)
    t.os_release("Ubuntu 20.04.6 LTS", "5.10.120-tegra", "aarch64")
    # Device tree of the devkit (p3737 carrier + p3701-0005 module on tegra234).
    t.device_tree("NVIDIA Jetson AGX Orin Developer Kit",
                  ["nvidia,p3737-0000+p3701-0005", "nvidia,p3701-0005", "nvidia,tegra234"])
    # /etc/nv_tegra_release as written by nvidia-l4t-core (format parsed by jetson_stats jetson_l4t.py).
    t.file("/etc/nv_tegra_release", "# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64, "
                                    "DATE: Tue Aug  1 19:57:35 UTC 2023\n")
    # nvpmodel.conf mode table (AGX Orin: 0 MAXN, 1 MODE_15W, 2 MODE_30W, 3 MODE_50W) and the status file.
    t.file("/etc/nvpmodel.conf", "< POWER_MODEL ID=0 NAME=MAXN >\nCPU_ONLINE CORE_0 1\n\n"
                                 "< POWER_MODEL ID=1 NAME=MODE_15W >\nCPU_ONLINE CORE_0 1\n\n"
                                 "< POWER_MODEL ID=2 NAME=MODE_30W >\nCPU_ONLINE CORE_0 1\n\n"
                                 "< POWER_MODEL ID=3 NAME=MODE_50W >\nCPU_ONLINE CORE_0 1\n\n"
                                 "< PM_CONFIG DEFAULT=2 >\n")
    t.file("/var/lib/nvpmodel/status", "pmode:0000 fmode:quiet\n")
    # The iGPU: devfreq device 17000000.ga10b whose of_node name is ga10b (jtop/core/gpu.py).
    gpu = t.platform_device("17000000.ga10b", driver="gk20a")
    t.file(f"{gpu}/of_node/name", "ga10b\x00").class_device("devfreq", "17000000.ga10b", gpu)
    t.node("/dev/nvhost-ctrl-gpu", 0o660)
    # Thermal zones of tegra234 (cpu, gpu, soc, tj) with the sw-shutdown trips L4T sets.
    for i, zone in enumerate(("cpu-thermal", "gpu-thermal", "soc0-thermal", "tj-thermal")):
        t.thermal_zone(i, zone, 48.0 + i * 0.5, [("critical", 104.5), ("passive", 99.0)])
    # The two INA3221 power monitors (Documentation/hwmon/ina3221.rst: in*_input mV, curr*_input mA) at I2C
    # addresses 1-0040 and 1-0041 (Jetson Linux Developer Guide, Platform Power and Performance, AGX Orin).
    i2c = "/sys/devices/platform/bus@0/c240000.i2c/i2c-1"
    t.i2c_hwmon(0, f"{i2c}/1-0040", "ina3221", {"in1_label": "VDD_GPU_SOC", "in1_input": "5000", "curr1_input": "1216",
                                               "in2_label": "VDD_CPU_CV", "in2_input": "5000", "curr2_input": "408",
                                               "in3_label": "VIN_SYS_5V0", "in3_input": "5000", "curr3_input": "1024"})
    t.i2c_hwmon(1, f"{i2c}/1-0041", "ina3221", {"in1_label": "VDDQ_VDD2_1V8AO", "in1_input": "5000",
                                               "curr1_input": "304"})
    return t


def rpi5_with_coral_usb(root: str | os.PathLike, firmware_loaded: bool = True) -> DeviceFiles:
    """A Raspberry Pi 5 (8 GB, Raspberry Pi OS bookworm) with a Coral USB Accelerator in a USB 3 port,
    before (1a6e:089a, enumerates at USB 2 speed on the USB 2 bus) or after (18d1:9302 at 5000 Mb/s) the
    first use loaded its firmware; libedgetpu1-std installed (library and plugdev udev rule)."""
    t = DeviceFiles(root).device_group("plugdev")
    # 4 Cortex-A76 (part 0xd0b, r4p1); the Pi kernel appends Revision/Serial/Model.
    t.file("/proc/cpuinfo", arm64_cpuinfo(CORTEX_A76_FEATURES, [(0x41, 0x4, 0xD0B, 1)] * 4,
                                          "Revision\t: d04170\nSerial\t\t: 8b1c2d3e4f5a6b7c\n"
                                          "Model\t\t: Raspberry Pi 5 Model B Rev 1.0\n"))
    t.cpus_online(4).meminfo(8_245_132, 7_301_556)
    t.os_release("Debian GNU/Linux 12 (bookworm)", "6.6.51+rpt-rpi-2712", "aarch64")
    t.device_tree("Raspberry Pi 5 Model B Rev 1.0", ["raspberrypi,5-model-b", "brcm,bcm2712"])
    # The root hubs (1d6b) are USB devices too; the probe must pass them by.
    t.usb_device("usb3", "1d6b", "0002", "480", 3, 1, "Linux Foundation", "xHCI Host Controller")
    t.usb_device("usb4", "1d6b", "0003", "5000", 4, 1, "Linux Foundation", "xHCI Host Controller")
    if firmware_loaded:
        t.usb_device("4-1", "18d1", "9302", "5000", 4, 2, "Google Inc.", "")
        t.node("/dev/bus/usb/004/002", 0o664)  # udev: usb nodes default 0664, GROUP="plugdev" from the rule
    else:
        t.usb_device("3-1", "1a6e", "089a", "480", 3, 2, "Global Unichip Corp.", "")
        t.node("/dev/bus/usb/003/002", 0o664)
    # libedgetpu1-std (arm64) installs the delegate in the multiarch directory and its udev rule.
    t.file("/usr/lib/aarch64-linux-gnu/libedgetpu.so.1.0", b"\x7fELF").symlink(
        "/usr/lib/aarch64-linux-gnu/libedgetpu.so.1", "/usr/lib/aarch64-linux-gnu/libedgetpu.so.1.0")
    t.file("/lib/udev/rules.d/60-libedgetpu1-std.rules",
           'SUBSYSTEM=="usb",ATTRS{idVendor}=="1a6e",ATTRS{idProduct}=="089a",GROUP="plugdev"\n'
           'SUBSYSTEM=="usb",ATTRS{idVendor}=="18d1",ATTRS{idProduct}=="9302",GROUP="plugdev"\n')
    # One thermal zone (bcm2712.dtsi: cpu-thermal, critical at 110 C) with the fan's active trips the
    # Pi 5 device tree adds (50, 60, 67.5, 75 C); hwmon cpu_thermal and the fan.
    t.thermal_zone(0, "cpu-thermal", 51.65, [("active", 50.0), ("active", 60.0), ("active", 67.5),
                                             ("active", 75.0), ("critical", 110.0)])
    t.hwmon(0, "cpu_thermal", {"temp1_input": "51650"}).hwmon(1, "pwmfan", {"fan1_input": "2650"})
    return t


def coral_dev_board(root: str | os.PathLike) -> DeviceFiles:
    """The Coral Dev Board (i.MX 8M SoM, Mendel Linux) whose Edge TPU sits on the SoM's PCIe bus."""
    t = DeviceFiles(root).device_group("apex")
    t.file("/proc/cpuinfo", arm64_cpuinfo(CORTEX_A53_FEATURES, [(0x41, 0x0, 0xD03, 4)] * 4))
    t.cpus_online(4).meminfo(1_000_508, 612_316)
    t.os_release("Mendel GNU/Linux 5 (Eagle)", "4.14.98-imx", "aarch64")
    # Mendel's kernel names the board "Freescale i.MX8MQ Phanbell" (Coral's own board detection matches
    # that string); compatible as in arch/arm64/boot/dts/freescale/imx8mq-phanbell.dts.
    t.device_tree("Freescale i.MX8MQ Phanbell", ["google,imx8mq-phanbell", "fsl,imx8mq"])
    # gasket/apex binds PCI 1ac1:089a and makes /dev/apex_0 and /sys/class/apex/apex_0 (apex_driver.c),
    # temp and trip points in millidegrees (defaults 85/90/95 C).
    parent = t.pci_device("0000:01:00.0", 0x1AC1, 0x089A, 0x0000FF, driver="apex")
    t.class_device("apex", "apex_0", parent)
    t.file(f"{parent}/apex/apex_0/temp", "43050\n")
    for k, trip in enumerate((85000, 90000, 95000)):
        t.file(f"{parent}/apex/apex_0/trip_point{k}_temp", f"{trip}\n")
    t.node("/dev/apex_0", 0o660)  # 65-apex.rules: MODE="0660", GROUP="apex"
    t.file("/usr/lib/aarch64-linux-gnu/libedgetpu.so.1", b"\x7fELF")
    t.thermal_zone(0, "cpu-thermal", 47.0, [("passive", 85.0), ("critical", 95.0)])
    t.thermal_zone(1, "gpu-thermal", 46.0, [("passive", 85.0), ("critical", 95.0)])
    return t


def x86_with_coral_m2(root: str | os.PathLike, driver_loaded: bool = True) -> DeviceFiles:
    """A small x86 PC with a Coral M.2 Accelerator; ``driver_loaded=False`` is the state before
    gasket-dkms is installed (the card on the PCI bus, no apex driver, no /dev/apex_0)."""
    t = DeviceFiles(root).device_group("apex")
    t.file("/proc/cpuinfo", x86_cpuinfo("GenuineIntel", "Intel(R) Core(TM) i5-1135G7 @ 2.40GHz",
                                        METEOR_LAKE_FLAGS.replace(" avx_vnni", ""), 8, 4))
    t.cpus_online(8).meminfo(16_107_604, 13_771_212)
    t.os_release("Debian GNU/Linux 12 (bookworm)", "6.1.0-21-amd64", "x86_64")
    t.dmi("Intel(R) Client Systems", "NUC11TNHi5")
    parent = t.pci_device("0000:03:00.0", 0x1AC1, 0x089A, 0x0000FF, driver="apex" if driver_loaded else None)
    if driver_loaded:
        t.class_device("apex", "apex_0", parent).file(f"{parent}/apex/apex_0/temp", "39800\n")
        t.node("/dev/apex_0", 0o660)
    t.file("/usr/lib/x86_64-linux-gnu/libedgetpu.so.1", b"\x7fELF")
    t.hwmon(0, "acpitz", {"temp1_input": "27800"}).hwmon(1, "coretemp", {"temp1_input": "38000"})
    return t


def intel_laptop_with_npu(root: str | os.PathLike) -> DeviceFiles:
    """A Core Ultra 7 155H (Meteor Lake) laptop: NPU 0x7d1d on intel_vpu, Arc iGPU on i915."""
    t = DeviceFiles(root).device_group("render")
    t.file("/proc/cpuinfo", x86_cpuinfo("GenuineIntel", "Intel(R) Core(TM) Ultra 7 155H", METEOR_LAKE_FLAGS, 22, 16))
    t.cpus_online(22).meminfo(32_467_108, 25_310_440)
    t.os_release("Ubuntu 24.04.1 LTS", "6.8.0-45-generic", "x86_64").dmi("Dell Inc.", "XPS 14 9440")
    # NPU: PCI 8086:7d1d (ivpu_drv.h PCI_DEVICE_ID_MTL), class 0x120000 (processing accelerator),
    # accel class node /dev/accel/accel0 given to group render by the documented udev rule.
    npu = t.pci_device("0000:00:0b.0", 0x8086, 0x7D1D, 0x120000, driver="intel_vpu")
    t.class_device("accel", "accel0", npu).node("/dev/accel/accel0", 0o660)
    # iGPU: 8086:7d55 (Arc graphics) on i915, render node renderD128 in group render.
    gpu = t.pci_device("0000:00:02.0", 0x8086, 0x7D55, 0x030000, driver="i915")
    t.class_device("drm", "card0", gpu).class_device("drm", "renderD128", gpu).node("/dev/dri/renderD128", 0o660)
    t.thermal_zone(0, "acpitz", 41.0, [("critical", 110.0)]).thermal_zone(1, "x86_pkg_temp", 52.0, trips=())
    t.hwmon(0, "coretemp", {"temp1_input": "52000"}).hwmon(1, "BAT0", {"in0_input": "17220", "power1_input": "8120000"})
    t.rapl_zone("intel-rapl:0", "package-0", 120_331_455, mode=0o400)
    t.rapl_zone("intel-rapl:0:0", "core", 60_004_010, mode=0o400)
    return t


def rk3588_board(root: str | os.PathLike, driver: str = "rknpu") -> DeviceFiles:
    """A Radxa ROCK 5B (RK3588): 4x Cortex-A55 + 4x Cortex-A76 and the 6 TOPS NPU, with Rockchip's vendor
    kernel and rknpu DRM driver (``driver="rknpu"``), the mainline rocket driver (``"rocket"``), or the NPU
    switched off in the device tree (``"disabled"``)."""
    t = DeviceFiles(root).device_group("render")
    cores = [(0x41, 0x2, 0xD05, 0)] * 4 + [(0x41, 0x4, 0xD0B, 0)] * 4
    t.file("/proc/cpuinfo", arm64_cpuinfo(CORTEX_A76_FEATURES, cores))
    t.cpus_online(8).meminfo(16_146_232, 14_912_004)
    t.device_tree("Radxa ROCK 5B", ["radxa,rock-5b", "rockchip,rk3588"])
    base = "/sys/firmware/devicetree/base"
    # The Mali-G610 render node must not be taken for the NPU.
    mali = t.platform_device("fb000000.gpu", driver="mali")
    t.class_device("drm", "renderD128", mali).node("/dev/dri/renderD128", 0o660)
    if driver == "rknpu":
        t.os_release("Debian GNU/Linux 11 (bullseye)", "5.10.160-rockchip", "aarch64")
        # Vendor binding (rk3588s.dtsi: npu@fdab0000, compatible "rockchip,rk3588-rknpu").
        t.file(f"{base}/npu@fdab0000/compatible", b"rockchip,rk3588-rknpu\x00")
        t.file(f"{base}/npu@fdab0000/status", b"okay\x00")
        # rknpu built for DRM: "[drm] Initialized rknpu 0.9.6 ... for fdab0000.npu on minor 1" -> renderD129,
        # platform driver "RKNPU" (rknpu_drv.c); version through debugfs (rknpu_debugger.c).
        npu = t.platform_device("fdab0000.npu", driver="RKNPU")
        t.class_device("drm", "card1", npu).class_device("drm", "renderD129", npu).node("/dev/dri/renderD129", 0o660)
        t.file("/sys/kernel/debug/rknpu/version", "RKNPU driver: v0.9.6\n")
    elif driver == "rocket":
        t.os_release("Debian GNU/Linux 13 (trixie)", "6.18.0-arm64", "aarch64")
        # Mainline binding: one rknn-core node per NPU core; rocket makes /dev/accel/accelN per core.
        for k, address in enumerate(("fdab0000", "fdac0000", "fdad0000")):
            t.file(f"{base}/npu@{address}/compatible", b"rockchip,rk3588-rknn-core\x00")
            core = t.platform_device(f"{address}.npu", driver="rocket")
            t.class_device("accel", f"accel{k}", core).node(f"/dev/accel/accel{k}", 0o660)
    else:
        t.os_release("Debian GNU/Linux 12 (bookworm)", "6.1.0-rockchip", "aarch64")
        t.file(f"{base}/npu@fdab0000/compatible", b"rockchip,rk3588-rknpu\x00")
        t.file(f"{base}/npu@fdab0000/status", b"disabled\x00")
    # rk3588s.dtsi thermal zones: soc, bigcore0/1, littlecore, center, gpu, npu (tsadc channels).
    for i, zone in enumerate(("soc-thermal", "bigcore0-thermal", "bigcore1-thermal", "littlecore-thermal",
                              "center-thermal", "gpu-thermal", "npu-thermal")):
        trips = [("passive", 85.0), ("critical", 115.0)] if zone == "soc-thermal" else [("critical", 115.0)]
        t.thermal_zone(i, zone, 40.0 + 0.7 * i, trips)
    return t


def cloud_tpu_vm(root: str | os.PathLike, chip: str = "v5e") -> DeviceFiles:
    """A Cloud TPU VM: v5e (ct5lp-hightpu-4t: 4 chips through VFIO) or v4 (4 chips as /dev/accelN)."""
    t = DeviceFiles(root)
    t.file("/proc/cpuinfo", x86_cpuinfo("AuthenticAMD", "AMD EPYC 7B13", EPYC_MILAN_FLAGS, 8, 4))
    t.cpus_online(8).meminfo(197_990_012, 190_112_338)
    t.os_release("Ubuntu 22.04.4 LTS", "6.5.0-1013-gcp", "x86_64").dmi("Google", "Google Compute Engine")
    # Google's PCI vendor 0x1ae0; device ids from tpu_info/device.py (v4 0x005e, v5e 0x0063).
    device, driver = {"v5e": (0x0063, "vfio-pci"), "v4": (0x005E, "tpu_common")}[chip]
    for k in range(4):
        t.pci_device(f"0000:00:{4 + k:02x}.0", 0x1AE0, device, 0x120000, driver=driver)
        t.node(f"/dev/vfio/{k}" if chip == "v5e" else f"/dev/accel{k}", 0o666)
    return t


# `npu-smi info` of one Ascend 310, as test data written in the table layout npu-smi prints (the layout that
# Huawei's install guides and ModelZoo READMEs reproduce: NPU/Name/Health/Power(W)/Temp(C)/Hugepages-Usage rows,
# then Chip/Device/Bus-Id/AICore(%)/Memory-Usage rows); not captured from a board.
NPU_SMI_310_SAMPLE = """\
+--------------------------------------------------------------------------------------------------------+
| npu-smi 23.0.0                                   Version: 23.0.0                                       |
+-------------------------------+-----------------+------------------------------------------------------+
| NPU     Name                  | Health          | Power(W)     Temp(C)           Hugepages-Usage(page) |
| Chip    Device                | Bus-Id          | AICore(%)    Memory-Usage(MB)                        |
+===============================+=================+======================================================+
| 0       310                   | OK              | 12.8         61                0     / 969           |
| 0       0                     | 0000:01:00.0    | 0            577  / 7759                             |
+===============================+=================+======================================================+
"""


def atlas_200_dk(root: str | os.PathLike, driver: bool = True, group_access: bool = True) -> DeviceFiles:
    """An Atlas 200-class developer board (Ascend 310 with Arm CPU cores), Ubuntu 18.04 aarch64, with the Ascend
    driver (``driver``): /dev/davinci0 and the driver's /dev/davinci_manager, /dev/devmm_svm, /dev/hisi_hdc in
    group HwHiAiUser mode 0660 (``group_access``: the test's own group is HwHiAiUser; else the nodes are root's
    0600), /usr/local/Ascend/driver/version.info, and an npu-smi stand-in that prints NPU_SMI_310_SAMPLE.
    Without ``driver``: none of it (the NPU is a SoC block, not on PCI, so nothing says it is there)."""
    t = DeviceFiles(root).device_group("HwHiAiUser")
    # the CPU figures are illustrative (4 Cortex-A55 cores, arm64 cpuinfo layout); the probe only needs a CPU
    t.file("/proc/cpuinfo", arm64_cpuinfo(CORTEX_A53_FEATURES + " atomics asimdhp asimdrdm lrcpc dcpop asimddp",
                                          [(0x41, 0x2, 0xD05, 0)] * 4))
    t.cpus_online(4).meminfo(8_043_120, 6_512_384)
    t.os_release("Ubuntu 18.04.6 LTS", "4.19.95+", "aarch64")
    if driver:
        mode = 0o660 if group_access else 0o600
        for node in ("/dev/davinci0", "/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"):
            t.node(node, mode)
        # version.info as the driver package writes it (key=value lines; keys as in Huawei's troubleshooting guides)
        t.file("/usr/local/Ascend/driver/version.info",
               "Version=23.0.0\nascendhal_version=7.35.19\naicpu_version=1.0\ntdt_version=1.0\n"
               "Innerversion=V100R001C15SPC002B224\npackage_version=23.0.0\n")
        t.file("/usr/local/bin/npu-smi", "#!/bin/sh\n# stand-in for npu-smi: prints test data, not a board's state\n"
               "cat \"$(dirname \"$0\")/npu-smi.sample\"\n", mode=0o755)
        t.file("/usr/local/bin/npu-smi.sample", NPU_SMI_310_SAMPLE)
    return t


BOARDS = {
    "x86-cuda": x86_server_with_cuda_gpu,
    "jetson-agx-orin": jetson_agx_orin,
    "rpi5-coral-usb": rpi5_with_coral_usb,
    "coral-dev-board": coral_dev_board,
    "x86-coral-m2": x86_with_coral_m2,
    "intel-npu-laptop": intel_laptop_with_npu,
    "rk3588": rk3588_board,
    "cloud-tpu-vm": cloud_tpu_vm,
    "atlas-200-dk": atlas_200_dk,
}
