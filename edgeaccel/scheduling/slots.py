"""What the scheduler engine keeps per request, per executor and per device: a queued request, an executor's
slot (what runs on it and how long its runs take) and a device's duty-cycle budget."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Request:
    seq: int
    arrival: float
    deadline: float | None = None  # absolute, on the scheduler's clock
    payload: Any = None
    future: Any = None
    expected_s: float = 0.0
    started: float | None = None
    attempts: int = 0
    tried: set = field(default_factory=set)  # executors that failed it
    queued: bool = False  # in the scheduler's queue now
    alone: bool = False  # nothing else ran on its device while it ran (its time is the executor's own)
    probe: bool = False  # a re-measurement on the model's own sample inputs, not a caller's request

    def key(self) -> tuple[float, int]:
        return (self.deadline if self.deadline is not None else math.inf, self.seq)


class ExecutorSlot:
    """Bookkeeping for one executor: what runs on it and how long its runs take."""

    def __init__(self, name: str, device: str, max_concurrency: int = 1, latency_s: float | None = None,
                 executor: Any = None) -> None:
        if max_concurrency < 1:
            raise ValueError(f"{name}: max_concurrency must be at least 1")
        self.name = name
        self.device = device
        self.max_concurrency = max_concurrency
        self.latency_s = latency_s  # EMA of measured service time (seeded by a hint, if any)
        self.alone_s = latency_s  # the same over runs with nothing else on the device: comparable across executors
        self.executor = executor
        self.running = 0
        self.ends: list[float] = []  # expected end times of running requests
        self.measured_at: float | None = None  # when its latency was last measured
        self.measured = 0
        self.failed_permanently: str | None = None
        self.power: Any = None  # a PowerFigure: what its device draws busy, where no counter measures it

    def __repr__(self) -> str:
        return f"<ExecutorSlot {self.name} on {self.device}>"


class DeviceBudget:
    """Duty cycle as a token bucket of busy-seconds: at duty d a device with c slots earns d*c busy-seconds per
    second, spends its runs' service time, and may start a run while it has any left. At duty 1 it is unlimited.

    The bank holds at most ``bucket_s`` of the current rate (d*c*bucket_s busy-seconds), so a cut bites at
    once: a full bank of the old rate would let a device cut from 1.0 to 0.3 run flat out for another 1-2 s
    (what made every start overshoot the passive trip)."""

    def __init__(self, capacity: int, bucket_s: float = 0.5) -> None:
        self.capacity = capacity
        self.bucket_s = bucket_s
        self.duty = 1.0
        self.tokens = self.bucket
        self.last: float | None = None

    @property
    def bucket(self) -> float:
        """The most busy-seconds the bank holds at the current duty."""
        return self.bucket_s * self.capacity * max(self.duty, 0.0)

    def refill(self, now: float) -> None:
        if self.last is None:
            self.last = now
        if self.duty >= 1.0:
            self.tokens = self.bucket
        elif now > self.last:
            self.tokens = min(self.bucket, self.tokens + self.duty * self.capacity * (now - self.last))
        self.last = max(self.last, now)

    def set_duty(self, duty: float, now: float) -> None:
        self.refill(now)
        self.duty = max(0.0, min(1.0, duty))
        self.tokens = min(self.tokens, self.bucket)

    def ready_at(self, now: float) -> float:
        if self.duty >= 1.0 or self.tokens > 0:
            return now
        if self.duty <= 0.0:
            return math.inf
        return now + (-self.tokens) / (self.duty * self.capacity)

    def charge(self, seconds: float) -> None:
        if self.duty < 1.0:
            self.tokens -= seconds
