"""Cascades: a detector, then models on the crops of what it found (classifier, landmarks, a second detector),
each on its own executor and device, answers mapped back to the original frame. docs/cascade.md.

    with edgeaccel.Cascade([
            {"name": "face", "model": "face_detection_short_range.tflite"},
            {"name": "mesh", "model": "face_landmark.tflite", "crop": {"scale": 1.5, "rotate": [0, 1, 0]}},
    ]) as faces:
        result = faces.predict("people.jpg")
        for box in result.boxes:
            print(box.xyxy, box.stages["mesh"].keypoints[:3])
"""

from __future__ import annotations

from importlib import import_module

_LAZY = {"Cascade": "core", "Stage": "stage", "CropOptions": "geometry", "Crop": "geometry",
         "load_cascade": "core", "CascadeRun": "live", "CascadeFrame": "live"}

__all__ = ["Cascade", "CascadeFrame", "CascadeRun", "Crop", "CropOptions", "Stage", "load_cascade"]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
