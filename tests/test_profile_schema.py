"""The profile schema's arithmetic (median per operator, shares, device split) and name matching, on records
written out by hand: the parsers' arithmetic, with the runtimes tested in test_profile_runtimes.py."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest

from edgeaccel.profiling.matching import match_key
from edgeaccel.profiling.schema import OpEvent, RunRecord, aggregate, device_split


def run(*ops: tuple[str, str, float]) -> RunRecord:
    return RunRecord(0.0, 1.0, [OpEvent(name, "Conv", device, dur) for name, device, dur in ops])


def test_median_per_operator_and_shares():
    records = [run(("a", "CPU", 100), ("b", "GPU", 300)), run(("a", "CPU", 200), ("b", "GPU", 300)),
               run(("a", "CPU", 900), ("b", "GPU", 500))]
    ops = aggregate(records)
    assert [op.name for op in ops] == ["a", "b"]
    assert ops[0].median_ms == pytest.approx(0.2) and ops[1].median_ms == pytest.approx(0.3)
    assert ops[0].share == pytest.approx(0.4) and ops[0].runs == 3
    split = device_split(ops)
    assert [d.device for d in split] == ["GPU", "CPU"] and split[0].time_share == pytest.approx(0.6)
    assert split[0].op_share == 0.5


def test_an_operator_twice_in_one_run_counts_once_with_the_sum():
    ops = aggregate([run(("loop", "CPU", 100), ("loop", "CPU", 50)), run(("loop", "CPU", 150))])
    assert len(ops) == 1 and ops[0].median_ms == pytest.approx(0.15) and ops[0].runs == 2


def test_openvino_per_run_times_from_its_running_average():
    """OpenVINO reports each node's average over every inference so far (measured); run k added
    k * avg_k - (k - 1) * avg_(k-1)."""
    from edgeaccel.profiling.openvino import run_events

    def info(avg_us):
        return SimpleNamespace(node_name="conv", node_type="Convolution", exec_type="jit", status="Status.EXECUTED",
                               real_time=timedelta(microseconds=avg_us))

    durations = [100, 300, 200]
    before, seen = {}, []
    for k in range(1, 4):
        avg = sum(durations[:k]) // k
        totals = {"conv": avg * k}
        seen += [e.dur_us for e in run_events([info(avg)], totals, before, "CPU")]
        before = totals
    assert seen == [100, 300, 200]
    skipped = SimpleNamespace(node_name="fq", node_type="FakeQuantize", exec_type="undef",
                              status="Status.OPTIMIZED_OUT", real_time=timedelta(0))
    assert run_events([skipped], {"fq": 0}, {}, "CPU") == []


@pytest.mark.parametrize("name, key", [
    ("MobilenetV2/Conv/BatchNorm_Fold/bias_prequant_token_1", "MobilenetV2/Conv/BatchNorm_Fold/bias"),
    ("MobilenetV2/Conv/BatchNorm_Fold/bias_prequant/WithoutBiases", "MobilenetV2/Conv/BatchNorm_Fold/bias"),
    ("Convert_667_original", "Convert_667"),
    ("plain", "plain"),
])
def test_match_key_removes_runtime_suffixes(name, key):
    assert match_key(name) == key
