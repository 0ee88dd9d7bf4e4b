"""Does a candidate agree with the reference? One module for every caller (calibration, ``tune``, background
switching, ``check``, ``profile --compare``), each choosing its own thresholds.

- ``tensors``: per-output figures on raw outputs (max error in quantization steps and as a share of the
  output's range, relative L2, SQNR, top-1/top-5 for class scores) and the tensor verdict ``agreement``;
- ``tasks``: figures on decoded results (boxes, masks, keypoints, classes) pooled over all samples
  (``task_metrics``);
- ``guard``: the one decision "does B agree with A on this model" (``judge``, ``Thresholds``): the task's
  result when the task is known, the tensor verdict otherwise.

Only ``tensors`` is imported here: ``tasks`` and ``guard`` import the vision layer when they are used.
"""

from .tensors import DEFAULT_TOLERANCE, STEP_FLOOR, Agreement, ErrorSums, agreement, relative_l2, sqnr_db

__all__ = ["DEFAULT_TOLERANCE", "STEP_FLOOR", "Agreement", "ErrorSums", "agreement", "relative_l2", "sqnr_db"]
