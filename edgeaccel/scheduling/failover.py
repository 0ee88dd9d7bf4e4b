"""Which executor's failures count against it, and when one is taken out of rotation (ScheduledModel's
fail-over bookkeeping; the model holds its lock around every call).

A failure counts against an executor only once another executor answers the same request: a request every
executor fails is what they all refuse (inputs that disagree with each other, a size the graph cannot take),
not a broken runtime, and three such requests from one client must not take the executors out of rotation
for every other (``edgeaccel serve``)."""

from __future__ import annotations

from collections.abc import Sequence

from .core import ExecutorSlot, Request

FAILURES_BEFORE_RETIRING = 3  # consecutive failures that take an executor out of rotation


class FailureLedger:
    def __init__(self, slots: Sequence[ExecutorSlot]) -> None:
        self.counts = {s.name: 0 for s in slots}
        self.last_error: dict[str, BaseException] = {}

    def failed(self, request: Request, slot: ExecutorSlot, error: BaseException,
               slots: Sequence[ExecutorSlot]) -> list[ExecutorSlot]:
        """Note ``slot``'s failure on ``request``; the executors in rotation that have not tried it yet."""
        self.last_error[slot.name] = error
        request.tried.add(slot.name)
        return [s for s in slots if s is not slot and not s.failed_permanently and s.name not in request.tried]

    def answered(self, request: Request, slot: ExecutorSlot, slots: Sequence[ExecutorSlot]) -> bool:
        """``slot`` answered ``request``: the executors it failed on before failed on their own. True when one
        of them was taken out of rotation now (the scheduler must apply its decision again)."""
        self.counts[slot.name] = 0
        retired = False
        for other in slots:
            if other.name not in request.tried:  # the common case: it ran where it was first sent
                continue
            self.counts[other.name] += 1
            if self.counts[other.name] >= FAILURES_BEFORE_RETIRING and not other.failed_permanently:
                last = str(self.last_error.get(other.name, "")).splitlines()[:1]
                other.failed_permanently = (f"{self.counts[other.name]} consecutive failures, last: "
                                            f"{''.join(last)} (model.reselect() offers it again)")
                retired = True
        return retired

    def reset(self, name: str) -> None:
        self.counts[name] = 0
