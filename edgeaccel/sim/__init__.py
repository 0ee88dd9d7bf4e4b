"""Simulation for testing and for trying policies: an RC heat model per device that heats with the work it is
given, cools toward ambient and slows itself above its passive trip as a kernel would; it writes the very
sysfs files the telemetry readers read, under a simulated clock. Every figure it produces is simulated and
labelled so.
"""
