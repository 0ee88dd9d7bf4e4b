"""Power- and thermal-aware scheduling: a pure policy (readings and state in, decision out) inside a thin loop
with an injectable clock. ``ScheduledModel`` serves one model from several executors under a policy
(latency, efficiency, thermal, or a power budget); the simulator in ``edgeaccel.sim`` drives the same engine
through simulated time."""

from __future__ import annotations

from .clock import Clock, MonotonicClock
from .control import ThermalConfig
from .decision import Decision, DecisionRecord, DeviceView, ExecutorView, Observation
from .policies import (POLICIES, AlwaysFastest, EfficiencyPolicy, LatencyPolicy, Policy, PolicyState,
                       PowerBudgetPolicy, ThermalPolicy, make_policy)

__all__ = ["POLICIES", "AlwaysFastest", "Clock", "Decision", "DecisionRecord", "DeviceView", "EfficiencyPolicy",
           "ExecutorView", "LatencyPolicy", "MonotonicClock", "Observation", "Policy", "PolicyState",
           "PowerBudgetPolicy", "ThermalConfig", "ThermalPolicy", "make_policy"]


def __getattr__(name: str):
    if name == "ScheduledModel":  # imports numpy and the executor base: only when asked for
        from .model import ScheduledModel

        return ScheduledModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
