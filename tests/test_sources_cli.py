"""`edgeaccel run MODEL --input VIDEO`: the live pipeline from the command line, its summary and sinks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MODELS

pytest.importorskip("av")

from stream_servers import moving_frames, write_video  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.shared]  # slow tier: video through the CLI
ROOT = Path(__file__).resolve().parents[1]


def test_run_on_a_video_file_writes_every_frame_and_a_summary(cli, tmp_path):
    video = tmp_path / "in.mp4"
    write_video(video, moving_frames(30))
    done = cli("run", str(MODELS / "mobilenet_v1_0.25_128_quant.tflite"), "--input", str(video), "--executor", "litert",
                "--json", "--jsonl", str(tmp_path / "f.jsonl"), "--save", str(tmp_path / "out.mp4"))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["schema"] == "edgeaccel.run.live/1"
    assert report["frames_in"] == report["frames_out"] == 30 and report["error"] is None
    # latency is arrival -> result; stages_ms says where it went (queue wait apart from inference)
    stages = report["stages_ms"]
    assert list(stages) == ["decode", "queue", "preprocess", "inference", "postprocess"]
    assert 0 < stages["inference"]["p50"] <= report["latency_ms"]["p99"]
    line = json.loads((tmp_path / "f.jsonl").read_text().splitlines()[0])
    assert sum(line["timing_ms"].values()) == pytest.approx(line["latency_ms"], abs=0.01)
    assert len((tmp_path / "f.jsonl").read_text().splitlines()) == 30 and (tmp_path / "out.mp4").stat().st_size


def test_text_summary_says_where_the_latency_went(cli, tmp_path):
    video = tmp_path / "in.mp4"
    write_video(video, moving_frames(1))
    done = cli("run", str(MODELS / "mobilenet_v1_0.25_128_quant.tflite"), "--input", str(video), "--executor", "litert")
    assert done.returncode == 0, done.stderr
    assert "summary   1 frame out of 1 " in done.stdout  # not "1 frames"
    assert "from a frame's arrival to its result" in done.stdout
    by_stage = next(line for line in done.stdout.splitlines() if "p50 by stage" in line)
    for stage in ("decode", "queue", "preprocess", "inference", "postprocess"):
        assert f"{stage} " in by_stage


def test_run_on_a_refused_stream_says_so(cli, tmp_path):
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = cli("run", str(MODELS / "mobilenet_v1_0.25_128_quant.tflite"), "--input", f"rtsp://127.0.0.1:{port}/cam",
                "--executor", "litert", "--duration", "3")
    # the default reconnect timeout is 30 s: --duration ends it first, with a summary and no traceback
    assert done.returncode == 0 and "Traceback" not in done.stderr
    assert "summary   0 frames out of 0" in done.stdout


def test_ctrl_c_stops_a_live_run_with_a_summary():
    import signal
    import time

    from stream_servers import RtspServer

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with RtspServer(moving_frames(30)) as server:
        proc = subprocess.Popen([sys.executable, "-m", "edgeaccel", "run",
                                 str(MODELS / "mobilenet_v1_0.25_128_quant.tflite"), "--input", server.url,
                                 "--executor", "litert"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env)
        try:
            first = proc.stdout.readline()  # the first live line: frames are flowing
            assert " in " in first and " out " in first, first
            time.sleep(0.5)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, err
    assert "summary" in out and "Traceback" not in err and "interrupted" in err
