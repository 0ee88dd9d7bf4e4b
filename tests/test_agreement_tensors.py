"""Tensor-level figures (edgeaccel/agreement/tensors.py) on arrays whose right answers are known: relative L2
and SQNR pooled over samples, quantization steps, top-1 over clear-cut rows and top-5, and the refusals that no
tolerance lifts (a changed shape, NaN)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgeaccel.agreement import DEFAULT_TOLERANCE, STEP_FLOOR, Agreement, ErrorSums, agreement
from edgeaccel.agreement.tensors import compare_outputs, relative_l2, sqnr_db, top_k_agreement
from edgeaccel.modelinfo import Quantization, TensorSpec

F32 = TensorSpec("y", (1, 4), np.dtype(np.float32))
U8 = TensorSpec("y", (1, 4), np.dtype(np.uint8), Quantization((0.5,), (10,)))


def test_the_old_names_still_import():
    assert DEFAULT_TOLERANCE == 0.05 and STEP_FLOOR == 2 and Agreement(True, "").ok


def test_relative_l2_and_sqnr_are_pooled_over_samples():
    sums = ErrorSums()
    sums.add(np.array([3.0, 4.0]), np.array([3.0, 4.0]))  # norm 5, no error
    sums.add(np.array([0.0, 0.0]), np.array([0.0, 5.0]))  # error 5 on a zero reference
    assert sums.rel_l2 == pytest.approx(1.0)  # sqrt(25 / 25): the sample alone would be infinite
    assert sums.sqnr_db == pytest.approx(0.0)
    assert sums.max_abs == 5.0 and sums.mean_abs == pytest.approx(5 / 4)
    assert relative_l2(0.0, 0.0) == 0.0 and math.isinf(relative_l2(1.0, 0.0))
    assert sqnr_db(0.0, 4.0) is None and sqnr_db(1.0, 100.0) == pytest.approx(20.0)


def test_quantized_outputs_are_counted_in_steps_and_dequantized():
    ref = [np.array([[10, 50, 90, 130]], np.uint8)]
    got = [np.array([[11, 50, 90, 129]], np.uint8)]
    out = compare_outputs(ref, got, [U8], [U8]).per_output["y"]
    assert out["max_error_steps"] == 1 and out["max_abs_error"] == pytest.approx(0.5)
    assert out["range"] == pytest.approx(60.0)  # (130 - 10) * 0.5
    assert agreement(ref, got, [U8], [U8]).ok


def test_top1_counts_clear_cut_rows_only_and_top5_all_rows():
    ref = [np.array([[0.9, 0.05, 0.02, 0.01, 0.01, 0.01]]), np.array([[0.40, 0.39, 0.1, 0.05, 0.03, 0.03]])]
    got = [np.array([[0.9, 0.05, 0.02, 0.01, 0.01, 0.01]]), np.array([[0.39, 0.40, 0.1, 0.05, 0.03, 0.03]])]
    assert top_k_agreement(ref, got, 1) == (1, 2)
    assert top_k_agreement(ref, got, 1, margin=0.05) == (1, 1)  # the near tie does not count
    assert top_k_agreement(ref, got, 5) == (2, 2)
    moved = [np.array([[0.0, 0.1, 0.2, 0.3, 0.4, 0.5]])]  # the reference's winner (0) is now last of six
    assert top_k_agreement(ref[:1], moved, 5) == (0, 1)
    assert top_k_agreement([np.zeros((1, 4, 4))], [np.zeros((1, 4, 4))], 1) is None  # not class scores
    out = compare_outputs(ref, got, [F32], [F32]).per_output["y"]
    assert out["top1_agreement"] == 1.0 and out["top1_clear_cut"] == 1 and out["top5_agreement"] == 1.0


def test_a_changed_shape_or_nan_is_broken_whatever_the_tolerance():
    ref = [np.array([[0.1, 0.2, 0.3, 0.4]], np.float32)]
    nan = [np.array([[0.1, np.nan, 0.3, 0.4]], np.float32)]
    compared = compare_outputs(ref, nan, [F32], [F32])
    assert compared.broken and "NaN" in compared.broken[0]
    assert not agreement(ref, nan, [F32], [F32], tolerance=10.0).ok
    wide = [np.zeros((1, 5), np.float32)]
    assert "shape" in compare_outputs(ref, wide, [F32], [F32]).broken[0]


def test_the_verdict_reports_l2_and_sqnr_beside_the_range_share():
    ref = [np.array([[0.0, 1.0, 2.0, 4.0]], np.float32)]
    got = [np.array([[0.0, 1.0, 2.0, 4.1]], np.float32)]
    result = agreement(ref, got, [F32], [F32])
    assert result.ok and result.metrics["max_error_fraction"] == pytest.approx(0.025, rel=1e-3)
    assert result.metrics["rel_l2"] == pytest.approx(0.1 / math.sqrt(21), rel=1e-3)
    assert result.metrics["sqnr_db"] == pytest.approx(10 * math.log10(21 / 0.01), rel=1e-3)
