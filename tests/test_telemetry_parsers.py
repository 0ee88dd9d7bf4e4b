"""Pure parsers and calculations: tegrastats lines from several JetPack releases, NVML through a fake module,
thermal status and headroom."""

from __future__ import annotations

import pytest

from edgeaccel.telemetry import nvml
from edgeaccel.telemetry.status import (ThermalStatus, TrendForecaster, normalized_headroom, thresholds_from_trips)
from edgeaccel.telemetry.tegrastats import parse_tegrastats

# Sample lines in the formats NVIDIA documents and users post, one per release family.
JP3_TX2 = ("RAM 1523/7846MB (lfb 1217x4MB) SWAP 0/3923MB (cached 0MB) CPU [9%@1734,off,off,5%@1733,2%@1733,"
           "4%@1734] EMC_FREQ 3%@1600 GR3D_FREQ 0%@1300 APE 150 MTS fg 0% bg 0% BCPU@36.5C MCPU@36.5C GPU@35C "
           "PLL@36.5C Tboard@31C Tdiode@34.25C PMIC@100C thermal@35.6C VDD_IN 3219/3219 VDD_CPU 306/306 "
           "VDD_GPU 153/153 VDD_SOC 459/459 VDD_WIFI 0/0 VDD_DDR 306/306")
JP4_NANO = ("RAM 1903/3956MB (lfb 76x4MB) SWAP 0/1978MB (cached 0MB) CPU [4%@102,2%@102,0%@102,0%@102] "
            "EMC_FREQ 0% GR3D_FREQ 0% PLL@28.5C CPU@31C PMIC@100C GPU@30C AO@36.5C thermal@30.5C "
            "POM_5V_IN 2165/2165 POM_5V_GPU 0/0 POM_5V_CPU 449/449")
JP5_ORIN = ("06-30-2023 10:15:01 RAM 2448/30536MB (lfb 6566x4MB) SWAP 0/15268MB (cached 0MB) "
            "CPU [0%@729,0%@729,0%@729,0%@729,off,off,off,off] EMC_FREQ 0%@2133 GR3D_FREQ 0%@[305,305] "
            "VIC_FREQ 729 APE 174 CV0@-256C CPU@47.593C SOC2@44.25C SOC0@45.375C CV1@-256C GPU@-256C tj@47.593C "
            "SOC1@43.156C CV2@-256C VDD_GPU_SOC 2375mW/2375mW VDD_CPU_CV 396mW/396mW VIN_SYS_5V0 2825mW/2825mW")
JP6_ORIN_NANO = ("08-23-2024 13:57:46 RAM 3595/7607MB (lfb 1x1MB) SWAP 11/3804MB (cached 0MB) "
                 "CPU [1%@729,off,3%@729,4%@729,5%@729,6%@729] EMC_FREQ 2%@2133 GR3D_FREQ 7%@[306] "
                 "NVDEC off NVJPG off VIC off OFA off APE 200 cpu@51C soc2@50.562C soc0@51.031C gpu@50.5C tj@51C "
                 "soc1@50C VDD_IN 5832mW/5852mW VDD_CPU_GPU_CV 1307mW/1327mW VDD_SOC 1468mW/1468mW")


def test_tegrastats_jetpack3_rails_without_units():
    stats = parse_tegrastats(JP3_TX2)
    assert stats.timestamp is None
    assert stats.rails_w["VDD_IN"] == pytest.approx(3.219) and stats.rails_avg_w["VDD_GPU"] == pytest.approx(0.153)
    assert stats.temperatures_c["Tdiode"] == 34.25 and stats.temperatures_c["BCPU"] == 36.5
    assert stats.ram_used_mb == 1523 and stats.cpu_load_pct[:3] == (9, None, None)
    assert "RAM" not in stats.rails_w and "SWAP" not in stats.rails_w and "APE" not in stats.rails_w


def test_tegrastats_jetpack4_nano():
    stats = parse_tegrastats(JP4_NANO)
    assert stats.rails_w == {"POM_5V_IN": 2.165, "POM_5V_GPU": 0.0, "POM_5V_CPU": 0.449}
    assert stats.temperatures_c["GPU"] == 30.0 and stats.gpu_load_pct == 0


def test_tegrastats_jetpack5_orin_offline_sensors_and_timestamp():
    stats = parse_tegrastats(JP5_ORIN)
    assert stats.timestamp == "06-30-2023 10:15:01"
    assert set(stats.offline_sensors) == {"CV0", "CV1", "GPU", "CV2"}
    assert "GPU" not in stats.temperatures_c and stats.temperatures_c["tj"] == 47.593
    assert stats.rails_w["VIN_SYS_5V0"] == pytest.approx(2.825)
    assert "VIC_FREQ" not in stats.rails_w


def test_tegrastats_jetpack6_lowercase_temperatures():
    stats = parse_tegrastats(JP6_ORIN_NANO)
    assert stats.temperatures_c["soc2"] == 50.562 and stats.temperatures_c["gpu"] == 50.5
    assert stats.rails_w["VDD_IN"] == pytest.approx(5.832) and stats.rails_avg_w["VDD_IN"] == pytest.approx(5.852)
    assert stats.gpu_load_pct == 7 and stats.ram_total_mb == 7607


def test_tegrastats_garbage_line():
    stats = parse_tegrastats("tegrastats: command not found")
    assert stats.rails_w == {} and stats.temperatures_c == {} and stats.ram_used_mb is None


# -- NVML through a fake module with the pynvml call names ------------------------------------------------------
class FakeNVMLError(Exception):
    pass


class FakeNvml:
    def __init__(self, energy_supported=True, events=0x20 | 0x1):
        self.energy_supported = energy_supported
        self.events = events

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, i):
        return f"handle{i}"

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA Jetson-like"

    def nvmlDeviceGetTemperature(self, h, sensor):
        assert sensor == nvml.TEMPERATURE_GPU
        return 71

    def nvmlDeviceGetPowerUsage(self, h):
        return 45_250  # mW

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        if not self.energy_supported:
            raise FakeNVMLError("Not Supported")
        return 1_234_567  # mJ

    def nvmlDeviceGetTemperatureThreshold(self, h, which):
        return {nvml.THRESHOLD_SLOWDOWN: 87, nvml.THRESHOLD_SHUTDOWN: 92}[which]

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):  # the pre-R535 name
        return self.events


def test_nvml_values_in_si_units_and_throttle_bits():
    gpus, reason = nvml.read_gpus(FakeNvml())
    assert reason is None
    gpu = gpus[0]
    assert gpu.name == "NVIDIA Jetson-like"
    assert gpu.temperature.value == 71.0 and gpu.power.value == pytest.approx(45.25)
    assert gpu.energy.value == pytest.approx(1234.567) and gpu.energy.unit == "J"
    assert gpu.slowdown_c == 87.0 and gpu.shutdown_c == 92.0
    assert gpu.throttled is True and "software thermal slowdown" in gpu.clock_event_names


def test_nvml_unsupported_call_is_a_reason():
    gpu = nvml.read_gpus(FakeNvml(energy_supported=False, events=0x1))[0][0]
    assert gpu.energy.value is None and "Not Supported" in gpu.energy.reason
    assert gpu.throttled is False  # idle is not throttling


def test_nvml_missing_module_is_a_reason():
    module, reason = nvml.load_nvml()
    assert (module is None) == (reason is not None)


# -- status and headroom ------------------------------------------------------------------------------------------
def test_android_levels_on_trip_points():
    t = thresholds_from_trips(85.0, 105.0)
    assert (t.light, t.moderate, t.severe, t.critical, t.emergency, t.shutdown) == (75, 80, 85, 95, 103, 105)
    assert t.status(40.0) is ThermalStatus.NONE
    assert t.status(77.0) is ThermalStatus.LIGHT
    assert t.status(85.0) is ThermalStatus.SEVERE
    assert t.status(104.0) is ThermalStatus.EMERGENCY
    assert t.status(105.0) is ThermalStatus.SHUTDOWN
    assert t.status(None) is None
    assert thresholds_from_trips(85.0, 105.0, hot_c=90.0).critical == 90.0
    with pytest.raises(ValueError, match="must be above the passive"):
        thresholds_from_trips(90.0, 80.0)


def test_headroom_is_androids_normalisation():
    assert normalized_headroom(85.0, 85.0) == 1.0
    assert normalized_headroom(55.0, 85.0) == 0.0
    assert normalized_headroom(70.0, 85.0) == pytest.approx(0.5)
    assert normalized_headroom(20.0, 85.0) == 0.0
    assert normalized_headroom(91.0, 85.0) == pytest.approx(1.2)


def test_trend_forecast_and_time_to_trip():
    trend = TrendForecaster(size=30)
    trend.add(0.0, 60.0)
    trend.add(1.0, 60.5)
    assert trend.slope() is None  # Android needs three samples
    trend.add(2.0, 61.0)
    trend.add(2.0, 99.0)  # the same instant twice (a cached snapshot) is ignored
    assert trend.slope() == pytest.approx(0.5)
    assert trend.forecast(10.0) == pytest.approx(66.0)
    assert trend.seconds_until(85.0) == pytest.approx(48.0)
    assert trend.seconds_until(50.0) == 0.0
    cooling = TrendForecaster()
    for t, y in ((0, 70), (1, 69), (2, 68)):
        cooling.add(t, y)
    assert cooling.seconds_until(85.0) is None


def test_a_gpu_sampled_through_nvml(tmp_path):
    from edgeaccel.telemetry import SensorSpec, TelemetrySampler, auto_spec, discover

    fake = FakeNvml()
    (source,) = discover(tmp_path, nvml=fake)
    assert source.name == "nvml:0"
    assert [(t.type, t.temp_c) for t in source.trips] == [("passive", 87.0), ("critical", 92.0)]
    spec = auto_spec("gpu", tmp_path, nvml=fake)
    assert spec == SensorSpec("nvml:0", "nvml:0", "nvml:0", "nvml:0")
    sampler = TelemetrySampler({"gpu": spec}, tmp_path, nvml=fake)
    first = sampler.sample(0.0)["gpu"]
    assert (first.temp_c, first.passive_c, first.critical_c, first.power_w) == (71.0, 87.0, 92.0, 45.25)
    assert first.throttled is True and first.limits_from == "sensor"
    fake.nvmlDeviceGetTotalEnergyConsumption = lambda h: 1_234_567 + 45_250  # 45.25 J one second later
    assert sampler.sample(1.0)["gpu"].energy_j == pytest.approx(45.25)
