"""The board: the device-tree model and compatible list (Arm boards), or DMI product names (x86, VMs).

The device-tree strings end in NUL and ``compatible`` holds several NUL-separated entries, most specific
first (Documentation/devicetree/usage-model.rst); /proc/device-tree links to
/sys/firmware/devicetree/base.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..devfs import Root, as_tree

DT_DIRS = ("/proc/device-tree", "/sys/firmware/devicetree/base")


@dataclass(frozen=True)
class Board:
    model: str | None
    vendor: str | None
    compatible: tuple[str, ...]
    family: str | None  # "jetson", "raspberry-pi", "coral-dev-board", "rockchip", "google-cloud", ...
    soc: str | None
    source: str | None
    reason: str | None = None

    def to_dict(self) -> dict:
        return {"model": self.model, "vendor": self.vendor, "compatible": list(self.compatible),
                "family": self.family, "soc": self.soc, "source": self.source, "reason": self.reason}


def parse_dt_string(text: str) -> str | None:
    value = text.split("\x00")[0].strip()
    return value if value.isprintable() and value else None


def parse_dt_string_list(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split("\x00") if s.strip() and s.strip().isprintable())


def classify(model: str | None, compatible: tuple[str, ...], vendor: str | None) -> tuple[str | None, str | None]:
    """(family, soc) from what the board calls itself."""
    text = " ".join(filter(None, (model, vendor, *compatible))).lower()
    soc = compatible[-1].split(",")[-1] if compatible else None
    if "jetson" in text or "nvidia,tegra" in text:
        return "jetson", soc
    if "raspberry pi" in text or "raspberrypi" in text or "brcm,bcm2712" in text:
        return "raspberry-pi", soc
    if "phanbell" in text:
        return "coral-dev-board", soc
    if "rockchip," in text:
        return "rockchip", next((c.split(",")[1] for c in compatible if c.startswith("rockchip,rk")), soc)
    if "google compute engine" in text:
        return "google-cloud", None
    return None, soc


def read_board(root: Root = Path("/"), cpuinfo_model: str | None = None) -> Board:
    tree = as_tree(root)
    reasons = []
    for base in DT_DIRS:
        model_read = tree.read(f"{base}/model")
        if model_read.text is None:
            reasons.append(f"{base}/model {model_read.reason}")
            continue
        model = parse_dt_string(model_read.text)
        compatible = parse_dt_string_list(tree.read(f"{base}/compatible").text or "")
        if model is None:
            reasons.append(f"{base}/model does not hold a printable name")
            continue
        family, soc = classify(model, compatible, None)
        return Board(model, None, compatible, family, soc, f"{base}/model")
    dmi = {key: tree.read(f"/sys/class/dmi/id/{key}").strip() for key in ("sys_vendor", "product_name", "board_name")}
    if dmi["product_name"] or dmi["board_name"]:
        model = dmi["product_name"] or dmi["board_name"]
        family, soc = classify(model, (), dmi["sys_vendor"])
        return Board(model, dmi["sys_vendor"], (), family, soc, "/sys/class/dmi/id/product_name")
    if cpuinfo_model:
        family, soc = classify(cpuinfo_model, (), None)
        return Board(cpuinfo_model, None, (), family, soc, "/proc/cpuinfo Model")
    reasons.append("/sys/class/dmi/id/product_name is missing")
    return Board(None, None, (), None, None, None, "no board name: " + "; ".join(reasons))
