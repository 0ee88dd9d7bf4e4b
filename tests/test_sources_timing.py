"""Video sinks keep the source's timing: a 25 fps or 10 fps file (written here with PyAV) and the real 30 fps
traffic video give annotated videos at the same rate, with the same frame times and duration; a variable frame
rate source keeps its spacing; several sources into one sink path each keep theirs; a clock that goes back
(a reconnected stream) continues after the last frame; sources without a clock are written at fps=."""

from __future__ import annotations

import itertools
import threading
import time
from fractions import Fraction

import numpy as np
import pytest

from conftest import MODELS, SHARED

av = pytest.importorskip("av")

import edgeaccel  # noqa: E402
from edgeaccel.errors import InputError  # noqa: E402
from edgeaccel.sources import VideoSink  # noqa: E402
from edgeaccel.sources.readers import RawFrame, Source  # noqa: E402
from stream_servers import moving_frames, write_video  # noqa: E402

pytestmark = pytest.mark.shared


@pytest.fixture(scope="module")
def model():
    with edgeaccel.load(MODELS / "mobilenet_v1_0.25_128_quant.tflite", executor="litert") as loaded:
        yield loaded


def timing(path) -> tuple[Fraction, list[float], float]:
    """(nominal rate, every frame's time in seconds, duration in seconds) of a video file."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        times = [float(frame.time) for frame in container.decode(stream)]
        return stream.average_rate, times, container.duration / 1e6


def write_timed(path, stamps: list[float], codec: str = "libx264") -> None:
    """A variable frame rate video: frame n shown at stamps[n] seconds."""
    base = Fraction(1, 90000)
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=10)
        stream.height, stream.width = 120, 160
        stream.pix_fmt = "yuv420p"
        stream.codec_context.time_base = base
        for image, t in zip(moving_frames(len(stamps)), stamps, strict=True):
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            frame.time_base, frame.pts, frame.duration = base, round(t / base), 9000
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


@pytest.mark.parametrize("fps, frames", [(25, 50), (10, 20)])
@pytest.mark.parametrize("suffix", [".mp4", ".mkv", ".avi"])
def test_annotated_video_keeps_the_source_rate_and_duration(model, tmp_path, fps, frames, suffix):
    source = tmp_path / f"in{fps}.mp4"
    write_video(source, moving_frames(frames), fps=fps)
    out = tmp_path / f"out{suffix}"
    summary = model.watch(source, sinks=out).run(timeout=120)
    assert summary["frames_out"] == frames
    rate_in, times_in, duration_in = timing(source)
    rate_out, times_out, duration_out = timing(out)
    assert rate_in == fps and rate_out == fps  # was always 30: a 25 fps source played 17 % fast, 10 fps 3x
    assert len(times_out) == frames
    np.testing.assert_allclose(times_out, times_in, atol=1e-3)
    assert duration_out == pytest.approx(duration_in, abs=1e-3) and duration_in == pytest.approx(frames / fps)


@pytest.mark.slow
def test_real_30_fps_video_stays_30_fps(model, tmp_path):
    source = SHARED / "video" / "traffic_frames.mp4"
    out = tmp_path / "traffic.mp4"
    model.watch(source, sinks=out).run(timeout=120)
    rate, times, duration = timing(out)
    assert rate == 30 and len(times) == 20
    np.testing.assert_allclose(times, timing(source)[1], atol=1e-3)
    assert duration == pytest.approx(20 / 30, abs=1e-3)


def test_variable_frame_rate_keeps_each_frame_time(model, tmp_path):
    stamps = [0.0, 0.1, 0.15, 0.5, 0.55, 1.0, 1.04, 1.6]
    source = tmp_path / "vfr.mp4"
    write_timed(source, stamps)
    assert timing(source)[1] == pytest.approx(stamps, abs=1e-4)
    out = tmp_path / "out.mp4"
    model.watch(source, sinks=out).run(timeout=120)
    assert timing(out)[1] == pytest.approx(stamps, abs=1e-4)


def test_several_sources_each_keep_their_own_rate(model, tmp_path):
    fast, slow = tmp_path / "fast.mp4", tmp_path / "slow.mp4"
    write_video(fast, moving_frames(25), fps=25)
    write_video(slow, moving_frames(10), fps=10)
    model.watch([fast, slow], sinks=tmp_path / "out.mp4").run(timeout=120)
    for name, fps, count in (("out-1.mp4", 25, 25), ("out-2.mp4", 10, 10)):
        rate, times, duration = timing(tmp_path / name)
        assert (rate, len(times)) == (fps, count) and duration == pytest.approx(1.0, abs=1e-3)


def test_sources_without_a_clock_use_fps(model, tmp_path):
    images = moving_frames(6)
    model.watch(iter(images), sinks=tmp_path / "default.mp4").run(timeout=60)
    assert timing(tmp_path / "default.mp4")[0] == 30  # arrival times are no clock: one frame after another
    model.watch(iter(images), fps=12.5, sinks=tmp_path / "given.mp4").run(timeout=60)
    rate, times, _ = timing(tmp_path / "given.mp4")
    assert rate == Fraction(25, 2) and times == pytest.approx([n / 12.5 for n in range(6)], abs=1e-4)
    source = tmp_path / "in25.mp4"
    write_video(source, moving_frames(10), fps=25)
    model.watch(source, sinks=VideoSink(tmp_path / "forced.mp4", fps=5)).run(timeout=60)
    rate, times, duration = timing(tmp_path / "forced.mp4")
    assert rate == 5 and duration == pytest.approx(2.0, abs=1e-3)
    with pytest.raises(InputError, match="must be positive"):
        VideoSink(tmp_path / "bad.mp4", fps=0)


class RestartingClock(Source):
    """A live-like source whose clock restarts at 0 after frame 4, as a reconnected stream's does, after a
    0.3 s outage."""

    kind = "test"
    clock = True
    frame_rate = 20

    def frames(self, stop: threading.Event):
        for n, image in enumerate(moving_frames(8)):
            if n == 4:
                time.sleep(0.3)
            yield RawFrame(image, (n % 4) / 20, time.monotonic(), segment=n // 4)


def test_a_clock_that_goes_back_continues_after_the_last_frame(model, tmp_path, caplog):
    import logging

    caplog.set_level(logging.WARNING, logger="edgeaccel")  # whatever level an earlier test left the logger at
    out = tmp_path / "out.mp4"
    model.watch(RestartingClock("cam"), sinks=out).run(timeout=60)
    times = timing(out)[1]
    assert len(times) == 8 and all(b > a for a, b in itertools.pairwise(times))
    assert times[:4] == pytest.approx([0, 0.05, 0.1, 0.15], abs=1e-4)
    assert 0.3 <= times[4] - times[3] <= 1.0  # the outage is kept as a gap
    assert times[5] - times[4] == pytest.approx(0.05, abs=1e-4)  # and the new segment's spacing
    assert "went back at frame 4" in caplog.text


def test_latency_is_split_into_queue_wait_and_inference(tmp_path):
    """A file read ahead of the model (drop="none"): each frame waits behind the ones before it. That wait is
    "queue", apart from "inference", and the stages add up to the latency."""
    from edgeaccel.sources.frame import STAGES

    source = tmp_path / "in.mp4"
    write_video(source, moving_frames(40), fps=25)
    with edgeaccel.load(MODELS / "mobilenet_v2_1.0_224_quant.tflite", executor="litert") as slower:
        with slower.watch(source) as pipeline:
            frames = list(pipeline)
        summary = pipeline.summary()
    assert len(frames) == 40
    for frame in frames:
        assert list(frame.timing_ms) == list(STAGES)
        assert sum(frame.timing_ms.values()) == pytest.approx(frame.latency_ms, abs=1e-6)
        assert frame.timing_ms["inference"] > 0 and frame.timing_ms["preprocess"] > 0
        assert frame.to_dict()["timing_ms"]["inference"] == round(frame.timing_ms["inference"], 3)
        # the task result (a classifier here) carries its stages as model.predict() gives them
        assert frame.result.timing_ms["inference"] == frame.timing_ms["inference"]
    stages = summary["stages_ms"]
    assert set(stages) == set(STAGES) and set(summary["sources"][0]["stages_ms"]) == set(STAGES)
    # the reader is ahead by the queues' depth: most of the latency is waiting, which "latency" alone hid
    assert stages["queue"]["p50"] > stages["inference"]["p50"]
    assert stages["inference"]["p50"] < summary["latency_ms"]["p50"]


def test_frames_dropped_by_a_live_policy_leave_their_gap(model, tmp_path):
    """A source faster than its consumer under drop="latest": the frames served keep their own times, so
    the video lasts as long as the source did instead of playing the survivors back to back."""
    served = []

    def slow_consumer(frame):
        served.append((frame.index, frame.timestamp))
        time.sleep(0.02)

    out = tmp_path / "out.mp4"
    model.watch(iter(moving_frames(60)), fps=50, drop="latest", sinks=[out, slow_consumer]).run(timeout=60)
    indices = [i for i, _ in served]
    assert len(indices) < 60  # frames were dropped
    times = timing(out)[1]
    first = served[0][1]
    assert times == pytest.approx([t - first for _, t in served], abs=1e-4)
    assert times[-1] == pytest.approx((indices[-1] - indices[0]) / 50, abs=1e-4)


def test_a_looped_file_continues_one_frame_after_its_end(model, tmp_path):
    source = tmp_path / "in.mp4"
    write_video(source, moving_frames(5), fps=10)
    stamps = []
    with model.watch(source, loop=True) as pipeline:
        for frame in pipeline:
            stamps.append(frame.timestamp)
            if len(stamps) == 12:
                break
    assert np.diff(stamps) == pytest.approx([0.1] * 11, abs=1e-3)  # the replay joins at the source's rate
