"""How `explain` and `tune` list rejected candidates: one entry per cause, one fix line per cause.

Twelve executors turned down because their devices are absent share one fix ("`edgeaccel probe` shows what
was looked for"); printing it under each of them hid the rejections that differ. Rejections with the same fix
(and artifact) are one cause: their devices are listed together and the fix printed once. Rejections without a
fix are grouped, as before, where one reason covers several devices of a runtime.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Cause:
    artifact: str
    fix: str | None
    entries: list[tuple[str, str, str]] = field(default_factory=list)  # (runtime, device, reason)

    def who(self) -> str:
        """"onnxruntime:CUDA,NPU; openvino:GPU" (a failed artifact's "any" runtime: every executor)."""
        by_runtime: dict[str, list[str]] = {}
        for runtime, device, _ in self.entries:
            by_runtime.setdefault(runtime, []).append(device)
        return "; ".join("every executor" if runtime == "any" else f"{runtime}:{','.join(devices)}"
                         for runtime, devices in by_runtime.items())

    def reason(self) -> str | None:
        """The one reason of the whole cause, or None when its entries say different things. Reasons that
        differ only by the device they name ("no CUDA device found...", "no NPU device found...") are one."""
        reasons = {reason for _, _, reason in self.entries}
        if len(reasons) == 1:
            return reasons.pop()
        if not all(device and device in reason for _, device, reason in self.entries):
            return None
        templates = {reason.replace(device, "{}", 1) for _, device, reason in self.entries}
        if len(templates) != 1:
            return None
        devices = dict.fromkeys(device for _, device, _ in self.entries)
        return templates.pop().replace("{}", "/".join(devices), 1)


def group_rejections(rejected: list[dict]) -> list[Cause]:
    """``rejected`` entries (candidate "runtime:device", artifact, reason, fix) as causes, in first-seen order."""
    causes: dict[tuple, Cause] = {}
    for entry in rejected:
        runtime, _, device = entry["candidate"].partition(":")
        artifact = entry["artifact"].rsplit("/", 1)[-1]
        fix = entry.get("fix")
        key = (artifact, "fix", fix) if fix else (artifact, "reason", runtime, entry["reason"])
        causes.setdefault(key, Cause(artifact, fix)).entries.append((runtime, device, entry["reason"]))
    return list(causes.values())


def print_rejections(rejected: list[dict]) -> None:
    for cause in group_rejections(rejected):
        reason = cause.reason()
        if reason is not None:
            print(f"  - {cause.who()} [{cause.artifact}]: {reason}")
        else:
            print(f"  - {cause.who()} [{cause.artifact}]:")
            for runtime, device, why in cause.entries:
                print(f"      {runtime}:{device}: {why}")
        if cause.fix:  # on its own line: a reason and its fix on one line ran past a thousand characters
            print(f"      fix: {cause.fix}")
