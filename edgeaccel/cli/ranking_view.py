"""How `explain` and `tune` show a selection: ranked candidates with reasons and measurements, then every
rejection, one entry and one fix line per cause (``rejections``)."""

from __future__ import annotations

from .rejections import print_rejections


def selection_dict(sel) -> dict:
    ranking = sel.ranking
    return {
        "schema": "edgeaccel.explain/1",
        "artifacts": [{"path": str(a.path), "format": a.format.value, "digest": a.digest} for a in sel.artifacts.artifacts],
        "invalid_artifacts": [{"path": str(p), "error": e.message} for p, e in sel.artifacts.invalid],
        "profile": ranking.profile,
        "profile_reason": sel.profile_reason,
        "goal": ranking.goal,
        "measurements": "measured now" if sel.measured_now else ("from cache" if sel.measurements else "none"),
        "cache_file": str(sel.cache_file) if sel.cache_file else None,
        "ranked": [{"rank": i + 1, "candidate": c.name, "artifact": str(c.artifact.path), "reason": c.reason,
                    "measurement": _measurement(sel.measurements.get(c.key))}
                   for i, c in enumerate(ranking.candidates)],
        "rejected": [{"candidate": r.name, "artifact": str(r.artifact.path), "reason": r.reason, "fix": r.fix,
                      "measurement": _measurement(sel.measurements.get(f"{r.artifact.digest[:16]}/{r.name}"))}
                     for r in ranking.rejected],
    }


def _measurement(m) -> dict | None:
    if m is None:
        return None
    return {"p50_ms": m.p50_ms, "p90_ms": m.p90_ms, "runs": m.runs, "eligible": m.eligible, "reason": m.reason,
            "accuracy": m.accuracy}


def print_selection(report: dict) -> None:
    names = ", ".join(f"{a['path']} ({a['format']})" for a in report["artifacts"])
    print(f"model       {names}")
    for bad in report["invalid_artifacts"]:
        print(f"unusable    {bad['path']}: {bad['error']}")
    print(f"profile     {report['profile'] or 'none'} ({report['profile_reason']})")
    print(f"goal        {report['goal']}; measurements: {report['measurements']}")
    print("ranked")
    if not report["ranked"]:
        print("  (nothing can run this model here)")
    for entry in report["ranked"]:
        print(f"  {entry['rank']}. {entry['candidate']} [{_short(entry['artifact'])}]")
        print(f"       {entry['reason']}")
        available = entry.get("availability")
        if available:
            print(f"       {'usable' if available['ok'] else 'NOT usable'}: {available['reason']}")
            if available["fix"]:
                print(f"       fix: {available['fix']}")
    print("rejected")
    print_rejections(report["rejected"])


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1]
