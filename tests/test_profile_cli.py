"""`edgeaccel profile` on the command line: the table, --json, --all, --trace, --plot, and clear errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import MODELS

from edgeaccel.cli import main

pytestmark = pytest.mark.shared
ONNX_MODEL = str(MODELS / "mobilenet_v2_1.0_224_quant.onnx")
TFLITE_MODEL = str(MODELS / "mobilenet_v1_0.25_128_quant.tflite")


def profile(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["profile", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_table_shows_top_operators_coverage_devices_and_load(capsys):
    code, out, err = profile(capsys, ONNX_MODEL, "--executor", "ort", "--runs", "3", "--warmup", "1", "--top", "4")
    assert code == 0, err
    assert "onnxruntime:CPU" in out and "whole model" in out and "load " in out and "peak RSS" in out
    assert "per-op sum / whole-model time" in out
    assert "devices      CPUExecutionProvider 67 ops (100%)" in out
    rows = [line for line in out.splitlines() if "QLinearConv" in line]
    assert len(rows) == 4  # --top 4
    times = [float(line.split()[0]) for line in rows]
    assert times == sorted(times, reverse=True)


@pytest.mark.slow
def test_json_all_side_by_side(capsys):
    code, out, err = profile(capsys, ONNX_MODEL, "--all", "--runs", "3", "--warmup", "1", "--json", "--no-cache")
    assert code == 0, err
    report = json.loads(out)
    assert report["schema"] == "edgeaccel.profile/1"
    runtimes = {e["runtime"] for e in report["executors"]}
    assert {"onnxruntime", "openvino"} <= runtimes
    for e in report["executors"]:
        assert e["per_op_available"] and e["runs"] == 3 and e["whole_model_ms"] > 0 and e["ops"]
        assert set(e["ops"][0]) >= {"name", "type", "device", "median_ms", "share", "output_bytes", "kernel"}
        assert 0.5 < e["coverage"] < 1.5 and e["load_s"] > 0  # generous: CI is noisy (README: measured)
        assert "utilization" in e
    assert report["matching"]["matched"] and set(report["matching"]["unmatched"]) >= {"onnxruntime:CPU"}


def test_all_keeps_going_past_an_executor_that_cannot_run_the_model(capsys):
    """OpenVINO cannot compile the LSTM (runtime facts): --all profiles LiteRT and says why OpenVINO is missing."""
    code, out, err = profile(capsys, str(MODELS / "keras_lstm_mnist_ptq.tflite"), "--all", "--runs", "2", "--json",
                             "--no-cache")
    assert code == 0, err
    report = json.loads(out)
    assert [e["executor"] for e in report["executors"]] == ["litert:CPU"]
    assert "openvino:CPU" in report["failed"] and "hint:" in report["failed"]["openvino:CPU"]
    assert "matching" not in report  # one executor: nothing to set side by side


def test_litert_says_it_gives_no_per_op_times(capsys):
    code, out, err = profile(capsys, TFLITE_MODEL, "--executor", "litert", "--runs", "2", "--warmup", "0")
    assert code == 0, err
    assert "no per-op times" in out and "XNNPACK" in out and "CPU (TFLite kernels)" in out


def test_trace_and_plot_files(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    trace, plot = tmp_path / "t.json", tmp_path / "layers.png"
    code, _, err = profile(capsys, ONNX_MODEL, "--executor", "openvino", "--runs", "2", "--warmup", "1",
                           "--trace", str(trace), "--plot", str(plot))
    assert code == 0, err
    events = json.loads(trace.read_text())["traceEvents"]
    assert {e["ph"] for e in events} == {"X", "M"} and any(e.get("cat") == "op" for e in events)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "trace: wrote" in err and "plot: wrote" in err


@pytest.mark.parametrize("args, code, message", [
    (["--executor", "nosuch"], 2, "choose one of litert, onnxruntime, openvino"),
    (["--runs", "0"], 4, "--runs and --top must be at least 1"),
    (["--trace", "/no/such/folder/t.json"], 4, "the folder /no/such/folder does not exist"),
])
def test_bad_arguments_are_one_clear_error(capsys, args, code, message):
    if args[0] == "--executor":
        with pytest.raises(SystemExit) as exit_info:
            main(["profile", ONNX_MODEL, *args])
        got, err = exit_info.value.code, capsys.readouterr().err
    else:
        got, _, err = profile(capsys, ONNX_MODEL, *args)
    assert got == code and message in err, err
    assert "Traceback" not in err


def test_plot_without_matplotlib_names_the_extra_before_measuring():
    code = ("import sys; sys.modules['matplotlib'] = None; from edgeaccel.cli import main; "
            f"sys.exit(main(['profile', {ONNX_MODEL!r}, '--plot', 'x.png']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 8, out.stderr
    assert "matplotlib" in out.stderr and "edgeaccel[plot]" in out.stderr and "whole model" not in out.stdout
