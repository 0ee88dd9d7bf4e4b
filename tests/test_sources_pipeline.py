"""Live sources on files, folders and iterables: every frame with drop="none", bounded loss with live policies,
fair sharing, state carried per source (traffic_model.tflite), sinks, clear errors, and a clean stop."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from conftest import MODELS, SHARED

av = pytest.importorskip("av")

import edgeaccel  # noqa: E402
from edgeaccel.errors import InputError  # noqa: E402
from edgeaccel.sources import SourceError, watch  # noqa: E402
from edgeaccel.sources.queues import Closed, DropQueue  # noqa: E402
from stream_servers import moving_frames, pipeline_threads_gone, write_video  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.shared]  # slow tier: video pipelines
# detections raw LiteRT finds per frame of traffic_frames.mp4 scoring above 0.3 (256x256 bilinear, LSTM state carried)
TRAFFIC_COUNTS = [3, 3, 2, 3, 3, 3, 4, 4, 4, 4, 4, 3, 2, 3, 2, 3, 2, 2, 2, 2]




@pytest.fixture(scope="module")
def small_model():
    with edgeaccel.load(MODELS / "mobilenet_v1_0.25_128_quant.tflite", executor="litert") as model:
        yield model


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    path = tmp_path_factory.mktemp("video") / "moving.mp4"
    write_video(path, moving_frames(45))
    return path


def test_traffic_detections_match_with_state_carried_per_source():
    with edgeaccel.load(MODELS / "traffic_model.tflite", executor="litert") as model:
        with model.watch(SHARED / "video" / "traffic_frames.mp4") as pipeline:  # state recognized by name/shape
            scores = [f.outputs["TFLite_Detection_PostProcess:2"] for f in pipeline]
        assert [int((s > 0.3).sum()) for s in scores] == TRAFFIC_COUNTS
        declared = {"raw_outputs/lstm_c": "raw_inputs/init_lstm_c", "raw_outputs/lstm_h": "raw_inputs/init_lstm_h"}
        video = SHARED / "video" / "traffic_frames.mp4"
        # two sources at once: each carries its own state, so each gives the expected answer
        with model.watch([video, video], state=declared, names=["a", "b"]) as pipeline:
            by_source: dict[str, list[int]] = {"a": [], "b": []}
            for frame in pipeline:
                by_source[frame.source].append(int((frame.outputs[2] > 0.3).sum()))
            assert pipeline._pairs == [(4, 1), (5, 2)]  # raw_outputs/lstm_c -> raw_inputs/init_lstm_c, h -> h
        with model.watch(video) as pipeline:
            assert pipeline._pairs == [(4, 1), (5, 2)]  # the same pairs, recognized by names and shapes
        assert by_source == {"a": TRAFFIC_COUNTS, "b": TRAFFIC_COUNTS}
        # (on this video LiteRT's LSTM state outputs stay at 0, so carrying it or not gives the same answers)


def test_wrong_state_declaration_is_a_clear_error():
    with edgeaccel.load(MODELS / "traffic_model.tflite", executor="litert") as model:
        with pytest.raises(SourceError, match="does not name an output and an input"):
            model.watch(SHARED / "video" / "traffic_frames.mp4", state={"lstm_c": "init_lstm_c"})


def test_file_with_drop_none_gives_every_frame_in_order(small_model, video):
    with small_model.watch(video, drop="none") as pipeline:
        frames = list(pipeline)
    assert [f.index for f in frames] == list(range(45))
    stamps = [f.timestamp for f in frames]
    assert stamps == sorted(stamps) and stamps[1] == pytest.approx(1 / 30, abs=1e-3)
    assert all(f.error is None and f.outputs[0].shape == (1, 1001) and f.latency_ms > 0 for f in frames)
    summary = pipeline.summary()
    assert summary["frames_in"] == summary["frames_out"] == 45 and sum(summary["dropped"].values()) == 0
    assert pipeline_threads_gone(5.0)


def test_frames_match_running_each_decoded_frame(small_model, video):
    # the pipeline's answer for a frame is model.run on that frame, fitted as `edgeaccel run` fits an image
    from edgeaccel.imageio import image_to_input

    with small_model.watch(video) as pipeline:
        frames = list(pipeline)
    for frame in frames[::15]:
        expected = small_model.run(image_to_input(frame.image, small_model.inputs[0])[0])[0]
        np.testing.assert_array_equal(frame.outputs[0], expected)


@pytest.mark.parametrize("drop", ["oldest", "latest"])
def test_live_policy_drops_at_the_source_and_never_queues(small_model, drop):
    images = moving_frames(8)
    produced = 300

    def fast():  # a source much faster than a slow consumer
        for n in range(produced):
            yield images[n % len(images)]

    seen = []
    with small_model.watch(fast(), drop=drop, queue_size=3) as pipeline:
        for frame in pipeline:
            seen.append(frame.index)
            time.sleep(0.01)
    summary = pipeline.summary()
    assert summary["frames_in"] == produced
    assert summary["frames_out"] + summary["dropped"]["source"] == produced
    assert summary["dropped"]["source"] > produced // 2
    assert seen == sorted(seen) and seen[-1] == produced - 1  # never behind: the last frame is served
    assert pipeline_threads_gone(5.0)


class _Counting:
    """The real model, with a count of the requests it holds (submitted, result not yet ready)."""

    def __init__(self, model) -> None:
        self._model = model
        self._lock = threading.Lock()
        self.holding = 0
        self.most = 0
        self.submitted = 0

    def __getattr__(self, name):
        return getattr(self._model, name)

    def submit(self, inputs, **options):
        with self._lock:
            self.holding += 1
            self.most = max(self.most, self.holding)
            self.submitted += 1
        future = self._model.submit(inputs, **options)
        future.add_done_callback(self._done)
        return future

    def run(self, inputs, **options):  # what the pipeline calls for a model that runs one request at a time
        with self._lock:
            self.holding += 1
            self.most = max(self.most, self.holding)
            self.submitted += 1
        try:
            return self._model.run(inputs, **options)
        finally:
            self._done(None)

    def _done(self, _future) -> None:
        with self._lock:
            self.holding -= 1


@pytest.mark.parametrize("hint", ["latency", "throughput"])
@pytest.mark.parametrize("drop", ["latest", "none"])
def test_requests_in_the_model_never_exceed_max_in_flight(drop, hint):
    # Live: as many requests as the executor runs at once, so that no frame waits inside it behind another (its
    # latency is its own inference); files: twice that, so that the executor never waits for the next frame.
    # A model slower than pre-processing (mobilenet_v2), so that frames would pile up in the executor if nothing
    # held them back. One request at a time (latency hint): the infer stage runs it itself.
    images = moving_frames(8)
    with edgeaccel.load(MODELS / "mobilenet_v2_1.0_224_quant.tflite", executor="litert",
                        performance_hint=hint) as model:
        counting = _Counting(model)
        concurrency = model.concurrency
        bound = concurrency * (1 if drop == "latest" else 2)

        def camera():  # faster than the model for 0.6 s (a file-like source under "none": 64 frames)
            end = time.monotonic() + 0.6
            for n in range(64 if drop == "none" else 10**6):
                if drop != "none" and time.monotonic() > end:
                    return
                yield images[n % len(images)]
                time.sleep(0.001)

        with watch(counting, camera(), drop=drop) as pipeline:
            waiting = []  # frames in the source queue (its end marker aside) each time a result comes out
            for _frame in pipeline:
                waiting.append(sum(isinstance(item, tuple) for item in list(pipeline._intake.queues[0]._items)))
    assert counting.submitted == pipeline.summary()["frames_out"] > 0
    assert pipeline.max_in_flight == bound and 1 <= counting.most <= bound
    assert pipeline._inline == (concurrency == 1)
    assert max(waiting) <= (1 if drop == "latest" else pipeline._intake.queues[0].size)


def test_drop_queue_policies():
    oldest = DropQueue(3, "oldest")
    dropped = [oldest.put(n) for n in range(10)]
    assert dropped == [None, None, None, 0, 1, 2, 3, 4, 5, 6]
    assert [oldest.get_nowait() for _ in range(3)] == [7, 8, 9]
    latest = DropQueue(3, "latest")
    for n in range(10):
        latest.put(n)
    assert len(latest) == 1 and latest.get_nowait() == 9
    blocking = DropQueue(2, "none")
    blocking.put(0)
    blocking.put(1)
    done = threading.Event()
    thread = threading.Thread(target=lambda: (blocking.put(2), done.set()))
    thread.start()
    assert not done.wait(0.2)  # full: the producer waits, nothing is lost
    assert blocking.get() == 0 and done.wait(2) and len(blocking) == 2
    blocking.close()
    with pytest.raises(Closed):
        blocking.put(3)
    thread.join()


def test_several_sources_share_the_model_fairly(small_model):
    images = moving_frames(4)
    with small_model.watch([images * 15, images * 15], names=["left", "right"]) as pipeline:
        frames = list(pipeline)
    first = [f.source for f in frames[:20]]
    assert first.count("left") >= 8 and first.count("right") >= 8
    assert sorted(f.index for f in frames if f.source == "left") == list(range(60))


def test_sinks_video_jsonl_images_and_callback(small_model, video, tmp_path):
    called = []
    sinks = [tmp_path / "out.mp4", tmp_path / "frames.jsonl", tmp_path / "images", called.append]
    summary = small_model.watch(video, sinks=sinks).run(timeout=60)
    assert summary["frames_out"] == 45 and len(called) == 45
    with av.open(str(tmp_path / "out.mp4")) as container:
        decoded = sum(1 for _ in container.decode(video=0))
        assert (container.streams.video[0].width, container.streams.video[0].height) == (160, 120)
    assert decoded == 45
    lines = [json.loads(line) for line in (tmp_path / "frames.jsonl").read_text().splitlines()]
    assert [r["index"] for r in lines] == list(range(45))
    # a classifier is recognized by the task layer: each line holds its top-k, not raw scores
    assert lines[0]["result"]["task"] == "classify" and lines[0]["result"]["classes"]
    assert len(list((tmp_path / "images").glob("*.png"))) == 45


def test_a_frame_size_that_changes_mid_stream_is_reported_and_served(small_model, tmp_path):
    frames = [np.zeros((32, 32, 3), np.uint8)] * 3 + [np.zeros((40, 48, 3), np.uint8)] * 3
    pipeline = small_model.watch(iter(frames), sinks=tmp_path / "out.mp4")
    served = list(pipeline)
    assert len(served) == 6 and all(f.error is None for f in served)
    assert pipeline.summary()["sources"][0]["events"] == ["frame size changed from 32x32 to 48x40 at frame 3"]
    with av.open(str(tmp_path / "out.mp4")) as container:  # the video keeps the first size
        assert [f.width for f in container.decode(video=0)] == [32] * 6


def test_image_folder_and_glob(small_model, tmp_path):
    from PIL import Image

    for n, image in enumerate(moving_frames(5)):
        Image.fromarray(image).save(tmp_path / f"f{n}.png")
    assert len(list(small_model.watch(tmp_path))) == 5
    assert len(list(small_model.watch(str(tmp_path / "f[0-2].png")))) == 3


def test_bad_sources_are_clear_errors(small_model, tmp_path):
    text = tmp_path / "notes.mp4"
    text.write_text("this is not a video\n" * 50)
    with pytest.raises(SourceError, match="not a video FFmpeg can read"):
        small_model.watch(text)
    with pytest.raises(SourceError, match="no such file"):
        small_model.watch(tmp_path / "missing.mp4")
    with pytest.raises(SourceError, match="no camera at /dev/video97"):
        small_model.watch("/dev/video97")
    with pytest.raises(SourceError, match="holds no images"):
        small_model.watch(tmp_path)
    with pytest.raises(InputError, match="not a drop policy"):
        small_model.watch([np.zeros((8, 8, 3), np.uint8)], drop="fast")
    items = [np.zeros((32, 32, 3), np.uint8), np.zeros((32, 32), np.float32)]  # the second is not an image
    with pytest.raises(SourceError, match=r"item 1 is float32\[32, 32\], not an image"):
        list(small_model.watch(items))
    assert pipeline_threads_gone(5.0)


def test_close_from_any_state(small_model, video):
    never_started = small_model.watch(video)
    never_started.close()
    looped = small_model.watch(video, loop=True)  # endless: only close() ends it
    for n, frame in enumerate(looped):  # noqa: B007 (the last frame is checked below)
        if n == 60:
            break
    assert frame.index == 60  # past the end of the 45-frame file: it looped
    looped.close()
    assert not looped.running and pipeline_threads_gone(5.0)
    running = small_model.watch(video, loop=True).start()
    time.sleep(0.2)
    closer = threading.Thread(target=running.close)
    closer.start()
    closer.join(10)
    assert not closer.is_alive() and not running.running
