"""Utilization while running (UtilizationSampler: /proc, NVML, Intel and Rockchip NPU load, tegrastats) and the
GPU memory guard (load(gpu_mem_limit_mb=...)).

Absent hardware is read through the real readers from fake trees this file writes (every figure from a fake tree
is test data, computed here by hand); one test reads this machine's real /proc. No GPU here: the guard is checked
in the provider options the executor builds and in the error a real ONNX Runtime allocation-failure text becomes.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import MODELS, SAMPLES

from edgeaccel.telemetry.procstat import busy_percent, parse_cpu_times, parse_process_ticks, parse_status_kb
from edgeaccel.telemetry.npu_load import parse_rknpu_load
from edgeaccel.telemetry.utilization import SOURCES, UtilizationSampler

PID = 4242
TICKS = os.sysconf("SC_CLK_TCK")
NEVER = 3600.0  # an interval the sampling thread never reaches in a test: the test takes every sample itself
TFLITE = str(SAMPLES / "mobilenet_v1_0.25_128_quant.tflite")
ONNX = str(MODELS / "mobilenet_v2_1.0_224_quant.onnx")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def write(root: Path, path: str, text: str) -> Path:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target


def proc_stat(cpu0: tuple[int, int], cpu1: tuple[int, int]) -> str:
    """/proc/stat with two cores, each given as (busy user ticks, idle ticks)."""
    def line(name, busy, idle):
        return f"{name} {busy} 0 0 {idle} 0 0 0 0 0 0"
    total = (cpu0[0] + cpu1[0], cpu0[1] + cpu1[1])
    return "\n".join([line("cpu ", *total), line("cpu0", *cpu0), line("cpu1", *cpu1),
                      "intr 12345 0 0", "ctxt 999", "btime 1700000000", "processes 321"]) + "\n"


def proc_pid(root: Path, utime: int, stime: int, rss_kb: int, hwm_kb: int) -> None:
    # the command name holds a space and a parenthesis, as real ones may
    fields = ["S", "1", "4242", "4242", "0", "-1", "4194560", "100", "0", "0", "0", str(utime), str(stime),
              "0", "0", "20", "0", "3", "0", "555", "1000000", "300"]
    write(root, f"/proc/{PID}/stat", f"{PID} (python (worker) 1) " + " ".join(fields) + "\n")
    write(root, f"/proc/{PID}/status", f"Name:\tpython\nVmPeak:\t  900000 kB\nVmHWM:\t {hwm_kb} kB\n"
                                       f"VmRSS:\t {rss_kb} kB\nThreads:\t3\n")


# -- pure parsers ---------------------------------------------------------------------------------------------
def test_proc_parsers():
    times = parse_cpu_times(proc_stat((300, 700), (100, 900)))
    assert times["cpu0"] == (300, 1000) and times["cpu1"] == (100, 1000) and times["cpu"] == (400, 2000)
    assert "intr" not in times
    assert busy_percent((300, 1000), (350, 1100)) == 50.0
    assert busy_percent((300, 1000), (300, 1000)) is None  # no tick passed
    assert parse_process_ticks("77 (a) b) c) S 1 2 3 4 5 6 7 8 9 10 11 12 13") == 11 + 12
    assert parse_process_ticks("garbage") is None
    assert parse_status_kb("VmRSS:\t  2168 kB\n", "VmRSS") == 2168 and parse_status_kb("Name: x\n", "VmRSS") is None


def test_rknpu_load_text_of_both_kinds():
    assert parse_rknpu_load("NPU load:  Core0:  5%, Core1:  0%, Core2: 12%,\n") == {
        "core0": 5.0, "core1": 0.0, "core2": 12.0}
    assert parse_rknpu_load("NPU load:  12%\n") == {"npu": 12.0}
    assert parse_rknpu_load("no such thing") == {}


# -- the sampler on fake trees --------------------------------------------------------------------------------
def test_cpu_per_core_process_cpu_and_rss_from_proc_deltas(tmp_path):
    clock = Clock()
    write(tmp_path, "/proc/stat", proc_stat((1000, 9000), (2000, 8000)))
    proc_pid(tmp_path, utime=100, stime=20, rss_kb=100 * 1024, hwm_kb=110 * 1024)
    with UtilizationSampler(NEVER, root=str(tmp_path), clock=clock, pid=PID) as sampler:
        # one second later: cpu0 busy 50 of 100 ticks, cpu1 100 of 100; the process used 1.5 s of CPU
        clock.now += 1.0
        write(tmp_path, "/proc/stat", proc_stat((1050, 9050), (2100, 8000)))
        proc_pid(tmp_path, utime=100 + TICKS, stime=20 + TICKS // 2, rss_kb=180 * 1024, hwm_kb=180 * 1024)
        sampler.sample()
        # one more second: both cores idle; the process used nothing and shrank
        clock.now += 1.0
        write(tmp_path, "/proc/stat", proc_stat((1050, 9150), (2100, 8100)))
        proc_pid(tmp_path, utime=100 + TICKS, stime=20 + TICKS // 2, rss_kb=150 * 1024, hwm_kb=180 * 1024)
        sampler.sample()
    s = sampler.summary()
    assert s["samples"] == 4 and s["duration_s"] == 2.0  # start, two, and the last one on exit
    assert s["cpu_percent_per_core"] == {"cpu0": {"mean": 25.0, "max": 50.0}, "cpu1": {"mean": 50.0, "max": 100.0}}
    assert s["cpu_percent_all"] == {"mean": 37.5, "max": 75.0}
    assert s["process_cpu_percent"]["mean"] == pytest.approx(75.0, abs=0.5)  # 1.5 s of CPU in 2 s
    assert s["process_cpu_percent"]["max"] == pytest.approx(150.0, abs=1.0)  # more than one core: not capped
    assert s["rss_mb"] == {"start": 100.0, "peak": 180.0, "end": 150.0, "process_high_water_mark": 180.0}
    found = {src["source"]: src for src in s["sources"]}
    assert [src["source"] for src in s["sources"]] == list(SOURCES)
    assert found["cpu"] == {"source": "cpu", "found": True, "from": "/proc/stat"}
    assert found["process"]["found"] and f"/proc/{PID}/status" in found["process"]["from"]
    lines = sampler.lines()
    assert "cpu0 25%" in lines[1] and "cpu1 50%" in lines[1] and "peaked at 100%" in lines[1]
    assert "75% of one core (max 150%)" in lines[2] and "peak 180 MB" in lines[2]


def test_rss_peak_between_samples_comes_from_the_high_water_mark(tmp_path):
    clock = Clock()
    write(tmp_path, "/proc/stat", proc_stat((0, 100), (0, 100)))
    proc_pid(tmp_path, 1, 1, rss_kb=50 * 1024, hwm_kb=60 * 1024)
    with UtilizationSampler(NEVER, root=str(tmp_path), clock=clock, pid=PID) as sampler:
        clock.now += 1.0  # a spike to 300 MB came and went between two samples: only VmHWM saw it
        proc_pid(tmp_path, 1 + TICKS, 1, rss_kb=70 * 1024, hwm_kb=300 * 1024)
        sampler.sample()
    assert sampler.summary()["rss_mb"]["peak"] == 300.0


def test_absent_sources_are_listed_with_reasons_never_zero_filled(tmp_path):
    write(tmp_path, "/proc/stat", proc_stat((0, 100), (0, 100)))
    proc_pid(tmp_path, 1, 1, 1024, 1024)
    with UtilizationSampler(NEVER, root=str(tmp_path), clock=Clock(), pid=PID) as sampler:
        pass
    s = sampler.summary()
    for key in ("gpu", "intel_npu", "rockchip_npu", "jetson"):
        assert key not in s
    absent = {src["source"]: src["reason"] for src in s["sources"] if not src["found"]}
    assert set(absent) >= {"nvml", "intel_npu", "rockchip_npu", "tegrastats"}
    assert "another tree" in absent["nvml"]  # a fake tree's GPUs are not this machine's driver's
    assert "/sys/class/accel" in absent["intel_npu"]
    assert "/sys/kernel/debug/rknpu/load" in absent["rockchip_npu"]
    assert "/usr/bin/tegrastats" in absent["tegrastats"]
    # the clock never moved: no interval to take a CPU share over, said rather than reported as 0%
    assert "cpu_percent_per_core" not in s and "too short" in absent["cpu"]
    assert any(line.startswith("  absent     Rockchip NPU:") for line in sampler.lines())


def test_cpu_shares_need_twenty_ticks_shorter_intervals_merge_into_the_next(tmp_path):
    clock = Clock()
    write(tmp_path, "/proc/stat", proc_stat((0, 0), (0, 0)))
    proc_pid(tmp_path, 0, 0, 1024, 1024)
    with UtilizationSampler(NEVER, root=str(tmp_path), clock=clock, pid=PID) as short:
        clock.now += 0.03  # 3 ticks a core, 2 of this process: a share would read 67% or 100%
        write(tmp_path, "/proc/stat", proc_stat((2, 1), (3, 0)))
        proc_pid(tmp_path, 2, 0, 1024, 1024)
    s = short.summary()
    assert "cpu_percent_per_core" not in s and "20 clock ticks" in s["process_cpu_percent"]["missing"]
    assert s["rss_mb"]["peak"] == 1.0  # memory needs no interval: still reported
    absent = {src["source"]: src["reason"] for src in s["sources"] if not src["found"]}
    assert "20 clock ticks" in absent["cpu"] and "process" not in absent
    assert any(line.startswith("  process    CPU n/a (under 20 clock ticks)") for line in short.lines())

    write(tmp_path, "/proc/stat", proc_stat((0, 0), (0, 0)))
    proc_pid(tmp_path, 0, 0, 1024, 1024)
    with UtilizationSampler(NEVER, root=str(tmp_path), clock=clock, pid=PID) as sampler:
        clock.now += 1.0  # 100 ticks: cpu0 busy 10
        write(tmp_path, "/proc/stat", proc_stat((10, 90), (0, 100)))
        sampler.sample()
        clock.now += 0.05  # 5 ticks, all busy: too few on their own, so they join the next interval
        write(tmp_path, "/proc/stat", proc_stat((15, 90), (0, 105)))
        sampler.sample()
        clock.now += 0.15  # 15 more, idle: with the 5 before, 20 ticks of which 5 busy
        write(tmp_path, "/proc/stat", proc_stat((15, 105), (0, 120)))
    cores = sampler.summary()["cpu_percent_per_core"]
    assert cores["cpu0"] == {"mean": 12.5, "max": 25.0}  # not the 100% of the 5-tick interval


def test_intel_npu_busy_time_read_at_most_once_a_second(tmp_path):
    clock = Clock()
    write(tmp_path, "/proc/stat", proc_stat((0, 100), (0, 100)))
    proc_pid(tmp_path, 1, 1, 1024, 1024)
    # as in sysfs: the class device's "device" link leads to the PCI device, which holds the attribute
    pci = "/sys/devices/pci0000:00/0000:00:0b.0"
    busy = write(tmp_path, f"{pci}/npu_busy_time_us", "5000000\n")
    (tmp_path / "sys/class/accel/accel0").mkdir(parents=True)
    (tmp_path / "sys/class/accel/accel0/device").symlink_to("../../../devices/pci0000:00/0000:00:0b.0")
    with UtilizationSampler(NEVER, root=str(tmp_path), clock=clock, pid=PID) as sampler:
        clock.now += 0.5
        busy.write_text("5500000\n")  # 100% busy for half a second: not read, the driver asks for 1 s at most
        sampler.sample()
        clock.now += 0.5
        busy.write_text("5600000\n")  # 0.6 s busy in the 1 s since the first read
        sampler.sample()
    s = sampler.summary()
    assert s["intel_npu"] == {"accel0": {"busy_percent": {"mean": 60.0, "max": 60.0}}}
    assert {"source": "intel_npu", "found": True,
            "from": "/sys/class/accel/accelN/device/npu_busy_time_us"} in s["sources"]
    assert any("Intel accel0: busy mean 60%" in line for line in sampler.lines())


def test_rockchip_npu_load_per_core(tmp_path):
    clock = Clock()
    write(tmp_path, "/proc/stat", proc_stat((0, 100), (0, 100)))
    proc_pid(tmp_path, 1, 1, 1024, 1024)
    load = write(tmp_path, "/sys/kernel/debug/rknpu/load", "NPU load:  Core0: 30%, Core1:  0%, Core2: 10%,\n")
    with UtilizationSampler(NEVER, root=str(tmp_path), clock=clock, pid=PID) as sampler:
        clock.now += 1.0
        load.write_text("NPU load:  Core0: 90%, Core1:  0%, Core2: 20%,\n")
        sampler.sample()
        load.write_text("NPU load:  Core0: 60%, Core1:  0%, Core2: 30%,\n")  # read by the last sample on exit
    s = sampler.summary()
    assert s["rockchip_npu"]["load_percent"] == {"core0": {"mean": 60.0, "max": 90.0},
                                                 "core1": {"mean": 0.0, "max": 0.0},
                                                 "core2": {"mean": 20.0, "max": 30.0}}
    assert {"source": "rockchip_npu", "found": True, "from": "/sys/kernel/debug/rknpu/load"} in s["sources"]


class _Rates:
    def __init__(self, gpu):
        self.gpu, self.memory = gpu, 0


class _Memory:
    def __init__(self, used):
        self.used, self.total, self.free = used, 8192 << 20, (8192 << 20) - used


class _Process:
    def __init__(self, pid, used):
        self.pid, self.usedGpuMemory = pid, used


class FakeNvml:
    """The pynvml functions the sampler calls, with figures the test sets (nvidia-ml-py is not installed here)."""

    def __init__(self):
        self.util, self.used, self.mine = 10, 1000 << 20, 300 << 20

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, index):
        return f"gpu{index}"

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA Test GPU"

    def nvmlDeviceGetUtilizationRates(self, handle):
        return _Rates(self.util)

    def nvmlDeviceGetMemoryInfo(self, handle):
        return _Memory(self.used)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [_Process(1, 5 << 20), _Process(PID, self.mine)]


def test_gpu_load_and_memory_through_nvml(tmp_path):
    clock, nvml = Clock(), FakeNvml()
    write(tmp_path, "/proc/stat", proc_stat((0, 100), (0, 100)))
    proc_pid(tmp_path, 1, 1, 1024, 1024)
    with UtilizationSampler(NEVER, root=str(tmp_path), clock=clock, pid=PID, nvml=nvml) as sampler:
        clock.now += 1.0
        nvml.util, nvml.used, nvml.mine = 90, 3000 << 20, 2300 << 20
        sampler.sample()
        nvml.util, nvml.used, nvml.mine = 50, 1500 << 20, 800 << 20  # the last sample, on exit
    (gpu,) = sampler.summary()["gpu"]
    assert gpu == {"index": 0, "name": "NVIDIA Test GPU", "util_percent": {"mean": 50.0, "max": 90.0},
                   "memory_used_mb": {"start": 1000.0, "peak": 3000.0, "end": 1500.0},
                   "process_memory_mb": {"start": 300.0, "peak": 2300.0, "end": 800.0}, "memory_total_mb": 8192.0}
    assert any("GPU0" in line and "busy mean 50% (max 90%)" in line and "peak 3000 of 8192 MB" in line
               for line in sampler.lines())


def test_a_gpu_whose_utilization_nvml_cannot_give_keeps_the_reason(tmp_path):
    class NoRates(FakeNvml):
        def nvmlDeviceGetUtilizationRates(self, handle):
            raise RuntimeError("Not Supported")

    write(tmp_path, "/proc/stat", proc_stat((0, 100), (0, 100)))
    proc_pid(tmp_path, 1, 1, 1024, 1024)
    with UtilizationSampler(NEVER, root=str(tmp_path), clock=Clock(), pid=PID, nvml=NoRates()) as sampler:
        pass
    (gpu,) = sampler.summary()["gpu"]
    assert "util_percent" not in gpu and "Not Supported" in gpu["missing"]
    assert gpu["memory_used_mb"]["peak"] == 1000.0


# Lines as tegrastats prints them on JetPack 6 (Orin Nano) and JetPack 5 (Orin)
JP6 = ("08-23-2024 13:57:46 RAM 3595/7607MB (lfb 1x1MB) SWAP 11/3804MB (cached 0MB) CPU [1%@729,off,3%@729,4%@729,"
       "5%@729,6%@729] EMC_FREQ 2%@2133 GR3D_FREQ 7%@[306] NVDEC off APE 200 cpu@51C soc2@50.562C gpu@50.5C tj@51C "
       "VDD_IN 5832mW/5852mW VDD_CPU_GPU_CV 1307mW/1327mW VDD_SOC 1468mW/1468mW")
JP6_BUSY = JP6.replace("GR3D_FREQ 7%", "GR3D_FREQ 93%").replace("RAM 3595/", "RAM 4100/").replace(
    "tj@51C", "tj@63.5C").replace("VDD_IN 5832mW", "VDD_IN 9832mW")


def test_jetson_through_a_tegrastats_stand_in(tmp_path):
    argv = tmp_path / "argv.txt"
    script = write(tmp_path, "/usr/bin/tegrastats",
                   f"#!/bin/sh\necho \"$@\" > {argv}\necho '{JP6}'\necho '{JP6_BUSY}'\nexec sleep 60\n")
    script.chmod(0o755)
    write(tmp_path, "/proc/stat", proc_stat((0, 100), (0, 100)))
    proc_pid(tmp_path, 1, 1, 1024, 1024)
    with UtilizationSampler(0.25, root=str(tmp_path), clock=Clock(), pid=PID) as sampler:
        process = sampler._tegra._process
        deadline = time.monotonic() + 20
        while len(sampler._tegra.stats) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert process.poll() is not None  # stopped with the sampler, not left running
    assert argv.read_text().split() == ["--interval", "250"]
    jetson = sampler.summary()["jetson"]
    assert jetson["lines"] == 2 and jetson["gr3d_percent"] == {"mean": 50.0, "max": 93.0}
    assert jetson["ram_used_mb"] == {"start": 3595.0, "peak": 4100.0, "end": 4100.0} and jetson["ram_total_mb"] == 7607
    assert jetson["rails_w"]["VDD_IN"] == {"mean": 7.832, "max": 9.832}
    assert jetson["max_temperature_c"]["tj"] == 63.5
    assert any("GR3D (GPU) mean 50% (max 93%)" in line and "RAM peak 4100 of 7607 MB" in line
               for line in sampler.lines())


def test_this_machines_proc_while_allocating():
    import gc

    cores = {f"cpu{n}" for n in range(os.cpu_count() or 1)}
    gc.collect()  # garbage of earlier tests freed now, not inside the window (CI saw +64 MB read as +29 MB)
    with UtilizationSampler(0.05) as sampler:
        block = bytearray(192 << 20)  # 192 MB, touched page by page so that it is resident
        for i in range(0, len(block), 4096):
            block[i] = 1
        end = time.monotonic() + 0.4
        while time.monotonic() < end:
            sum(range(1000))
    s = sampler.summary()
    del block
    assert s["samples"] > 2  # the thread sampled between the first and the last
    assert set(s["cpu_percent_per_core"]) == cores
    assert s["rss_mb"]["peak"] - s["rss_mb"]["start"] >= 128, s["rss_mb"]  # room for what others free meanwhile
    assert s["process_cpu_percent"]["mean"] > 0 and s["sampler_cpu_s"] > 0
    assert [src["source"] for src in s["sources"] if src["found"]][:2] == ["cpu", "process"]


def test_bad_interval_and_a_second_start():
    with pytest.raises(ValueError, match="positive"):
        UtilizationSampler(0)
    sampler = UtilizationSampler(NEVER)
    with sampler:
        with pytest.raises(RuntimeError, match="one window"):
            sampler.start()


# -- GPU memory guard ------------------------------------------------------------------------------------------
def test_the_limit_reaches_the_cuda_provider_options():
    from edgeaccel.executors.onnxruntime import PROVIDERS, provider_options
    from edgeaccel.loader import select

    options = select(ONNX, gpu_mem_limit_mb=512).options
    assert options.gpu_mem_limit_mb == 512
    cuda = provider_options("CUDAExecutionProvider", "CUDA:1", options)
    assert cuda == {"device_id": "1", "gpu_mem_limit": str(512 << 20), "arena_extend_strategy": "kSameAsRequested"}
    behind_trt = {p: provider_options(p, "TensorRT", options) for p in PROVIDERS["TensorRT"]}
    assert behind_trt["CUDAExecutionProvider"]["gpu_mem_limit"] == str(512 << 20)
    assert behind_trt["TensorrtExecutionProvider"]["trt_max_workspace_size"] == str(512 << 20)
    assert behind_trt["CPUExecutionProvider"] == {}
    # the caller's own provider options still win, key by key
    mine = select(ONNX, gpu_mem_limit_mb=512, runtime_options={"provider_options": {
        "CUDAExecutionProvider": {"arena_extend_strategy": "kNextPowerOfTwo"}}}).options
    assert provider_options("CUDAExecutionProvider", "CUDA", mine)["arena_extend_strategy"] == "kNextPowerOfTwo"
    assert "gpu_mem_limit" not in provider_options("CUDAExecutionProvider", "CUDA", select(ONNX).options)


@pytest.mark.parametrize("text", [
    # as users reported them (microsoft/onnxruntime#22702; infiniflow/ragflow#10295)
    "[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code returned while running Conv node. "
    "Name:'/patch_embed/stages/stages.0/blocks/blocks.0/mlp/fc1/Conv' Status Message: "
    "/onnxruntime_src/onnxruntime/core/framework/bfc_arena.cc:376 void* onnxruntime::BFCArena::AllocateRawInternal("
    "size_t, bool, onnxruntime::Stream*, bool, onnxruntime::WaitNotificationFn) Failed to allocate memory for "
    "requested buffer of size 4585490524328388608",
    "onnxruntime::BFCArena::AllocateRawInternal(size_t, bool, onnxruntime::Stream*, bool, "
    "onnxruntime::WaitNotificationFn) Available memory of 0 is smaller than requested bytes of 135383040",
])
def test_an_allocation_failure_under_the_limit_names_the_limit(text):
    from onnxruntime.capi.onnxruntime_pybind11_state import RuntimeException

    from edgeaccel import GpuMemoryLimitError
    from edgeaccel.errors import MEMORY_HINT
    from edgeaccel.executors.base import ExecutorOptions
    from edgeaccel.executors.onnxruntime import OnnxRuntimeExecutor
    from edgeaccel.executors.translate import translate
    from edgeaccel.formats import describe

    model, limited = describe(ONNX), ExecutorOptions(gpu_mem_limit_mb=512)
    for stage in ("load", "run"):
        error = translate(OnnxRuntimeExecutor, RuntimeException(text), stage, model, "CUDA:0", limited)
        assert isinstance(error, GpuMemoryLimitError) and isinstance(error, MemoryError)
        assert "gpu_mem_limit_mb=512" in str(error) and f"{512 << 20} bytes" in str(error)
        assert "raise gpu_mem_limit_mb above 512" in error.hint and error.runtime == "onnxruntime"
        assert "BFCArena" in str(error)  # the runtime's own words are kept
    # without a limit, or on the CPU (ORT's CPU arena is a BFCArena too), it is plain out-of-memory
    plain = translate(OnnxRuntimeExecutor, RuntimeException(text), "run", model, "CUDA", ExecutorOptions())
    on_cpu = translate(OnnxRuntimeExecutor, RuntimeException(text), "run", model, "CPU", limited)
    for error in (plain, on_cpu):
        assert not isinstance(error, GpuMemoryLimitError) and error.hint == MEMORY_HINT


def test_openvino_gpu_has_no_limit_and_is_refused_not_run_uncapped():
    from edgeaccel.executors.base import ExecutorOptions
    from edgeaccel.executors.openvino import OpenVINOExecutor
    from edgeaccel.formats import describe

    model, limited = describe(ONNX), ExecutorOptions(gpu_mem_limit_mb=1024)
    why = OpenVINOExecutor.rejects(model, "GPU", limited)
    assert "gpu_mem_limit_mb=1024" in why and "read-only" in why and "GPU_DEVICE_TOTAL_MEM_SIZE" in why
    assert "AUTO may place the model on the GPU" in OpenVINOExecutor.rejects(model, "AUTO", limited)
    assert OpenVINOExecutor.rejects(model, "CPU", limited) is None
    assert OpenVINOExecutor.rejects(model, "GPU", ExecutorOptions()) is None


def test_a_limit_on_a_cpu_candidate_is_a_note(caplog):
    import edgeaccel

    with caplog.at_level(logging.WARNING, logger="edgeaccel"):
        with edgeaccel.load(TFLITE, gpu_mem_limit_mb=257) as model:
            spec = model.inputs[0]
            assert model.run(np.zeros(spec.shape, spec.dtype))  # it runs as asked: the limit only noted
            assert model.executor.runtime == "litert"
    assert "gpu_mem_limit_mb=257 does not apply to litert:CPU: it uses no GPU memory" in caplog.text
    with edgeaccel.load(ONNX, executor="onnxruntime", gpu_mem_limit_mb=258) as model:
        assert model.executor.details["gpu_mem_limit_mb"] == (
            "gpu_mem_limit_mb=258 does not apply to onnxruntime:CPU: it uses no GPU memory")
        assert "gpu_mem_limit" not in str(model.executor.details["provider_options"])


@pytest.mark.parametrize("bad", [0, -5, float("nan"), "512", True])
def test_a_bad_limit_is_a_clear_error(bad):
    import edgeaccel

    with pytest.raises(edgeaccel.ConfigError, match="gpu_mem_limit_mb must be a positive number") as caught:
        edgeaccel.load(TFLITE, gpu_mem_limit_mb=bad)
    assert "gpu_mem_limit_mb=2048" in caught.value.hint


# -- the CLI ---------------------------------------------------------------------------------------------------

def test_bench_reports_utilization_in_json_and_as_lines(cli):
    out = cli("bench", TFLITE, "--runs", "20", "--requests", "20", "--warmup", "1", "--json")
    assert out.returncode == 0, out.stderr
    used = json.loads(out.stdout)["utilization"]
    assert [s["source"] for s in used["sources"]] == list(SOURCES)
    assert "rss_mb" in used and used["rss_mb"]["peak"] > 0
    cpu = used["sources"][0]
    # 20 runs of a small model may take less than the 20 clock ticks a CPU share needs: then it says so
    assert cpu["found"] if used["duration_s"] >= 0.25 else "too short" in cpu["reason"]
    text = cli("bench", TFLITE, "--mode", "latency", "--runs", "20", "--warmup", "1")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert any(line.startswith("utilization  over") for line in lines)
    assert any(line.startswith("  process") and ("of one core" in line or "CPU n/a" in line) for line in lines)
    assert any(line.startswith("  absent     NVML:") for line in lines)  # no pynvml here: said, not hidden


def test_run_duration_reports_utilization(cli):
    out = cli("run", TFLITE, "--duration", "1", "--json")
    assert out.returncode == 0, out.stderr
    used = json.loads(out.stdout)["utilization"]
    assert used["duration_s"] >= 0.9 and used["samples"] >= 3
    assert used["cpu_percent_per_core"] and used["process_cpu_percent"]["mean"] > 0
    text = cli("run", TFLITE, "--duration", "1")
    assert text.returncode == 0, text.stderr
    assert any(line.startswith("utilization  over 1.") for line in text.stdout.splitlines())
