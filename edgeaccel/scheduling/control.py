"""Per-device thermal control, shared by the policies (pure).

The controlled temperature is the forecast ``T + slope * horizon``, so a device heating fast is cut before it
gets there. A PI controller sets the device's duty cycle to hold that forecast at ``passive - margin``; the
integral is frozen while the cap is not binding (the device is busy less than it may be), so a quiet spell
does not wind it up and a burst after it is not let through at full heat. Near the critical trip the device is
backed off hard (duty 0) and only returns once it is well below the passive trip: two thresholds, never one,
so it does not flap.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .decision import DeviceView


@dataclass(frozen=True)
class ThermalConfig:
    margin_c: float = 2.0  # hold the forecast this far below the passive trip
    horizon_s: float = 5.0  # forecast look-ahead
    kp: float = 0.06  # duty per C of error
    ki: float = 0.006  # duty per C per second of error
    backoff_margin_c: float = 4.0  # back off hard at critical - this
    resume_below_c: float = 5.0  # after a back-off, return below passive - this
    min_duty: float = 0.02  # never starve a device completely outside a back-off (it keeps its latency fresh)
    limit_below: float = 0.95  # a device counts as limited (trace action duty_cycle) once its duty falls below
    return_dwell_s: float = 10.0  # ...and as returned once unlimited and cool for this long (no flapping)
    default_critical_above_passive_c: float = 15.0  # when only a passive trip is known


@dataclass(frozen=True)
class DeviceControl:
    duty: float = 1.0
    last_error: float | None = None
    backed_off: bool = False
    limited: bool = False  # for labelling: set when duty falls below 0.97, cleared back at 1.0 below target
    integral: float = 1.0  # the PI integral: the duty that holds the target once the error is zero
    cool_since: float | None = None  # since when (seconds of control time) it has been unlimited and cool
    clock_s: float = 0.0  # control time: the sum of the dt it was given


@dataclass(frozen=True)
class ControlStep:
    control: DeviceControl
    duty: float
    event: str  # "", "back_off", "return", "duty_cycle", "no_telemetry"
    note: str


def critical_of(dev: DeviceView, cfg: ThermalConfig) -> float | None:
    if dev.critical_c is not None:
        return dev.critical_c
    if dev.passive_c is not None:
        return dev.passive_c + cfg.default_critical_above_passive_c
    return None


def safety_step(dev: DeviceView, ctl: DeviceControl, cfg: ThermalConfig) -> ControlStep | None:
    """The hard back-off near the critical trip that every policy applies. None when not engaged."""
    critical = critical_of(dev, cfg)
    if dev.temp_c is None or critical is None:
        return None
    passive = dev.passive_c if dev.passive_c is not None else critical - cfg.default_critical_above_passive_c
    forecast = dev.temp_c + max(0.0, dev.slope_c_per_s or 0.0) * cfg.horizon_s
    if dev.temp_c >= critical - cfg.backoff_margin_c or forecast >= critical - cfg.backoff_margin_c / 2:
        note = (f"{dev.name} {dev.temp_c:.1f} C (forecast {forecast:.1f} C in {cfg.horizon_s:g} s) near its critical "
                f"trip {critical:.1f} C: backed off until below {passive - cfg.resume_below_c:.1f} C")
        return ControlStep(replace(ctl, backed_off=True, duty=min(ctl.duty, 0.5), last_error=None, limited=True),
                           0.0, "back_off" if not ctl.backed_off else "", note)
    if ctl.backed_off:
        if dev.temp_c < passive - cfg.resume_below_c:
            note = f"{dev.name} cooled to {dev.temp_c:.1f} C, below {passive - cfg.resume_below_c:.1f} C: serving again"
            return ControlStep(replace(ctl, backed_off=False), ctl.duty, "return", note)
        note = f"{dev.name} {dev.temp_c:.1f} C still above {passive - cfg.resume_below_c:.1f} C after a back-off"
        return ControlStep(ctl, 0.0, "", note)
    return None


def thermal_step(dev: DeviceView, ctl: DeviceControl, cfg: ThermalConfig, dt: float) -> ControlStep:
    """Duty for one device under the thermal policy (safety included).

    Positional PI: duty = I + kp * error, where error = target - forecast. The integral I moves only while it
    can matter: not while the duty is pinned at 1 and the device is cool, not while it is pinned at the floor
    and hot, and not upward while the device uses less than its cap. It stays where the last busy spell left
    it, the duty that held the target then: a burst after a quiet spell starts from that duty, not from 1
    (letting it drift up while unused put devices 1-7% of the time above passive at 70-90% load)."""
    if dev.temp_c is None:
        return ControlStep(replace(ctl, duty=1.0), 1.0, "no_telemetry",
                           f"{dev.name}: no temperature ({dev.temp_reason}); serving unthrottled")
    if dev.passive_c is None and dev.critical_c is None:
        return ControlStep(replace(ctl, duty=1.0), 1.0, "no_telemetry",
                           f"{dev.name}: {dev.temp_c:.1f} C but no trip points known; serving unthrottled "
                           "(give the device's limits in its profile)")
    safe = safety_step(dev, ctl, cfg)
    if safe is not None:
        return safe
    passive = dev.passive_c if dev.passive_c is not None else critical_of(dev, cfg) - cfg.default_critical_above_passive_c
    target = passive - cfg.margin_c
    forecast = dev.temp_c + (dev.slope_c_per_s or 0.0) * cfg.horizon_s
    error = target - forecast
    integral = ctl.duty if ctl.last_error is None else ctl.integral
    duty = integral + cfg.kp * error
    saturated_high = duty >= 1.0 and error > 0
    saturated_low = duty <= cfg.min_duty and error < 0
    idle = error > 0 and dev.busy < 0.85 * ctl.duty
    if not (saturated_high or saturated_low or idle):
        integral = min(1.0, max(0.0, integral + cfg.ki * error * dt))
    duty = min(1.0, max(cfg.min_duty, integral + cfg.kp * error))
    clock = ctl.clock_s + dt
    cool = duty >= 1.0 and forecast < target - 1.0
    cool_since = (ctl.cool_since if ctl.cool_since is not None else clock) if cool else None
    if ctl.limited:
        limited = not (cool_since is not None and clock - cool_since >= cfg.return_dwell_s)
    else:
        limited = duty < cfg.limit_below
    event = ""
    if limited and not ctl.limited:
        event = "duty_cycle"
    elif ctl.limited and not limited:
        event = "return"
    note = (f"{dev.name} {dev.temp_c:.1f} C, forecast {forecast:.1f} C, target {target:.1f} C "
            f"(passive {passive:.1f} C): duty {duty:.2f}")
    return ControlStep(DeviceControl(duty, error, False, limited, integral, cool_since, clock), duty, event, note)
