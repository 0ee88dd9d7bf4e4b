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


def counters(avg_us: float, status: str = "Status.EXECUTED", name: str = "conv"):
    return SimpleNamespace(node_name=name, node_type="Convolution", exec_type="jit", status=status,
                           real_time=timedelta(microseconds=int(avg_us)))


@pytest.mark.parametrize("semantics", ["running average", "per inference"])
def test_openvino_counters_read_the_way_that_tracks_the_run_times(semantics):
    """OpenVINO's CPU plugin reports each node's average over every inference so far (measured); another
    plugin may report the last one. Run k added k * avg_k - (k - 1) * avg_(k-1) under the first reading; the
    reading whose per-run sums follow the measured run times is kept."""
    from edgeaccel.profiling.openvino import read_counters

    durations = [400, 100, 900, 300, 700, 200, 800]  # microseconds; the run times follow them (plus 10%)
    walls_ms = [d * 1.1 / 1e3 for d in durations]
    snapshots = []
    for k in range(1, len(durations) + 1):
        value = sum(durations[:k]) / k if semantics == "running average" else durations[k - 1]
        snapshots.append([counters(value), counters(0, "Status.OPTIMIZED_OUT", "fq")])
    warmup = 2
    chosen, runs = read_counters(snapshots, warmup, walls_ms[warmup:], "CPU")
    assert chosen == semantics
    assert all(len(ops) == 1 for ops in runs)  # the optimized-out node is not an operator that ran
    got = [ops[0].dur_us for ops in runs]
    assert got == pytest.approx(durations[warmup:], abs=len(durations))  # averages are in whole microseconds


@pytest.mark.parametrize("name, key", [
    ("MobilenetV2/Conv/BatchNorm_Fold/bias_prequant_token_1", "MobilenetV2/Conv/BatchNorm_Fold/bias"),
    ("MobilenetV2/Conv/BatchNorm_Fold/bias_prequant/WithoutBiases", "MobilenetV2/Conv/BatchNorm_Fold/bias"),
    ("Convert_667_original", "Convert_667"),
    ("plain", "plain"),
])
def test_match_key_removes_runtime_suffixes(name, key):
    assert match_key(name) == key
