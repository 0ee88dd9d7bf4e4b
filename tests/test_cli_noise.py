"""Only what matters here: `probe` problems for what this machine could use, `explain` one fix line per cause,
and a status line on stderr for the commands that run long (on a terminal, as the project's progress bars are).
Real runtimes, real fake trees, the bundled sample model, and a real pseudo-terminal."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import subprocess
import sys

import pytest

import edgeaccel
from edgeaccel import inventory
from edgeaccel.cli.progress import Status
from edgeaccel.cli.rejections import group_rejections, print_rejections
from edgeaccel.hardware.runtimes import Runtimes
from edgeaccel.runtimeinfo import RuntimeInfo
from edgeaccel.testing import rpi5_with_coral_usb, x86_server_with_cuda_gpu

from conftest import SAMPLES

SAMPLE = str(SAMPLES / "mobilenet_v1_0.25_128_quant.tflite")


@pytest.fixture(scope="module")
def runtimes() -> Runtimes:
    """The runtimes really installed here, as `edgeaccel probe` surveys them."""
    return Runtimes(True, None, inventory.survey_runtimes())


def problems_on(tree_root, runtimes: Runtimes) -> dict[str, str]:
    accelerators = list(edgeaccel.probe(root=tree_root, runtimes=False, telemetry=False).accelerators)
    return {p.subject: p.reason for p in inventory.problems(runtimes, accelerators)}


def without_tensorrt(runtimes: Runtimes) -> Runtimes:
    """The runtimes here, TensorRT as on a machine where it is not installed (what it says there)."""
    missing = RuntimeInfo("tensorrt", False, None, None, False, (), "TensorRT is not installed",
                          "pip install 'edgeaccel[tensorrt]'")
    return Runtimes(True, None, (*(r for r in runtimes.items if r.name != "tensorrt"), missing))


def test_no_tensorrt_problem_on_a_machine_without_an_nvidia_gpu(tmp_path, runtimes):
    rpi5_with_coral_usb(tmp_path)
    assert "tensorrt" not in problems_on(tmp_path, without_tensorrt(runtimes))


def test_the_tensorrt_problem_stays_where_an_nvidia_gpu_is_found(tmp_path, runtimes):
    x86_server_with_cuda_gpu(tmp_path)
    assert problems_on(tmp_path, without_tensorrt(runtimes))["tensorrt"] == "TensorRT is not installed"


def test_a_missing_runtime_for_the_cpu_is_still_a_problem_everywhere(tmp_path, runtimes):
    """The CPU is on every machine: a CPU runtime that cannot be used is always worth saying."""
    rpi5_with_coral_usb(tmp_path)
    broken = RuntimeInfo("onnxruntime", True, "1.0", "onnxruntime", False, (), "import failed: a broken wheel",
                         "pip install --force-reinstall onnxruntime")
    others = tuple(r for r in runtimes.items if r.name != "onnxruntime")
    got = problems_on(tmp_path, Runtimes(True, None, (*others, broken)))
    assert got["onnxruntime"] == "import failed: a broken wheel"


def test_explain_prints_one_fix_line_per_cause(cli):
    text = cli("explain", SAMPLE)
    report = cli("explain", SAMPLE, "--json")
    assert text.returncode == 0 and report.returncode == 0, text.stderr + report.stderr
    fixes = [r["fix"] for r in json.loads(report.stdout)["rejected"] if r["fix"]]
    lines = text.stdout.splitlines()
    for fix in set(fixes):
        assert lines.count(f"      fix: {fix}") == 1, text.stdout
    assert sum(line.startswith("      fix: ") for line in lines) == len(set(fixes))


def test_absent_devices_sharing_a_fix_are_one_entry_naming_each_device():
    fix = "`edgeaccel probe` shows what was looked for and why it is absent"
    rejected = [{"candidate": f"{runtime}:{device}", "artifact": "/m/model.onnx",
                 "reason": f"no {device} device found on this machine", "fix": fix}
                for runtime, device in (("onnxruntime", "CUDA"), ("onnxruntime", "NPU"), ("openvino", "GPU"),
                                        ("openvino", "NPU"))]
    rejected.append({"candidate": "litert:CPU", "artifact": "/m/model.onnx", "reason": "litert does not read onnx",
                     "fix": None})
    out = io.StringIO()
    sys.stdout, saved = out, sys.stdout
    try:
        print_rejections(rejected)
    finally:
        sys.stdout = saved
    assert out.getvalue().splitlines() == [
        "  - onnxruntime:CUDA,NPU; openvino:GPU,NPU [model.onnx]: no CUDA/NPU/GPU device found on this machine",
        f"      fix: {fix}",
        "  - litert:CPU [model.onnx]: litert does not read onnx",
    ]


def test_different_reasons_under_one_fix_are_each_listed_once_above_it():
    rejected = [{"candidate": "tensorrt:TensorRT", "artifact": "m.onnx", "reason": "tensorrt is not installed",
                 "fix": "pip install x"},
                {"candidate": "onnxruntime:TensorRT", "artifact": "m.onnx", "reason": "the provider is missing",
                 "fix": "pip install x"}]
    (cause,) = group_rejections(rejected)
    assert cause.reason() is None and len(cause.entries) == 2 and cause.fix == "pip install x"


def run_on_a_terminal(*args: str) -> tuple[int, str, str]:
    """`edgeaccel ARGS` with stderr on a pseudo-terminal (stdout a pipe): (exit code, stdout, stderr)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "edgeaccel", *args], stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen = []
    while True:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the terminal closed with the process
                break
            if not data:
                break
            seen.append(data)
        elif proc.poll() is not None:
            break
    out = proc.stdout.read().decode()
    proc.wait(timeout=60)
    os.close(master)
    return proc.returncode, out, b"".join(seen).decode(errors="replace")


BENCH = ("bench", SAMPLE, "--runs", "5", "--requests", "10", "--warmup", "1")


def test_bench_names_each_step_on_a_terminal_and_erases_the_line():
    code, out, err = run_on_a_terminal(*BENCH)
    assert code == 0, err
    for step in ("bench: choosing the executors", "bench: loading litert:CPU (1/1)", "bench: latency of 1 executor",
                 "bench: throughput of litert:CPU (1/1)", "] 5/5"):
        assert step in err, err
    assert err.endswith("\r\x1b[K") and "bench:" not in out  # the answer on stdout stands alone


@pytest.mark.parametrize("extra", [("--json",), ("--no-progress",)])
def test_bench_stays_quiet_under_json_and_no_progress(extra):
    code, out, err = run_on_a_terminal(*BENCH, *extra)
    assert code == 0 and "bench:" not in err, err


def test_no_status_line_when_stderr_is_not_a_terminal(cli):
    done = cli(*BENCH)
    assert done.returncode == 0 and "bench:" not in done.stderr and "\x1b[K" not in done.stderr, done.stderr


def test_convert_and_check_name_their_step_on_a_terminal(tmp_path):
    """A float classifier the test trains (numpy), converted to int8 ONNX, then checked: each command's line."""
    pytest.importorskip("onnxruntime", reason="the onnx extra is part of dev")
    import numpy as np
    from convert_helpers import dataset, mlp_onnx, train_mlp

    x, y = dataset(300, seed=1)
    model = mlp_onnx(train_mlp(x, y), tmp_path / "mlp.onnx")
    np.save(tmp_path / "calib.npy", x[:100])
    code, out, err = run_on_a_terminal("convert", str(model), "--to", "onnx-int8", "--calibration",
                                       str(tmp_path / "calib.npy"), "--out", str(tmp_path / "bundle"))
    assert code == 0 and "convert: converting to onnx-int8" in err and err.endswith("\r\x1b[K"), err
    code, out, err = run_on_a_terminal("check", str(tmp_path / "bundle"), "--runs", "1", "--executor", "onnxruntime")
    assert code == 0 and "check: running every artifact on the samples" in err, err
    assert "mlp_int8.onnx" in out and "check:" not in out


def test_a_status_line_shows_the_step_its_count_and_its_time():
    stream = io.StringIO()
    with Status("convert", True, stream) as status:
        status.step("converting to tflite-int8")
        status.count(3, 12)
        assert status.line().startswith("convert: converting to tflite-int8 [######..................] 3/12  ")
    assert "convert: converting to tflite-int8" in stream.getvalue() and stream.getvalue().endswith("\r\x1b[K")
    quiet = io.StringIO()
    with Status("convert", False, quiet) as status:
        status.step("converting")
        status.count(1, 2)
    assert quiet.getvalue() == ""
