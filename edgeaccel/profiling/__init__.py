"""Profiling a model: where the time, the memory and the accuracy go, per operator, on every runtime.

``compare.compare_layers`` (with ``taps``): per-layer error of a quantized model against its float origin.
"""
