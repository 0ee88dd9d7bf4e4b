"""The vision layer's errors: a task that does not fit the model is bad input (exit code 4), like a bad image."""

from __future__ import annotations

from ..errors import InputError


class TaskError(InputError):
    """A task was asked for (or recognized) that the model's inputs and outputs cannot serve."""


class LayoutRefused(TaskError):
    """Outputs that look like a task's layout but fail its checks (unknown anchors, a candidate count or values
    that do not fit): recognition stops here rather than letting another task claim the model."""
