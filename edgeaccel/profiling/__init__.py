"""Where the time, the memory and the accuracy go, per operator, on every runtime: ``edgeaccel profile``.

``profile_model`` loads a model as ``edgeaccel.load`` would, with the runtime's own profiler on, and returns a
``ModelProfile`` (schema ``edgeaccel.profile/1``, see schema.py). Each runtime's collector lives in a module of
its own here (onnxruntime.py, openvino.py, litert.py), listed in collect.py (a plug-in names its own).

``compare.compare_layers`` (with the ``taps_*`` modules): the error each layer of a quantized model adds,
against its float origin (``profile --compare``).
"""

from .profile import profile_model
from .schema import SCHEMA, ExecutorProfile, ModelProfile, OpProfile

__all__ = ["SCHEMA", "ExecutorProfile", "ModelProfile", "OpProfile", "profile_model"]
