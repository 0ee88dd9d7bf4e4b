"""The usual multi-object tracking figures (CLEAR MOT's MOTA and ID switches, IDF1, fragmentations) from
truth and tracker boxes per frame, matched at IoU >= 0.5; written here because motmetrics 1.4 (the usual
evaluator) does not run on NumPy 2 (np.asfarray)."""

from __future__ import annotations

import numpy as np


def mot_figures(frames: list[tuple[dict, dict]], min_iou: float = 0.5) -> dict:
    """``frames``: per frame (truth {object: box}, hypotheses {track id: box}), boxes x1, y1, x2, y2."""
    from scipy.optimize import linear_sum_assignment

    from ..tracking.assignment import iou_matrix

    truths = misses = false = switches = fragmentations = 0
    last: dict = {}  # object -> the track it was last matched to
    tracked_before: dict = {}  # object -> whether it was matched on its previous frame in view
    together: dict = {}  # (object, track) -> frames matched
    hypotheses = 0
    for truth, hyp in frames:
        t_ids, h_ids = list(truth), list(hyp)
        truths += len(t_ids)
        hypotheses += len(h_ids)
        pairs = []
        if t_ids and h_ids:
            iou = iou_matrix(np.array([truth[i] for i in t_ids], float), np.array([hyp[j] for j in h_ids], float))
            rows, cols = linear_sum_assignment(-iou)
            pairs = [(t_ids[r], h_ids[c]) for r, c in zip(rows, cols, strict=True) if iou[r, c] >= min_iou]
        matched = {o for o, _ in pairs}
        for obj, track in pairs:
            if obj in last and last[obj] != track:
                switches += 1
            if tracked_before.get(obj) is False:
                fragmentations += 1  # tracked, then not, now again
            last[obj] = track
            together[obj, track] = together.get((obj, track), 0) + 1
        for obj in t_ids:
            if obj in last or obj in matched:
                tracked_before[obj] = obj in matched
        misses += len(t_ids) - len(pairs)
        false += len(h_ids) - len(pairs)
    objects = sorted({o for o, _ in together})
    tracks = sorted({t for _, t in together})
    idtp = 0
    if objects:
        counts = np.array([[together.get((o, t), 0) for t in tracks] for o in objects])
        rows, cols = linear_sum_assignment(-counts)  # one track per object for the whole video
        idtp = int(counts[rows, cols].sum())
    return {"mota": 1 - (misses + false + switches) / max(truths, 1), "idf1": 2 * idtp / max(truths + hypotheses, 1),
            "switches": switches, "fragmentations": fragmentations, "misses": misses, "false_positives": false,
            "truths": truths}
