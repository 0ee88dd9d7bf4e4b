"""Test helpers that edgeaccel ships for its users too.

- ``boards``: one function per board that writes the parts of a device's file system the probe reads
  (``edgeaccel.probe(root=...)``) with ``edgeaccel.devfs.fake.DeviceFiles`` (re-exported here, temperatures in
  degrees C); ``FakeTree`` (``fake_tree``) is that writer under its earlier name, with its millidegree
  ``thermal_zone`` and ``rapl``; ``cpuinfo``: /proc/cpuinfo formats. Every name is importable from
  ``edgeaccel.testing`` as before.
- ``conformance``: ``ExecutorConformance``, the tests every executor must pass; an executor plug-in's author
  subclasses it in their own test suite (README: Write an executor plug-in).
- ``emulated``: emulated accelerators, executors that wrap a real CPU runtime and behave like a described
  accelerator (latency, numerics, power, faults), usable directly or installed as a plug-in (``plugins``).

Only ``boards`` is imported here: the others import numpy or pytest, which ``edgeaccel.testing`` users of the
fake trees need not pay for.
"""

from .boards import (
    BOARDS,
    CORTEX_A53_FEATURES,
    CORTEX_A76_FEATURES,
    CORTEX_A78AE_FEATURES,
    DeviceFiles,
    EPYC_MILAN_FLAGS,
    METEOR_LAKE_FLAGS,
    SAPPHIRE_RAPIDS_FLAGS,
    FakeTree,
    arm64_cpuinfo,
    atlas_200_dk,
    cloud_tpu_vm,
    coral_dev_board,
    intel_laptop_with_npu,
    jetson_agx_orin,
    rk3588_board,
    rpi5_with_coral_usb,
    x86_cpuinfo,
    x86_server_with_cuda_gpu,
    x86_with_coral_m2,
)

__all__ = ["BOARDS", "CORTEX_A53_FEATURES", "CORTEX_A76_FEATURES", "CORTEX_A78AE_FEATURES", "DeviceFiles",
           "EPYC_MILAN_FLAGS",
           "METEOR_LAKE_FLAGS", "SAPPHIRE_RAPIDS_FLAGS", "FakeTree", "arm64_cpuinfo", "atlas_200_dk", "cloud_tpu_vm",
           "coral_dev_board",
           "intel_laptop_with_npu", "jetson_agx_orin", "rk3588_board", "rpi5_with_coral_usb", "x86_cpuinfo",
           "x86_server_with_cuda_gpu", "x86_with_coral_m2"]
