"""Network sources against real servers on 127.0.0.1: RTSP (H.264 over RTP interleaved on TCP) including a
stream that drops and comes back and one that never answers, and MJPEG over HTTP; backoff with jitter."""

from __future__ import annotations

import random
import socket
import threading
import time

import pytest

from conftest import MODELS

pytest.importorskip("av")
pytest.importorskip("PIL")

import edgeaccel  # noqa: E402
from edgeaccel.sources import SourceLostError  # noqa: E402
from edgeaccel.sources.network import Backoff  # noqa: E402
from stream_servers import MjpegServer, RtspServer, moving_frames, pipeline_threads_gone, write_video  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.shared]  # slow tier: live streams from local servers


@pytest.fixture(scope="module")
def model():
    with edgeaccel.load(MODELS / "mobilenet_v1_0.25_128_quant.tflite", executor="litert") as loaded:
        yield loaded




def test_rtsp_stream(model):
    with RtspServer(moving_frames(30)) as server:
        with model.watch(server.url, drop="oldest") as pipeline:
            frames = []
            for frame in pipeline:
                frames.append(frame)
                if len(frames) == 20:
                    break
    assert all(f.image.shape == (120, 160, 3) and f.outputs[0].shape == (1, 1001) for f in frames)
    assert [f.index for f in frames] == sorted(f.index for f in frames)
    assert pipeline_threads_gone(10.0)


def test_rtsp_stream_that_drops_comes_back(model):
    with RtspServer(moving_frames(30)) as server:
        with model.watch(server.url, reconnect_timeout=20) as pipeline:
            segments_seen = 0
            for n, _frame in enumerate(pipeline):
                if n == 15:
                    threading.Thread(target=server.cut, args=(1.0,), daemon=True).start()
                if n >= 15 and pipeline.sources[0].reconnects:
                    segments_seen += 1
                    if segments_seen == 10:
                        break
        summary = pipeline.summary()["sources"][0]
    assert summary["reconnects"] == 1 and summary["outage_s"] >= 0.9
    assert any("lost" in e for e in summary["events"]) and any("reconnected" in e for e in summary["events"])
    assert server.connections >= 2
    assert pipeline_threads_gone(10.0)


def test_source_that_never_connects_ends_with_a_clear_error_and_others_go_on(model, tmp_path):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    video = tmp_path / "v.mp4"
    write_video(video, moving_frames(20))
    got = []
    pipeline = model.watch([f"rtsp://127.0.0.1:{port}/cam", video], reconnect_timeout=1.5)
    with pytest.raises(SourceLostError, match="could not connect for 1.5 s") as error:
        for frame in pipeline:
            got.append(frame.source)
    assert error.value.hint and "reconnect_timeout" in error.value.hint
    assert got.count(str(video)) == 20  # the file was served to its end meanwhile
    assert pipeline_threads_gone(10.0)


def test_close_while_a_stream_is_reconnecting(model):
    server = RtspServer(moving_frames(10)).start()
    pipeline = model.watch(server.url, reconnect_timeout=60).start()
    time.sleep(0.5)
    server.stop()  # down for good: the source waits and retries
    time.sleep(0.5)
    start = time.monotonic()
    pipeline.close()
    assert not pipeline.running and time.monotonic() - start < 15
    assert pipeline_threads_gone(10.0)


def test_mjpeg_over_http(model):
    with MjpegServer(moving_frames(10), fps=60) as server:
        with model.watch(server.url) as pipeline:
            frames = []
            for frame in pipeline:
                frames.append(frame)
                if len(frames) == 15:
                    break
    assert all(f.image.shape == (120, 160, 3) and f.error is None for f in frames)
    assert pipeline_threads_gone(10.0)


def test_backoff_grows_with_jitter_and_resets():
    backoff = Backoff(initial=0.5, maximum=4.0, rng=random.Random(7))
    delays = [backoff.next() for _ in range(7)]
    caps = [0.5, 1.0, 2.0, 4.0, 4.0, 4.0, 4.0]
    assert all(cap / 2 <= d <= cap for d, cap in zip(delays, caps, strict=True))
    assert len({round(d, 6) for d in delays[3:]}) > 1  # jitter: clients do not come back in step
    backoff.reset()
    assert backoff.next() <= 0.5


def test_two_streams_share_the_model_and_max_fps_skips_frames(model):
    with RtspServer(moving_frames(30)) as one, RtspServer(moving_frames(30), path="/cam2") as two:
        with model.watch([one.url, two.url], max_fps=10, names=["one", "two"]) as pipeline:
            counts = {"one": 0, "two": 0}
            for frame in pipeline:
                counts[frame.source] += 1
                if min(counts.values()) >= 8:
                    break
            summary = pipeline.summary()
    assert min(counts.values()) >= 8
    # 30 frames/s offered, at most 10/s taken: about two frames in three are skipped at the source
    for source in summary["sources"]:
        assert source["dropped"]["max_fps"] >= source["frames_in"] // 2
    assert pipeline_threads_gone(10.0)


def test_http_url_that_is_not_found_says_what_the_server_answered(model):
    with MjpegServer(moving_frames(3)) as server:
        with pytest.raises(SourceLostError, match="404 Not Found"):
            list(model.watch(server.url.replace("stream.mjpg", "missing"), reconnect_timeout=1))
    assert pipeline_threads_gone(10.0)


class _CountingContainer:
    """A real container, with the time each packet was read and how many were read so far."""

    def __init__(self, container) -> None:
        self.container, self.streams = container, container.streams
        self.read_at: dict[int, float] = {}

    def demux(self, stream):
        for packet in self.container.demux(stream):
            if packet.pts is not None:
                self.read_at[packet.pts] = time.monotonic()
            yield packet


@pytest.mark.parametrize("live", [True, False])
def test_a_frame_is_timed_from_its_packet_and_a_live_decoder_holds_no_frame_back(tmp_path, live):
    import av

    from edgeaccel.sources.readers import Source
    from edgeaccel.sources.video import decode

    path = tmp_path / "no_b_frames.mp4"  # as a camera or RTSP server sends: no reordering
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=30, options={"tune": "zerolatency", "bframes": "0"})
        stream.height, stream.width, stream.pix_fmt = 120, 160, "yuv420p"
        for image in moving_frames(12):
            out.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        out.mux(stream.encode())
    source = Source("camera-like")
    source.live = live
    with av.open(str(path)) as container:
        counting = _CountingContainer(container)
        held_back = []
        for n, raw in enumerate(decode(counting, source, threading.Event())):
            held_back.append(len(counting.read_at) - (n + 1))  # packets read whose frame has not come out yet
            read = [counting.read_at[pts] for pts in sorted(counting.read_at)]
            # stamped when its packet was read, before the next packet was (not when the decoder let it out)
            assert read[n] <= raw.captured and (n + 1 == len(read) or raw.captured < read[n + 1])
        threads = container.streams.video[0].thread_type
    assert len(held_back) == 12
    if live:  # slice threads: each frame comes out of the packet that brought it
        assert max(held_back) == 0 and threads == av.codec.context.ThreadType.SLICE
    else:  # a file keeps frame threads (throughput), which hold frames back
        assert threads == av.codec.context.ThreadType.AUTO
