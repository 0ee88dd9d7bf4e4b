"""`edgeaccel run` from a real subprocess: answers, JSON, and one clear line with an exit code on errors."""

from __future__ import annotations

import json

import pytest

from conftest import IMAGES, MODELS, SAMPLES

pytestmark = pytest.mark.shared


def test_bundled_sample_finds_the_chickadee(cli):
    out = cli("run", str(SAMPLES / "mobilenet_v1_0.25_128_quant.tflite"), "--input", str(SAMPLES / "bird.png"),
              "--labels", str(SAMPLES / "imagenet_labels.txt"), "--top-k", "3")
    assert out.returncode == 0, out.stderr
    top = [line for line in out.stdout.splitlines() if line.endswith("]")]
    assert "chickadee" in top[0]
    assert "litert" in out.stdout and "p50" in out.stdout and "p99" in out.stdout


def test_json_report_for_scripts(cli):
    out = cli("run", str(MODELS / "mobilenet_v2_1.0_224_quant.onnx"), "--input", str(IMAGES / "cat.png"),
              "--labels", str(MODELS / "imagenet_labels.txt"), "--top-k", "3", "--runs", "5", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["schema"] == "edgeaccel.run/1"
    assert report["executor"]["runtime"] == "onnxruntime"
    assert report["top_k"][0]["label"] == "Egyptian cat"
    assert report["latency_ms"]["runs"] == 5
    assert report["latency_ms"]["p50"] <= report["latency_ms"]["p99"]
    # which executor produced the outputs: every timed run, by name
    assert report["output_executor"].startswith("onnxruntime:")
    assert report["answered_by"] == {report["output_executor"]: 5}


def test_random_input_and_pinned_executor(cli):
    out = cli("run", str(MODELS / "split_concat.tflite"), "--executor", "openvino", "--runs", "2", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["executor"]["runtime"] == "openvino"
    assert len(report["outputs"]) == 5 and report["top_k"] == []


def test_npy_input(cli, tmp_path):
    import numpy as np

    np.save(tmp_path / "x.npy", np.full((1, 28, 28), 3, np.uint8))
    out = cli("run", str(MODELS / "keras_lstm_mnist_ptq.tflite"), "--input", str(tmp_path / "x.npy"), "--runs", "1")
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["run", "{models}/model_invoking_error.tflite"], 6, "fake-op-double"),
        (["run", "{models}/mobilenet_v1_0.25_128_quant_edgetpu.tflite"], 6, "Edge TPU"),
        (["run", "{models}/movenet_single_pose_lightning_ptq_edgetpu.tflite"], 6, "Edge TPU"),
        (["run", "{tmp}/empty.tflite"], 3, "empty"),
        (["run", "{tmp}/text.tflite"], 3, "text"),
        (["run", "{tmp}/missing.tflite"], 3, "not found"),
        (["run", "{models}/split_concat.tflite", "--input", "{tmp}/shape.npy"], 4, "expects shape"),
        (["run", "{models}/keras_lstm_mnist_ptq.tflite", "--input", "{tmp}/dtype.npy"], 4, "expects uint8"),
        (["run", "{models}/split_concat.tflite", "--executor", "onnxruntime"], 6, "does not read tflite"),
    ],
)
def test_errors_are_one_clear_line_and_an_exit_code(cli, tmp_path, args, code, message):
    import numpy as np

    (tmp_path / "empty.tflite").write_bytes(b"")
    (tmp_path / "text.tflite").write_text("hello, not a model\n")
    np.save(tmp_path / "shape.npy", np.zeros((1, 4, 4, 3), np.uint8))
    np.save(tmp_path / "dtype.npy", np.zeros((1, 28, 28), np.float32))
    out = cli(*[a.format(models=MODELS, tmp=tmp_path) for a in args])
    assert out.returncode == code, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    assert out.stderr.startswith("error: ")
    assert message in out.stderr


def test_debug_shows_the_traceback(cli, tmp_path):
    (tmp_path / "m.tflite").write_bytes(b"")
    out = cli("--debug", "run", str(tmp_path / "m.tflite"))
    assert out.returncode != 0 and "Traceback" in out.stderr


def test_explain_the_edgetpu_twin_set_chooses_the_cpu_twin_and_says_why(cli):
    out = cli("explain", str(MODELS / "mobilenet_v1_0.25_128_quant_edgetpu.tflite"),
              str(MODELS / "mobilenet_v1_0.25_128_quant.tflite"), "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    first = report["ranked"][0]
    assert first["artifact"].endswith("mobilenet_v1_0.25_128_quant.tflite") and first["candidate"] == "litert:CPU"
    edgetpu_reasons = [r["reason"] for r in report["rejected"] if r["artifact"].endswith("_edgetpu.tflite")]
    assert any("edgetpu-custom-op" in r for r in edgetpu_reasons)


def test_tune_then_explain_reads_the_cache(cli, tmp_path):
    model = str(MODELS / "split_concat.tflite")
    tuned = cli("tune", model, "--cache-dir", str(tmp_path), "--json")
    assert tuned.returncode == 0, tuned.stderr
    assert json.loads(tuned.stdout)["measurements"] == "measured now"
    explained = json.loads(cli("explain", model, "--cache-dir", str(tmp_path), "--json").stdout)
    assert explained["measurements"] == "from cache"
    assert explained["ranked"][0]["measurement"]["p50_ms"] > 0


def test_bench_side_by_side_json_and_plot(cli, tmp_path):
    plot = tmp_path / "lat.png"
    out = cli("bench", str(MODELS / "mobilenet_v1_0.25_128_quant.tflite"), "--all", "--runs", "20",
              "--requests", "30", "--warmup", "2", "--json", "--plot", str(plot))
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["schema"] == "edgeaccel.bench/1"
    names = {(r["name"], r["mode"]) for r in report["results"]}
    assert {("litert:CPU", "latency"), ("openvino:CPU", "latency"), ("litert:CPU", "throughput")} <= names
    for r in report["results"]:
        assert r["count"] == (20 if r["mode"] == "latency" else 30)
        assert 0 < r["latency_ms"]["p50"] <= r["latency_ms"]["p99"] and r["fps"] > 0
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_bench_min_seconds_extends_both_modes_past_the_counts(cli):
    out = cli("bench", str(MODELS / "mobilenet_v1_0.25_128_quant.tflite"), "--runs", "1", "--requests", "1", "--warmup", "1",
              "--min-seconds", "0.3", "--json")
    assert out.returncode == 0, out.stderr
    for r in json.loads(out.stdout)["results"]:
        assert r["count"] > 1, r
        assert r["wall_s"] >= 0.3, r  # latency: the summed call times
