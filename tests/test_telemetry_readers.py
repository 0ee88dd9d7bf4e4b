"""The telemetry readers on fake sysfs trees written with edgeaccel.sim.fakesys: real readers, fake trees."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

import pytest

from edgeaccel.devfs import files as devfs_files
from edgeaccel.sim.fakesys import FakeSysfs, apex_millis
from edgeaccel.telemetry import coral, hwmon, jetson, rapl, rpi, thermal
from edgeaccel.telemetry.counter import EnergyAccumulator, max_safe_interval_s
from edgeaccel.telemetry.units import to_si

from unprivileged import call_unprivileged, world_traversable


@pytest.fixture
def fs(tmp_path) -> FakeSysfs:
    return FakeSysfs(tmp_path)


# -- units ----------------------------------------------------------------------------------------------------
def test_units_are_converted_in_one_table():
    assert to_si(45500, "millidegree_celsius") == (45.5, "C")
    assert to_si(43050, "millidegree_celsius") == (43.05, "C")  # 43050 * 1e-3 would be 43.050000000000004
    assert to_si(2_500_000, "microwatt") == (2.5, "W")
    assert to_si(1500, "milliwatt") == (1.5, "W")
    assert to_si(3_000_000, "microjoule") == (3.0, "J")
    assert to_si(2000, "millijoule") == (2.0, "J")
    assert to_si(1800, "megahertz") == (1.8e9, "Hz")
    with pytest.raises(ValueError, match="unknown telemetry unit"):
        to_si(1, "furlong")


# -- thermal zones ----------------------------------------------------------------------------------------------
def test_thermal_zone_with_trips_and_bound_cooling_device(fs):
    fs.cooling_device(0, "Processor", 2, 10)
    fs.thermal_zone(0, "x86_pkg_temp", 71.0, trips=(("passive", 85.0, 2.0), ("critical", 105.0)), cooling=(0,))
    fs.thermal_zone(1, "acpitz", 40.0, trips=(("critical", 98.0),))
    zones = thermal.read_thermal_zones(fs.root)
    assert [z.name for z in zones] == ["thermal_zone0", "thermal_zone1"]
    pkg = zones[0]
    assert pkg.type == "x86_pkg_temp" and pkg.temperature.value == 71.0 and pkg.temperature.unit == "C"
    assert pkg.passive_c == 85.0 and pkg.critical_c == 105.0
    assert pkg.trips[0].hyst_c == 2.0
    assert pkg.cooling[0].type == "Processor" and pkg.cooling[0].fraction == 0.2
    assert pkg.throttled is True
    assert zones[1].passive_c is None and zones[1].throttled is None


def test_zones_sort_naturally(fs):
    for i in (10, 2, 1):
        fs.thermal_zone(i, f"zone{i}", 30.0 + i)
    assert [z.name for z in thermal.read_thermal_zones(fs.root)] == ["thermal_zone1", "thermal_zone2", "thermal_zone10"]


@pytest.mark.parametrize("content, expect", [
    (b"abc\n", "not an integer"),
    (b"\n", "is empty"),
    (b"-274000\n", "outside any real sensor's range"),
    (b"2147483647\n", "outside any real sensor's range"),
    (b"\xff\xfe\x00\x01", "non-text bytes"),
    (b"9" * 5000, "more than 4096 bytes"),
])
def test_garbage_temperature_is_a_reading_with_a_reason(fs, content, expect):
    fs.thermal_zone(0, "cpu-thermal", 50.0)
    fs.write("sys/class/thermal/thermal_zone0/temp", content)
    zone = thermal.read_thermal_zones(fs.root)[0]
    assert zone.temperature.value is None
    assert expect in zone.temperature.reason


def test_missing_temp_file_and_directory_in_its_place(fs):
    fs.thermal_zone(0, "cpu-thermal", 50.0)
    fs.thermal_zone(1, "gpu-thermal", 50.0)
    fs.path("sys/class/thermal/thermal_zone0/temp").unlink()
    temp1 = fs.path("sys/class/thermal/thermal_zone1/temp")
    temp1.unlink()
    temp1.mkdir()
    zones = thermal.read_thermal_zones(fs.root)
    assert "is missing" in zones[0].temperature.reason
    assert "is a directory" in zones[1].temperature.reason


def test_no_thermal_class_at_all_is_an_empty_list(tmp_path):
    assert thermal.read_thermal_zones(tmp_path) == []


def test_io_error_from_a_sensor_is_a_reason(fs, monkeypatch):
    """An I2C sensor that does not answer makes sysfs return EIO on read."""
    fs.thermal_zone(0, "soc_thermal", 50.0)
    real_open = open

    def flaky_open(path, *args, **kwargs):
        if str(path).endswith("thermal_zone0/temp"):
            raise OSError(errno.EIO, "Input/output error")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(devfs_files, "open", flaky_open, raising=False)
    zone = thermal.read_thermal_zones(fs.root)[0]
    assert zone.temperature.value is None and "EIO" in zone.temperature.reason


def test_unreadable_file_is_a_reason_for_an_unprivileged_user():
    root = Path(tempfile.mkdtemp(prefix="edgeaccel-unreadable-"))
    try:
        fs = FakeSysfs(root)
        fs.rapl_zone("intel-rapl:0", "package-0", 123_456_789, 262_143_328_850)
        world_traversable(fs.path("sys/class/powercap/intel-rapl:0"))
        for path in root.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        fs.path("sys/class/powercap/intel-rapl:0/energy_uj").chmod(0o400)  # root-only, as since Linux 5.10
        zone = call_unprivileged(rapl.read_rapl_zone, fs.path("sys/class/powercap/intel-rapl:0"))
        assert zone.name == "package-0"
        assert zone.energy.value is None
        assert "not readable by this user" in zone.energy.reason and "CVE-2020-8694" in zone.energy.reason
        assert zone.max_range_j == pytest.approx(262143.32885)
    finally:
        for path in sorted(root.rglob("*"), reverse=True):
            path.unlink() if not path.is_dir() else path.rmdir()
        root.rmdir()


# -- hwmon ---------------------------------------------------------------------------------------------------
def test_hwmon_channels_in_si_units(fs):
    fs.hwmon(0, "k10temp", {"temp1_input": 61_250, "temp1_label": "Tctl", "temp1_max": 70_000, "temp1_crit": 95_000})
    fs.hwmon(1, "amdgpu", {"power1_average": 12_500_000, "energy1_input": 3_600_000_000, "in0_input": 850,
                           "curr1_input": 1200, "fan1_input": 2650})
    chips = hwmon.read_hwmon(fs.root)
    k10 = chips[0]
    temp = k10.find("temp", "Tctl")
    assert temp.reading.value == 61.25 and temp.max_c == 70.0 and temp.crit_c == 95.0
    gpu = chips[1]
    assert gpu.of("power")[0].reading.value == 12.5
    assert gpu.of("energy")[0].reading.value == 3600.0
    assert gpu.of("in")[0].reading.value == 0.85
    assert gpu.of("curr")[0].reading.value == 1.2
    assert (gpu.of("fan")[0].reading.value, gpu.of("fan")[0].reading.unit) == (2650.0, "rpm")


def test_hwmon_attributes_under_device_folder(fs):
    fs.write("sys/class/hwmon/hwmon0/device/name", "coretemp")
    fs.write("sys/class/hwmon/hwmon0/device/temp1_input", 48000)
    fs.write("sys/class/hwmon/hwmon0/device/temp1_label", "Package id 0")
    chip = hwmon.read_hwmon(fs.root)[0]
    assert chip.chip == "coretemp" and chip.find("temp", "Package id 0").reading.value == 48.0


def test_hwmon_negative_power_is_garbage(fs):
    fs.hwmon(0, "ina226", {"power1_input": -5})
    reading = hwmon.read_hwmon(fs.root)[0].of("power")[0].reading
    assert reading.value is None and "negative" in reading.reason


# -- RAPL ------------------------------------------------------------------------------------------------------
def test_rapl_zones_and_units(fs):
    fs.rapl_zone("intel-rapl:0", "package-0", 5_000_000, 262_143_328_850)
    fs.rapl_zone("intel-rapl:0:0", "core", 2_000_000, 262_143_328_850)
    zones = rapl.read_rapl(fs.root)
    assert [(z.name, z.energy.value) for z in zones] == [("package-0", 5.0), ("core", 2.0)]
    assert zones[0].is_package and not zones[1].is_package


def test_energy_accumulator_across_wrap_and_reset():
    acc = EnergyAccumulator(range_j=100.0)
    for raw in (90.0, 95.0, 5.0, 50.0):  # wraps once between 95 and 5: 5 + 5 J
        acc.update(raw)
    assert acc.total_j == pytest.approx(5 + 10 + 45) and acc.wraps == 1
    no_range = EnergyAccumulator()
    for raw in (10.0, 20.0, 3.0):  # a reset: only the 3 J after it are known
        no_range.update(raw)
    assert no_range.total_j == pytest.approx(13.0) and no_range.resets == 1
    assert max_safe_interval_s(262143.3, 100.0) == pytest.approx(2621.433)


# -- Coral PCIe ----------------------------------------------------------------------------------------------
def test_apex_device_trips_and_clock_divider(fs):
    fs.apex(0, 91.3, warn_enabled=(1, 1))
    dev = coral.read_apex(fs.root)[0]
    assert dev.temperature.value == pytest.approx(apex_millis(91.3) / 1000)
    assert dev.trips_c == pytest.approx((85.05, 90.05, 95.05))  # the driver's 0.25 C ADC steps
    assert dev.passive_c == pytest.approx(85.0, abs=0.25) and dev.critical_c == pytest.approx(110.0, abs=0.25)
    assert dev.warn1_enabled and dev.warn2_enabled and dev.poll_interval_ms == 5000
    assert dev.clock_divider == 4  # above trip points 0 and 1


def test_apex_millis_follows_the_driver_adc_formula():
    for celsius in (25.0, 60.1, 85.0, 99.9):
        value = apex_millis(celsius)
        assert (value - 550) % 250 == 0 and abs(value / 1000 - celsius) <= 0.125


# -- Jetson INA3221 ----------------------------------------------------------------------------------------------
def test_ina3221_hwmon_layout(fs):
    fs.ina3221_hwmon([("VDD_IN", 5080, 1024), ("VDD_CPU_GPU_CV", 5080, 200), ("VDD_SOC", 5080, 300)])
    rails = jetson.read_rails(fs.root)
    assert [r.name for r in rails] == ["VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"]
    assert rails[0].layout == "hwmon" and rails[0].power.value == pytest.approx(5.08 * 1.024)


def test_ina3221_iio_layout_and_a_broken_channel(fs):
    fs.ina3221_iio([("POM_5V_IN", 2165, 433, 5000), ("POM_5V_GPU", 0, 0, 5000), ("POM_5V_CPU", 449, 90, 5000)])
    fs.write("sys/bus/i2c/drivers/ina3221x/6-0040/iio:device0/in_power2_input", "n/a")
    rails = jetson.read_rails(fs.root)
    assert rails[0].name == "POM_5V_IN" and rails[0].power.value == pytest.approx(2.165)
    assert rails[0].voltage.value == 5.0 and rails[0].current.value == pytest.approx(0.433)
    assert rails[2].power.value is None and "not an integer" in rails[2].power.reason


# -- Raspberry Pi -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, active, now", [
    ("throttled=0x50005", ["under-voltage detected", "currently throttled", "under-voltage has occurred",
                           "throttling has occurred"], True),
    ("0x0", [], False),
    ("80008", ["soft temperature limit active", "soft temperature limit has occurred"], True),
    ("50000", ["under-voltage has occurred", "throttling has occurred"], False),
])
def test_rpi_throttled_bits(text, active, now):
    flags = rpi.parse_throttled(text)
    assert flags.active == active and flags.throttled_now is now


def test_rpi_garbage_and_file(fs):
    assert rpi.parse_throttled("zz").raw is None
    assert "bits no firmware sets" in rpi.parse_throttled("fffffff").reason
    assert "no get_throttled file" in rpi.read_throttled(fs.root).reason
    fs.rpi_throttled(0x50005)
    flags = rpi.read_throttled(fs.root)
    assert flags.raw == 0x50005 and flags.under_voltage_now


def test_readers_never_leave_their_root(tmp_path):
    """A zone's cdev symlink pointing outside the root is identified by name only, never followed."""
    fs = FakeSysfs(tmp_path / "root")
    fs.thermal_zone(0, "cpu-thermal", 50.0)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "cur_state").write_text("7\n")
    os.symlink(outside, fs.path("sys/class/thermal/thermal_zone0/cdev0"))
    assert thermal.read_thermal_zones(fs.root)[0].cooling == ()


def test_a_folder_this_user_may_not_enter_is_a_reason_not_an_exception():
    """Sysfs folders of a driver can be root-only; everything below them reads as 'not readable'."""
    from edgeaccel.telemetry import TelemetrySampler, discover
    from edgeaccel.telemetry.sensors import SensorSpec

    root = Path(tempfile.mkdtemp(prefix="edgeaccel-closed-"))
    try:
        fs = FakeSysfs(root)
        fs.thermal_zone(0, "cpu-thermal", 55.0)
        fs.apex(0, 60.0)
        fs.hwmon(0, "k10temp", {"temp1_input": 50000, "temp1_label": "Tctl"})
        for path in root.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        world_traversable(root)
        for closed in ("sys/class/thermal/thermal_zone0", "sys/class/apex/apex_0", "sys/class/hwmon/hwmon0"):
            fs.path(closed).chmod(0o700)
        spec = SensorSpec(temperature="thermal:thermal_zone0", throttle="apex:apex_0")

        def look(tree):
            samples = TelemetrySampler({"cpu": spec, "tpu": SensorSpec(temperature="apex:apex_0"),
                                        "amd": SensorSpec(temperature="hwmon:k10temp/Tctl")}, tree).sample(0.0)
            return [str(s) for s in discover(tree)], {k: (v.temp_c, v.temp_reason) for k, v in samples.items()}

        sources, samples = call_unprivileged(look, root)
        assert all(value is None and reason for value, reason in samples.values()), samples
    finally:
        for path in sorted(root.rglob("*"), reverse=True):
            path.chmod(0o700)
            path.unlink() if not path.is_dir() else path.rmdir()
        root.rmdir()


def test_an_absolute_symlink_cannot_lead_a_survey_out_of_its_root(tmp_path):
    """A mounted device image whose sysfs holds an absolute link must not be read from this machine."""
    from edgeaccel.telemetry.inventory import read_inventory

    outside = tmp_path / "host"
    (outside / "zone").mkdir(parents=True)
    (outside / "zone" / "type").write_text("host-zone\n")
    (outside / "zone" / "temp").write_text("42000\n")
    root = tmp_path / "image"
    (root / "sys/class/thermal").mkdir(parents=True)
    (root / "sys/class/thermal/thermal_zone0").symlink_to(outside / "zone")  # absolute, out of the root
    inventory = read_inventory(root)
    (zone,) = inventory.zones
    assert zone.temperature.value is None and "outside the surveyed root" in zone.temperature.reason
