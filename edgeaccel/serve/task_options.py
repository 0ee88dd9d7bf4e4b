"""A task request's own decoding options: the lowest score kept, NMS overlap, most boxes, classes kept, how
a mask comes back, and the tracked stream an image is a frame of (streams.py). They lay over the model's task for that request only, as ``TaskOptions`` of the same names do
in-process (``edgeaccel.load(..., task_options=TaskOptions(conf=0.5))`` answers as ``?conf=0.5`` does).

Where they come from: ``/predict``'s query string or form fields (every name there must be one of ours, so
that a misspelt ``?treshold=0.6`` is a 400, not an answer at the default), and the KServe ``parameters`` of an
/infer request with images (there other names belong to the protocol: ``binary_data_output``, ``timeout``...).
A value out of range is a 400 that says the range, never clamped; an option the model's decoder does not read
(``iou`` for an SSD whose NMS runs in the graph, ``conf`` for a classifier) is a 400 that says what it takes."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

from .errors import ServeError
from .streams import stream_name

MASK_FORMATS = ("png", "rle", "none")
SHARES = ("conf", "iou")  # between 0 and 1
COUNTS = ("max_det", "top_k")  # whole numbers from 1
MAX_COUNT = 10_000
# what other servers call the score threshold ("threshold" is not one: a segmenter's mask threshold has that name)
ALIASES = {"confidence": "conf"}
MAX_TIMESTAMP_S = 1e10  # a frame's timestamp, seconds either way of the client's zero
TRACKING = ("stream", "timestamp")  # a frame of a tracked stream (streams.py), and its time in seconds
PREDICT_NAMES = ("masks", "timeout", *SHARES, *COUNTS, *ALIASES, *TRACKING)  # what /predict's query string may hold


@dataclass(frozen=True)
class RequestOptions:
    masks: str = "png"
    decoding: dict[str, Any] = field(default_factory=dict)  # conf, iou, max_det, top_k given for this request
    masks_given: bool = False  # masks= was in the request (the default png is no choice of the client's)
    stream: str | None = None  # the tracked stream the image is a frame of: its boxes get track ids
    timestamp: float | None = None  # the frame's time, seconds (default: when it arrived)

    def task_for(self, task: Any) -> Any:
        """The model's task with this request's decoding options (a copy: other requests keep the model's); an
        option its decoder does not read, or masks= for a model that answers none, is a 400, not an answer
        that ignored it."""
        from ..vision.decoding_options import answers_masks, not_read_reason, options_read

        if self.masks_given and self.masks != "none" and not answers_masks(task):  # none: fine for any model
            raise ServeError(400, f"masks={self.masks} changes nothing for {task._info.path.name} ({task.name}, "
                                  f"{task.kind}): its results carry no masks; masks= is for segmenters")
        if not self.decoding:
            return task
        read = options_read(task)
        unread = [name for name in self.decoding if name not in read]
        if unread:
            takes = f"it takes {', '.join(read)}" if read else "it takes none of conf, iou, max_det, top_k"
            raise ServeError(400, f"{', '.join(unread)} changes nothing for {task._info.path.name} ({task.name}, "
                                  f"{task.kind}): {not_read_reason(task)}; {takes}")
        mine = copy.copy(task)
        for name, value in self.decoding.items():
            setattr(mine, name, value)
        return mine

    def check_images(self, count: int) -> None:
        """A tracked stream takes one frame a request: frames of one request would share one time."""
        if self.stream is not None and count != 1:
            raise ServeError(400, f"stream={self.stream} tracks one frame a request, and this one holds {count} "
                                  "images: send a stream's frames one per request, in order (each with its "
                                  "timestamp)")


def from_predict(values: dict[str, str]) -> RequestOptions:
    """/predict's query and form fields; an unknown name is a 400 naming the known ones."""
    unknown = sorted(set(values) - set(PREDICT_NAMES))
    if unknown:
        raise ServeError(400, f"unknown option {', '.join(repr(u) for u in unknown)}: /predict takes "
                              f"{', '.join(PREDICT_NAMES)} (e.g. ?conf=0.5&masks=rle)")
    return _options(values)


def from_parameters(parameters: dict[str, Any]) -> RequestOptions:
    """A KServe request's parameters (HTTP JSON, or gRPC's converted by ``grpc_values``)."""
    return _options(parameters)


def grpc_values(parameters: Any) -> dict[str, Any]:
    """gRPC InferParameter messages as plain values (the one field each sets)."""
    out = {}
    for name, given in parameters.items():
        kind = given.WhichOneof("parameter_choice")
        out[name] = getattr(given, kind) if kind else None
    return out


def mask_format(value: Any) -> str:
    value = "png" if value in (None, "") else str(value).lower()
    if value not in MASK_FORMATS:
        raise ServeError(400, f"masks must be one of {', '.join(MASK_FORMATS)}, not {value!r}")
    return value


def _options(values: dict[str, Any]) -> RequestOptions:
    decoding: dict[str, Any] = {}
    for given, value in values.items():
        name = ALIASES.get(given, given)
        if name in SHARES:
            share = _number(given, value)
            if not 0 <= share <= 1 or (name == "conf" and share == 0):
                # conf 0 would keep a fixed-size output's empty rows (zero boxes padding an NMS-in-graph output)
                raise ServeError(400, f"{given} is a share {'above 0 and up to' if name == 'conf' else 'between 0 and'}"
                                      f" 1, not {value!r}")
            if name in decoding and decoding[name] != share:
                raise ServeError(400, f"{given}={value!r} contradicts the conf given beside it: give one of "
                                      f"conf, {', '.join(ALIASES)}")
            decoding[name] = share
        elif name in COUNTS:
            count = _number(given, value)
            if count != int(count) or not 1 <= count <= MAX_COUNT:
                raise ServeError(400, f"{given} is a whole number from 1 to {MAX_COUNT}, not {value!r}")
            decoding[name] = int(count)
    stream = values.get("stream")
    timestamp = values.get("timestamp")
    if timestamp is not None:
        if stream is None:
            raise ServeError(400, "timestamp is a tracked frame's time: give stream=NAME beside it")
        timestamp = _number("timestamp", timestamp)
        if abs(timestamp) > MAX_TIMESTAMP_S:  # motion over such spans overflows; 1.8e12 is milliseconds since 1970
            raise ServeError(400, f"timestamp is in seconds, at most {MAX_TIMESTAMP_S:.0e} either way (Unix time "
                                  f"is 1.8e9), not {timestamp:g}: milliseconds? divide by 1000")
    return RequestOptions(mask_format(values.get("masks")), decoding, values.get("masks") not in (None, ""),
                          None if stream is None else stream_name(stream), timestamp)


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool):
        number = math.nan
    elif isinstance(value, (int, float)):
        number = float(value)
    else:
        try:
            number = float(str(value).strip())
        except ValueError:
            number = math.nan
    if not math.isfinite(number):
        raise ServeError(400, f"{name} is a number, not {value!r}")
    return number
