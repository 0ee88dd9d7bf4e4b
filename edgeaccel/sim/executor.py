"""A simulated executor: the Executor contract over a heat model. A run takes the device's current service
time (longer while the simulated kernel throttles it), heats it, and returns zeros shaped like the model's
outputs. On a real clock it sleeps that long; the discrete-event driver calls ``begin`` instead and never sleeps."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..executors.base import Availability, Executor, ExecutorInfo, ExecutorOptions
from ..executors.facts import DeviceSpec
from ..options import RuntimeOptions
from ..modelinfo import Format, ModelInfo, TensorSpec
from .heat import HeatModel

# what a simulated device is called where real executors say "CPU", "EdgeTPU", "GPU"
DEVICE_KIND = {"cpu": "CPU", "apex": "EdgeTPU", "hwmon": "SimAccel"}


def placeholder_model() -> ModelInfo:
    """A one-input, one-output description for simulated runs that need no real model."""
    return ModelInfo(Path("<simulated>"), Format.TFLITE,
                     (TensorSpec("input", (1, 8), np.dtype(np.uint8)),),
                     (TensorSpec("output", (1, 4), np.dtype(np.float32)),))


class SimulatedExecutor(Executor):
    runtime = "simulated"
    formats = frozenset(Format)
    device_specs = (DeviceSpec("CPU", "cpu"), DeviceSpec("EdgeTPU", "edgetpu"), DeviceSpec("SimAccel", "npu"))

    def __init__(self, heat: HeatModel, clock, model: ModelInfo | None = None, name: str | None = None) -> None:
        super().__init__(model or placeholder_model(), DEVICE_KIND[heat.p.layout], ExecutorOptions(RuntimeOptions(threads=1)))
        self.heat = heat
        self.clock = clock
        if not getattr(clock, "simulated", True):  # a real clock: the device starts now, not at its origin
            heat.start_at(clock.now())
        self.name = name or f"sim:{heat.p.name}"
        self.closed = False

    @classmethod
    def availability(cls, device: str | None = None) -> Availability:
        return Availability(True, "simulated device (no hardware)")

    @property
    def info(self) -> ExecutorInfo:
        return ExecutorInfo("simulated", "heat-model", self.device, "simulated", 1,
                            details={"simulated": True, "device": self.heat.p.name,
                                     "nominal_service_s": self.heat.p.service_s})

    @property
    def nominal_latency_s(self) -> float:
        return self.heat.p.service_s

    def begin(self, now: float) -> float:
        return self.heat.begin(now)

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        duration = self.begin(self.clock.now())
        self.clock.sleep(duration)
        return [np.zeros([d or 1 for d in spec.shape], dtype=spec.dtype) for spec in self.outputs]

    def close(self) -> None:
        self.closed = True
