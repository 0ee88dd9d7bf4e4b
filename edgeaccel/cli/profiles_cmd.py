"""List, show and validate device profiles (profiles/*.yaml).

  edgeaccel profiles list            the shipped profiles; * marks the one matching this machine
  edgeaccel profiles show NAME       one profile, readable or --json
  edgeaccel profiles validate FILE   check profile files: "ok", or one error line per file (exit 7)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

HELP = "list, show and validate device profiles"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="profiles_command", metavar="ACTION")
    ls = sub.add_parser("list", help="the shipped profiles, and which one matches this machine")
    ls.add_argument("--json", action="store_true", help="print one JSON document")
    show = sub.add_parser("show", help="one profile: figures, sources, preferences, limits")
    show.add_argument("name", help="a profile name (see `edgeaccel profiles list`) or a profile .yaml file")
    show.add_argument("--json", action="store_true", help="print the profile as JSON")
    check = sub.add_parser("validate", help="check profile files against the schema")
    check.add_argument("files", nargs="+", metavar="FILE", help="profile .yaml files")


def main(args: argparse.Namespace) -> int:
    command = getattr(args, "profiles_command", None) or "list"
    if command == "show":
        return _show(args)
    if command == "validate":
        return _validate(args.files)
    return _list(getattr(args, "json", False))


def _list(as_json: bool) -> int:
    from ..loader import machine_facts
    from ..profiles import load_profiles, match_profile

    profiles = load_profiles()
    here, reason = match_profile(machine_facts()[1], profiles)
    rows = [{"name": p.name, "title": p.title, "accelerators": [a.device for a in p.accelerators],
             "matches_this_machine": here is not None and p.name == here.name} for p in profiles.values()]
    if as_json:
        json.dump({"schema": "edgeaccel.profiles/1", "profiles": rows,
                   "this_machine": {"profile": here.name if here else None, "reason": reason,
                                    "accelerators_probed": False}}, sys.stdout, indent=2)
        print()
        return 0
    width = max(len(r["name"]) for r in rows) + 2
    title_width = max(len(r["title"]) for r in rows) + 2
    print(f"  {'NAME':<{width}}{'TITLE':<{title_width}}ACCELERATORS")
    for r in rows:
        mark = "*" if r["matches_this_machine"] else " "
        print(f"{mark} {r['name']:<{width}}{r['title']:<{title_width}}{', '.join(r['accelerators'])}")
    if here is not None:
        print(f"\n* this machine: {here.name}, by {reason}")
    else:
        print(f"\n{reason}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from ..profiles import get_profile

    profile = get_profile(args.name)
    if args.json:
        json.dump({"schema": "edgeaccel.profile/1", **dataclasses.asdict(profile)}, sys.stdout, indent=2)
        print()
        return 0
    p = profile
    print(f"{p.name}: {p.title}")
    _line("file", p.source_file)
    _line("matches", _rule(p.match))
    for a in p.accelerators:
        alias = f" (also {', '.join(a.aliases)})" if a.aliases else ""
        _line("device", f"{a.device}{alias}: {a.name}")
        figures = [("INT8 TOPS", a.tops_int8), ("F16 TFLOPS", a.tflops_f16), ("BF16 TFLOPS", a.tflops_bf16),
                   ("memory MB", a.memory_mb), ("typical W", a.typical_power_w)]
        given = [f"{label} {_figure(value)}" for label, value in figures if value is not None]
        _line("", f"runs {', '.join(a.precisions) or '-'}; {'; '.join(given) if given else 'no figure cited'}")
        if a.source:
            _line("", f"source: {a.source}")
    for goal, order in p.preference.items():
        _line(goal, " > ".join(order))
    for device, order in p.runtimes.items():
        _line("runtimes", f"{device}: {' > '.join(order)}")
        if device in p.runtime_notes:
            _line("", f"why: {p.runtime_notes[device]}")
    _line("power", f"budget {_figure(p.power_budget_w, 'W')}, idle {_figure(p.idle_power_w, 'W')}")
    if p.power_source:
        _line("", f"source: {p.power_source}")
    _line("thermal", f"passive {_figure(p.thermal.passive_c, '°C')}, critical {_figure(p.thermal.critical_c, '°C')}")
    if p.thermal.source:
        _line("", f"source: {p.thermal.source}")
    if p.notes:
        _line("notes", p.notes)
    return 0


def _line(label: str, text: str) -> None:
    print(f"{label:<11}{text}")


def _validate(files: list[str]) -> int:
    from ..errors import ConfigError
    from ..profiles import load_profile

    failed = 0
    for path in files:
        try:
            profile = load_profile(path)
        except ConfigError as exc:  # one line per file, naming file and key; the next file is still checked
            failed += 1
            print(f"error: {exc.message}", file=sys.stderr)
            continue
        print(f"{path}: ok ({profile.name})")
    if failed:
        from . import EXIT_CONFIG

        return EXIT_CONFIG
    return 0


def _rule(rule) -> str:
    parts = []
    for label, values in (("arch", rule.arch), ("board", rule.board), ("compatible", rule.compatible),
                          ("CPU", rule.cpu_model), ("CPU flags", rule.cpu_flags), ("devices", rule.devices)):
        if values:  # any one of the substrings will do; every flag and device is needed
            joiner = " + " if label in ("CPU flags", "devices") else " | "
            parts.append(f"{label} {joiner.join(values)}")
    return f"{'; '.join(parts)} (priority {rule.priority})"


def _figure(value, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value} {unit}".strip()
