"""discover(root), sensor specs and the bounded-rate sampler on fake trees; and on this machine's real /."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgeaccel.sim.fakesys import FakeSysfs
from edgeaccel.telemetry import DeviceLimits, SensorSpec, TelemetrySampler, auto_spec, discover
from edgeaccel.telemetry.sensors import read_temperature


@pytest.fixture
def jetson_like(tmp_path) -> FakeSysfs:
    """A tree with one of every source kind."""
    fs = FakeSysfs(tmp_path)
    fs.cooling_device(0, "thermal-cpufreq-0", 0, 4)
    fs.thermal_zone(0, "CPU-therm", 55.0, trips=(("passive", 97.0), ("critical", 103.0)), cooling=(0,))
    fs.thermal_zone(1, "GPU-therm", 52.0, trips=(("passive", 97.0), ("critical", 103.0)))
    fs.hwmon(0, "nvme", {"temp1_input": 44_850, "temp1_label": "Composite"})
    fs.rapl_zone("intel-rapl:0", "package-0", 10_000_000)
    fs.apex(0, 60.0)
    fs.ina3221_hwmon([("VDD_IN", 5000, 1000), ("VDD_CPU_GPU_CV", 5000, 300), ("VDD_SOC", 5000, 250)])
    fs.rpi_throttled(0)
    return fs


def test_discover_lists_every_source_with_readability(jetson_like):
    sources = discover(jetson_like.root)
    names = {s.name for s in sources}
    assert {"thermal:thermal_zone0", "thermal:thermal_zone1", "cooling:cooling_device0", "hwmon:nvme/Composite",
            "rapl:package-0", "apex:apex_0", "ina3221:VDD_IN", "rpi:get_throttled"} <= names
    assert all(s.readable for s in sources), [str(s) for s in sources if not s.readable]
    zone = next(s for s in sources if s.name == "thermal:thermal_zone0")
    assert zone.detail == "CPU-therm" and "trips" in zone.quantities
    assert [(t.type, t.temp_c) for t in zone.trips] == [("passive", 97.0), ("critical", 103.0)]
    apex = next(s for s in sources if s.name == "apex:apex_0")  # the driver's trips in the zones' terms
    assert [t.type for t in apex.trips] == ["passive", "passive", "passive", "hot", "critical"]
    assert [t.temp_c for t in apex.trips] == pytest.approx([85.0, 90.0, 95.0, 100.0, 110.0], abs=0.25)
    assert not any(s.kind == "nvml" for s in sources)  # a fake root has no NVML


def test_discover_reports_a_garbage_source_as_not_readable(jetson_like):
    jetson_like.write("sys/class/thermal/thermal_zone1/temp", b"")
    zone = next(s for s in discover(jetson_like.root) if s.name == "thermal:thermal_zone1")
    assert not zone.readable and "empty" in zone.reason


def test_discover_on_an_empty_root(tmp_path):
    assert discover(tmp_path) == []


def test_auto_spec_picks_sources_by_device_kind(jetson_like):
    cpu = auto_spec("cpu", jetson_like.root)
    assert cpu.temperature == "thermal:CPU-therm" and cpu.energy == "rapl:package-0"
    assert cpu.throttle == "rpi:get_throttled"  # the firmware flag outranks the zone where a Pi has one
    gpu = auto_spec("gpu", jetson_like.root)
    assert gpu.temperature == "thermal:GPU-therm" and gpu.power == "ina3221:VDD_CPU_GPU_CV"
    tpu = auto_spec("edgetpu", jetson_like.root)
    assert tpu.temperature == "apex:apex_0" and tpu.energy is None
    assert any("no power or energy sensor" in n for n in tpu.notes)


def test_auto_spec_on_an_empty_root_says_why(tmp_path):
    spec = auto_spec("cpu", tmp_path)
    assert spec.temperature is None and spec.energy is None
    assert any("no CPU temperature" in n for n in spec.notes) and any("RAPL" in n for n in spec.notes)


def test_hwmon_temperature_by_label_with_limits(tmp_path):
    fs = FakeSysfs(tmp_path)
    fs.hwmon(3, "coretemp", {"temp1_input": 66_000, "temp1_label": "Package id 0", "temp1_max": 84_000,
                             "temp1_crit": 100_000})
    sample = read_temperature("hwmon:coretemp/Package id 0", tmp_path)
    assert (sample.reading.value, sample.passive_c, sample.critical_c) == (66.0, 84.0, 100.0)
    assert "no hwmon chip" in read_temperature("hwmon:k10temp/Tctl", tmp_path).reading.reason
    with pytest.raises(ValueError, match="KIND:NAME"):
        read_temperature("thermal", tmp_path)


class Clock:
    def __init__(self):
        self.t = 0.0


def test_sampler_bounded_rate_energy_power_and_status(tmp_path):
    fs = FakeSysfs(tmp_path)
    fs.cooling_device(0, "Processor", 0, 3)
    fs.thermal_zone(0, "x86_pkg_temp", 60.0, trips=(("passive", 85.0), ("critical", 100.0)), cooling=(0,))
    fs.rapl_zone("intel-rapl:0", "package-0", 0, max_range_uj=50_000_000)  # wraps every 50 J
    spec = SensorSpec(temperature="thermal:x86_pkg_temp", energy="rapl:package-0", throttle="thermal:x86_pkg_temp")
    sampler = TelemetrySampler({"cpu": spec}, tmp_path, min_interval_s=0.5)
    truth_j, temp = 0.0, 60.0
    for step in range(40):  # 20 s at 12 W, rising 0.5 C/s; the counter wraps 4 times
        now = step * 0.5
        fs.zone_temp(0, temp)
        fs.rapl_energy("intel-rapl:0", int(truth_j * 1e6) % 50_000_000)
        sample = sampler.sample(now)["cpu"]
        assert sampler.sample(now + 0.1)["cpu"] is sample  # within the interval: the same sample, no reads
        truth_j += 12.0 * 0.5
        temp += 0.25
    assert sampler.samples == 40
    assert sample.energy_j == pytest.approx(truth_j - 6.0, rel=1e-6)
    assert sample.power_w == pytest.approx(12.0)
    assert sample.passive_c == 85.0 and sample.critical_c == 100.0 and sample.limits_from == "sensor"
    assert sample.slope_c_per_s == pytest.approx(0.5)
    assert sample.seconds_to_passive == pytest.approx((85.0 - sample.temp_c) / 0.5)
    assert str(sample.status) == "none" and 0 < sample.headroom < 1
    assert sample.throttled is False


def test_sampler_without_sensors_keeps_going_with_reasons(tmp_path):
    spec = auto_spec("cpu", tmp_path)
    sampler = TelemetrySampler({"cpu": spec}, tmp_path, limits={"cpu": DeviceLimits(85.0, 100.0)})
    sample = sampler.sample(0.0)["cpu"]
    assert sample.temp_c is None and "no CPU temperature" in sample.temp_reason
    assert sample.energy_j is None and "RAPL" in sample.energy_reason
    assert sample.power_w is None and sample.power_reason
    assert sample.status is None and sample.headroom is None


def test_sampler_takes_profile_limits_when_the_sensor_has_no_trips(tmp_path):
    fs = FakeSysfs(tmp_path)
    fs.hwmon(0, "k10temp", {"temp1_input": 70_000, "temp1_label": "Tctl"})
    sampler = TelemetrySampler({"cpu": SensorSpec(temperature="hwmon:k10temp/Tctl")}, tmp_path,
                               limits={"cpu": DeviceLimits(passive_c=90.0, critical_c=105.0)})
    sample = sampler.sample(0.0)["cpu"]
    assert (sample.temp_c, sample.passive_c, sample.critical_c, sample.limits_from) == (70.0, 90.0, 105.0, "profile")


def test_sampler_refuses_an_unbounded_rate(tmp_path):
    with pytest.raises(ValueError, match="bounded rate"):
        TelemetrySampler({}, tmp_path, min_interval_s=0)


def test_this_machines_real_sensors_never_raise():
    """Whatever / holds here (in CI: nothing), discovery and sampling answer with values or reasons."""
    sources = discover(Path("/"))
    for source in sources:
        assert source.readable or source.reason
    spec = auto_spec("cpu")
    sample = TelemetrySampler({"cpu": spec}).sample(0.0)["cpu"]
    assert sample.temp_c is not None or sample.temp_reason
