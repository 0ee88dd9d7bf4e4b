"""Survey this device: CPU and its instruction-set features, memory, OS, board; accelerators with how they
were found and whether this user can use them now; runtimes and what each reaches; telemetry sources; and
every problem with its fix. --json writes the report in the documented schema (docs/probe.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HELP = "survey the hardware, runtimes and telemetry sources of this device"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="write the report as JSON (schema edgeaccel.probe/1)")
    p.add_argument("--root", default="/", metavar="PATH",
                   help="survey the device file system mounted at PATH instead of / (runtimes are then skipped)")
    p.add_argument("--no-runtimes", action="store_true", help="do not import the runtimes (faster)")
    p.add_argument("--ray", nargs="?", const="auto", metavar="ADDRESS",
                   help="survey every node of the running Ray cluster (at ADDRESS; default: this machine's or "
                        "$RAY_ADDRESS) into one table; never starts a cluster")
    p.add_argument("--ray-resources", action="store_true",
                   help="print the `ray start` arguments that declare this node's accelerators to Ray "
                        "(with --root: those of the device mounted there)")


def main(args: argparse.Namespace) -> int:
    from ..errors import InputError
    from .. import probe

    if args.ray or args.ray_resources:
        return _ray(args)
    root = Path(args.root)
    if not root.is_dir():
        raise InputError(f"--root {args.root} is not a directory", hint="give the directory a device's / is mounted at")
    report = probe(root, runtimes=False if args.no_runtimes else None).to_dict()
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        print(render(report))
    return 0


def _ray(args: argparse.Namespace) -> int:
    """--ray-resources: this node's `ray start` arguments; --ray: the cluster's table (edgeaccel/ray/cluster.py)."""
    if args.ray_resources:
        from .. import probe
        from ..ray.resources import node_resources, ray_start_args

        print(" ".join(ray_start_args(node_resources(probe(Path(args.root), runtimes=False, telemetry=False)))))
        return 0
    from ..ray.cluster import render, survey_cluster

    rows = survey_cluster(args.ray)
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        print()
    else:
        print(render(rows))
    return 0


def _join(*parts) -> str:
    return ", ".join(str(p) for p in parts if p not in (None, "", []))


def _machine(m: dict) -> list[str]:
    cpu, mem, os_, board = m["cpu"], m["memory"], m["os"], m["board"]
    lines = ["machine"]
    if cpu["reason"]:
        lines.append(f"  cpu       unknown: {cpu['reason']}")
    else:
        counts = _join(f"{cpu['logical_cpus']} logical CPUs",
                       cpu["physical_cores"] and f"{cpu['physical_cores']} cores",
                       cpu["usable_cpus"] and f"{cpu['usable_cpus']} usable by this process")
        lines.append(f"  cpu       {cpu['model'] or '?'} ({_join(cpu['arch'], cpu['vendor'])}); {counts}")
        have = [k for k, v in cpu["isa"].items() if v]
        lacks = [k for k, v in cpu["isa"].items() if not v]
        lines.append(f"  isa       {' '.join(have) or 'none of the tracked features'}"
                     + (f"  (not: {' '.join(lacks)})" if lacks else ""))
    if mem["reason"]:
        lines.append(f"  memory    unknown: {mem['reason']}")
    else:
        limit = f", cgroup limit {mem['cgroup_limit_mib']} MiB" if mem["cgroup_limit_mib"] else ""
        lines.append(f"  memory    {mem['total_mib']} MiB total, {mem['available_mib']} MiB available{limit}")
    kernel = os_["kernel"] and f"kernel {os_['kernel']}"
    lines.append(f"  os        {_join(os_['name'], kernel, os_['arch'], os_['python'])}")
    board_text = _join(board["model"], board["family"], board["soc"]) or f"not named ({board['reason']})"
    lines.append(f"  board     {board_text}")
    return lines


def _accelerators(report: dict) -> list[str]:
    lines = ["accelerators"]
    if not report["accelerators"]:
        looked = ", ".join(f["name"] for f in report["families"] if f["id"] != "plugins")
        lines.append(f"  none found; looked for: {looked} (what and where: see 'looked for' below)")
    for acc in report["accelerators"]:
        mark = "ok" if acc["usable"] else ("--" if not acc["present"] else "!!")
        lines.append(f"  [{mark}] {acc['name']}  -> {', '.join(acc['devices'])}")
        lines.append(f"       found by {acc['found_by']}")
        lines.append(f"       {acc['reason']}")
        if acc["fix"]:
            lines.append(f"       fix: {acc['fix']}")
        interesting = {k: v for k, v in acc["details"].items() if v not in (None, [], {}, "")}
        if interesting:
            lines.append("       " + ", ".join(f"{k}={v}" for k, v in interesting.items()))
    lines.append(f"  devices for executors: {', '.join(report['present_devices'])}"
                 f" (usable now: {', '.join(report['usable_devices'])})")
    return lines


_FAMILY_MARKS = {"usable": "ok", "present": "!!", "no-driver": "!!", "absent": "--", "not-checked": "??"}


def _families(families: list[dict]) -> list[str]:
    """Every family looked for, found or not: its status and why, then what was looked at."""
    lines = ["looked for"]
    for f in families:
        lines.append(f"  [{_FAMILY_MARKS[f['status']]}] {f['name']:<29} {f['status']}: {f['reason']}")
        if f["looked_for"]:
            lines.append(f"       looked at: {'; '.join(f['looked_for'])}")
        if f["fix"]:
            lines.append(f"       fix: {f['fix']}")
    return lines


def _runtimes(section: dict) -> list[str]:
    lines = ["runtimes"]
    if not section["surveyed"]:
        lines.append(f"  {section['reason']}")
    for r in section["items"]:
        took = f"{r['import_ms']:.0f} ms" if r["import_ms"] is not None else ""
        if r["installed"]:
            reaches = ", ".join(r["reaches"]) or "nothing"
            lines.append(f"  {r['name']:<12} {r['version'] or '?':<10} {r['package'] or '':<16} "
                         f"reaches {reaches:<16} {took}")
            lines.append(f"  {'':<12} {r['reason']}")
        else:
            lines.append(f"  {r['name']:<12} not installed{'; fix: ' + r['fix'] if r['fix'] else ''}")
    for lib in section["libraries"]:
        where = lib["path"] if lib["found"] else f"not found ({len(lib['searched'])} places searched)"
        lines.append(f"  {lib['filename']:<16} {where}  [{lib['purpose']}]")
    extras = [f"{k} {v}" for k, v in section["packages"].items() if v]
    if extras:
        lines.append(f"  also installed: {', '.join(extras)}")
    return lines


def _row(name: str, what: str | None, state: str, trips: list[dict] = ()) -> str:
    text = ", ".join(f"{p['type']} {p['temp_c']:g} C" for p in trips if p["temp_c"] is not None)
    return f"  {name:<20} {what or '?':<22} {state}" + (f"  trips: {text}" if text else "")


def _readable(ok: bool) -> str:
    return "readable" if ok else "NOT readable"


def _telemetry(t: dict) -> list[str]:
    """Thermal zones, hwmon chips and RAPL domains one line each, then the other sources (Coral apex, Jetson
    rails, Pi throttling, NVML) from the full list; cooling devices, one per CPU on many x86 boxes, counted."""
    lines = ["telemetry"]
    lines += [_row(z["name"], z["type"], _readable(z["readable"]), z["trip_points"]) for z in t["thermal_zones"]]
    for h in t["hwmon"]:
        sensors = ", ".join(f"{len(v)} {k}" for k, v in h["sensors"].items())
        lines.append(_row(h["name"], h["chip"], f"{_readable(h['readable'])}  {sensors}" if sensors
                          else "no sensor inputs"))
    lines += [_row(r["name"], r["label"], _readable(r["readable"])) for r in t["rapl"]]
    listed = ("thermal_zone", "hwmon", "rapl", "cooling_device")
    lines += [_row(s["name"], s["detail"], _readable(s["readable"]), s["trips"])
              for s in t["sources"] if s["kind"] not in listed]
    cooling = [s for s in t["sources"] if s["kind"] == "cooling_device"]
    if cooling:
        lines.append(f"  {len(cooling)} cooling devices, {sum(s['readable'] for s in cooling)} readable")
    lines += [f"  {kind}: {why}" for kind, why in t["reasons"].items()]
    return lines


def _problems(problems: list[dict]) -> list[str]:
    lines = ["problems"]
    if not problems:
        lines.append("  none")
    for p in problems:
        lines.append(f"  - {p['subject']}: {p['reason']}")
        if p["fix"]:
            lines.append(f"    fix: {p['fix']}")
    return lines


def render(report: dict) -> str:
    """The report as the readable text `edgeaccel probe` prints."""
    sections = [_machine(report["machine"]), _accelerators(report), _families(report["families"]),
                _runtimes(report["runtimes"]),
                _telemetry(report["telemetry"]), _problems(report["problems"])]
    footer = f"surveyed root {report['root']} in {report['timings_ms'].get('total', 0):.0f} ms ({report['schema']})"
    return "\n\n".join("\n".join(s) for s in sections) + "\n\n" + footer
