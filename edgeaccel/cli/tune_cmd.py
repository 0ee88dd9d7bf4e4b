"""Calibrate a model here: run every feasible executor briefly, check its answers against the CPU
reference, time it, and keep the results so that later loads choose from measurements."""

from __future__ import annotations

import argparse

from . import explain_cmd

HELP = "measure every feasible executor for a model (accuracy and latency) and cache the results"


def add_arguments(p: argparse.ArgumentParser) -> None:
    explain_cmd.add_arguments(p, calibrate_flag=False)


def main(args: argparse.Namespace) -> int:
    return explain_cmd.main(args, calibrate=True)
