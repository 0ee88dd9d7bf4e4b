"""The server's tracked streams (edgeaccel/serve/streams.py) without a server: frames tracked in the order they
arrived whatever order they finish in, a failed frame not holding the ones after it, the bounds on how many
streams are kept, and the request options that name a stream."""

from __future__ import annotations

import threading
import time

import pytest

from edgeaccel.serve.errors import ServeError
from edgeaccel.serve.streams import Streams
from edgeaccel.serve.task_options import from_parameters, from_predict
from edgeaccel.vision.results import Box

pytest.importorskip("scipy")


class Frame:
    """What the tracker reads of a task result: its boxes."""

    def __init__(self, *xyxy) -> None:
        self.boxes = [Box(tuple(float(v) for v in b), 0.9, 0, "thing") for b in xyxy]


def moving(i: int) -> Frame:
    return Frame((10 + 4 * i, 10, 30 + 4 * i, 30), (100 - 4 * i, 60, 120 - 4 * i, 80))


def test_frames_finishing_out_of_order_are_tracked_in_arrival_order():
    in_order, shuffled = Streams(), Streams()
    tickets = [shuffled.arrive("m", "cam", i / 10) for i in range(6)]
    frames = [moving(i) for i in range(6)]
    futures = {}
    for i in (3, 1, 5, 0, 4, 2):  # as runs of different lengths would finish
        futures[i] = tickets[i].complete(frames[i])
        assert futures[i].done() == (i in (0, 2)), "a frame is applied once every frame before it is"
    expected = []
    for i in range(6):
        frame = moving(i)
        expected.append((in_order.arrive("m", "cam", i / 10).complete(frame).result(), frame))
    for i in range(6):
        stream, frame = expected[i]
        assert futures[i].result() == stream
        assert [b.track_id for b in frames[i].boxes] == [b.track_id for b in frame.boxes]
    assert [b.track_id for b in frames[5].boxes] == [1, 2]
    assert [futures[i].result()["frame"] for i in range(6)] == [1, 2, 3, 4, 5, 6]


def test_a_failed_frame_does_not_hold_the_frames_after_it():
    streams = Streams()
    first, second, third = (streams.arrive("m", "cam", t) for t in (0.0, 0.1, 0.2))
    later = third.complete(moving(2))
    assert not later.done()
    first.abandon()  # its request failed (a bad image, a timeout)
    assert not later.done()
    done = second.complete(moving(1))
    assert done.done() and later.done()
    second.abandon()  # after complete: nothing more happens
    assert later.result()["frame"] == 2, "frames tracked: the failed one is not counted"


def test_a_waiter_that_gave_up_does_not_break_the_stream():
    streams = Streams()
    first, second = streams.arrive("m", "cam", 0.0), streams.arrive("m", "cam", 0.1)
    waiting = second.complete(moving(1))
    assert not waiting.cancel(), "the applier sets it: a caller's timeout cannot cancel it under it"
    first.complete(moving(0))
    assert waiting.result()["frame"] == 2


def test_streams_are_kept_per_model_and_name_and_bounded():
    streams = Streams(max_streams=2, idle_s=3600)

    def new(model, name, t):
        return streams.arrive(model, name, t).complete(moving(0)).result()["new"]

    assert new("m", "a", 0.0) and not new("m", "a", 0.1)
    assert new("other", "a", 0.0), "the same name on another model is another stream"
    assert new("m", "b", 0.0)
    assert len(streams) == 2
    assert new("m", "a", 0.2), "the least recently seen was forgotten past max_streams"


def test_an_idle_stream_is_forgotten():
    streams = Streams(idle_s=0.05)
    streams.arrive("m", "cam", 0.0).complete(moving(0))
    time.sleep(0.1)
    assert streams.arrive("m", "cam", 0.1).complete(moving(1)).result()["new"]
    assert len(streams) == 1


def test_a_clock_that_goes_back_ends_the_tracks_and_new_ids_follow():
    streams = Streams()
    for i in range(3):
        streams.arrive("m", "cam", 5 + i / 10).complete(moving(i)).result()
    frame = moving(0)
    stream = streams.arrive("m", "cam", 0.0).complete(frame).result()
    assert [e["type"] for e in stream["events"]] == ["ended", "ended"]
    frame = moving(1)
    streams.arrive("m", "cam", 0.1).complete(frame).result()
    assert [b.track_id for b in frame.boxes] == [3, 4], "ids are not given twice in one stream"


def test_concurrent_streams_track_alike():
    streams, answers = Streams(), {}

    def camera(name: str) -> None:
        ids = []
        for i in range(8):
            frame = moving(i)
            streams.arrive("m", name, i / 10).complete(frame).result(5)
            ids.append([b.track_id for b in frame.boxes])
        answers[name] = ids

    threads = [threading.Thread(target=camera, args=(f"cam{k}",)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(answers) == 4 and all(ids == answers["cam0"] for ids in answers.values())
    assert answers["cam0"][-1] == [1, 2]


@pytest.mark.parametrize("values, words", [
    ({"stream": ""}, "stream is a name"),
    ({"stream": "a b"}, "stream is a name"),
    ({"stream": "x" * 129}, "stream is a name"),
    ({"timestamp": "1.5"}, "give stream=NAME beside it"),
    ({"stream": "cam", "timestamp": "soon"}, "timestamp is a number"),
    ({"stream": "cam", "timestamp": "nan"}, "timestamp is a number"),
    ({"stream": "cam", "timestamp": "1e308"}, "timestamp is in seconds"),
    ({"stream": "cam", "timestamp": "1795769329000"}, "milliseconds?"),
])
def test_bad_stream_options_are_a_400_that_says_what_to_send(values, words):
    with pytest.raises(ServeError) as caught:
        from_predict(values)
    assert caught.value.status == 400 and words in caught.value.message


def test_stream_options_from_the_query_and_from_kserve_parameters():
    options = from_predict({"stream": "cam-1/left", "timestamp": "12.5"})
    assert (options.stream, options.timestamp) == ("cam-1/left", 12.5)
    options = from_parameters({"stream": "cam1", "timestamp": 3, "binary_data_output": True})
    assert (options.stream, options.timestamp) == ("cam1", 3.0)
    with pytest.raises(ServeError, match="one frame a request"):
        options.check_images(2)
    options.check_images(1)
    from_parameters({}).check_images(5)


def test_a_frame_that_arrived_after_a_later_one_is_answered_untracked_not_a_restart():
    streams = Streams()
    for i in range(3):
        streams.arrive("m", "cam", i / 10).complete(moving(i)).result()
    frame = moving(1)
    late = streams.arrive("m", "cam", 0.15).complete(frame).result()  # overtaken on another connection
    assert late["late"] and late["events"] == [] and late["frame"] == 3
    assert [b.track_id for b in frame.boxes] == [None, None], "an untracked frame's boxes carry no ids"
    frame = moving(3)
    on = streams.arrive("m", "cam", 0.3).complete(frame).result()
    assert "late" not in on and [b.track_id for b in frame.boxes] == [1, 2], "the tracks went on"


def test_frames_without_a_timestamp_follow_the_clients_clock_once_one_gave_it():
    streams = Streams()
    streams.arrive("m", "cam", 1000.0).complete(moving(0)).result()
    ticket = streams.arrive("m", "cam", None)
    assert 1000.0 <= ticket.timestamp < 1001.0, "not the server's own clock, which would end the tracks"


def test_a_whole_number_names_a_stream_by_its_digits():
    assert from_parameters({"stream": 7}).stream == "7"
    with pytest.raises(ServeError):
        from_parameters({"stream": True})


def test_a_stateful_models_frames_run_with_the_state_the_frame_before_left():
    streams = Streams()
    state = [("state_out", "state_in")]
    first, second, third = (streams.arrive("m", "cam", t, tracks=False, state=state) for t in (0.0, 0.1, 0.2))
    assert first.state_in.result(0) is None, "the first frame starts from zeros"
    assert not second.state_in.done(), "the second waits for the first to run"
    first.ran({"state_out": "after 1", "logits": None})
    first.complete(object())
    assert second.state_in.result(0) == {"state_in": "after 1"}
    second.abandon()  # failed before it ran: the next does not run on a stale state
    assert third.state_in.result(0) is None
    restart = streams.arrive("m", "cam", 0.0 - 5, tracks=False, state=state)
    assert restart.state_in.result(0) is None, "a clock gone back: the camera restarted"
    answer = third.complete(object()).result(0)
    assert answer["frame"] == 2 and "tracks" not in answer, "a model without boxes: no tracker"


def test_idle_streams_are_forgotten_without_traffic_too():
    streams = Streams(idle_s=0.05)
    streams.arrive("m", "cam", 0.0)
    time.sleep(0.1)
    assert len(streams) == 0


def test_a_straggler_from_before_a_restart_is_late_not_another_restart():
    streams = Streams()
    for when in (100.0, 100.1):
        streams.arrive("m", "cam", when).complete(moving(0)).result()
    streams.arrive("m", "cam", 0.0).complete(moving(0)).result()  # the camera restarted
    straggler = streams.arrive("m", "cam", 99.9).complete(moving(1)).result()
    assert straggler["late"]
    frame = moving(1)
    on = streams.arrive("m", "cam", 0.1).complete(frame).result()
    assert "late" not in on and "ended" not in [e["type"] for e in on["events"]], "no second restart"
    assert [b.track_id for b in frame.boxes] == [3, 4], "the restarted camera's tracks, confirmed"
    ticks = [streams.arrive("m", "cam", 0.5 * k).late for k in range(1, 202)]  # 0.5 s steps up to 100.5
    assert not any(ticks), "the new clock reaching the old one in steps is no straggler"


def test_a_late_frame_of_a_stateful_model_runs_on_the_state_before_it_and_passes_none_on():
    streams = Streams()
    state = [("state_out", "state_in")]
    first = streams.arrive("m", "cam", 1.0, tracks=False, state=state)
    first.ran({"state_out": "after 1.0"})
    late = streams.arrive("m", "cam", 0.9, tracks=False, state=state)
    assert late.late and late.state_in.result(0) == {"state_in": "after 1.0"}
    late.ran({"state_out": "after 0.9"})
    after = streams.arrive("m", "cam", 1.1, tracks=False, state=state)
    assert after.state_in.result(0) == {"state_in": "after 1.0"}, "the chain follows the latest frame"


def test_a_model_reloaded_with_other_outputs_starts_its_streams_again():
    streams = Streams()
    first = streams.arrive("m", "cam", 0.0, tracks=False, state=[("state_out", "state_in")])
    first.ran({"state_out": 1})
    first.complete(object()).result(0)
    again = streams.arrive("m", "cam", 0.1, tracks=True, state=[])
    assert again.state_in is None and again.complete(moving(0)).result(0)["new"]
