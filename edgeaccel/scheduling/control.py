"""Per-device thermal control, shared by the policies (pure).

The controlled temperature is the forecast ``T + slope * horizon``, so a device heating fast is cut before it
gets there (a falling temperature is not extrapolated: it falls because of the last cut, and would otherwise
talk the controller into full duty just before the device heats again). A PI controller sets the device's duty
cycle to hold that forecast at ``passive - margin``; the integral is frozen while the cap is not binding (the
device is busy less than it may be), so a quiet spell does not wind it up and a burst after it is not let
through at full heat. Near the critical trip the device is backed off hard (duty 0) and only returns once it is
well below the passive trip: two thresholds, never one, so it does not flap.

Returning is gradual: after a back-off, and after a sensor outage, the duty climbs back from a conservative one
at most ``rise_per_s`` per second. A sensor that stops answering is not taken as a cool device: with an
identified plant model the model holds it (scheduling/modelled.py); without one, 0.7 of the duty that last
held it, cut to ``min_duty`` if the last trend would by now have reached the passive trip, until readings return.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .decision import DeviceView
from .plant import PRIOR_TAU_S, PlantModel
from .plant import evolve as replace  # cheap: no __post_init__ on these


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
    return_duty: float = 0.5  # after a back-off the duty starts here, or at half the duty that led to it...
    rise_per_s: float = 0.1  # ...and, after a back-off or a sensor outage, climbs at most this much per second
    latency_margin_c: float = 6.0  # latency policy: hold the plant model's forecast this far below critical...
    latency_passive_margin_c: float = 1.0  # ...or, unless latency_above_passive, this far below passive
    latency_above_passive: bool = False  # latency may hold a device above passive (a sensor outage then spends
    # the cool-down, seconds to a time constant, above passive: scheduling/modelled.py)
    blind_guard_c: float = 1.5  # sensor lost: keep the model's estimate this much further below passive - margin
    blind_ambient_rise_c: float = 8.0  # ...and below by a rise of the room it cannot see, felt over a time constant
    blind_keep_share: float = 0.6  # ...though that guard alone never cuts below this share of the duty before
    blind_unidentified_share: float = 0.7  # sensor lost before the model is identified: this share of the last duty


@dataclass(frozen=True)
class DeviceControl:
    duty: float = 1.0
    last_error: float | None = None
    backed_off: bool = False
    limited: bool = False  # for labelling: set when duty falls below 0.97, cleared back at 1.0 below target
    integral: float = 1.0  # the PI integral: the duty that holds the target once the error is zero
    cool_since: float | None = None  # since when (seconds of control time) it has been unlimited and cool
    clock_s: float = 0.0  # control time: the sum of the dt it was given
    seen: bool = False  # a temperature has been read: a missing one later is an outage, not "no sensor"
    last_temp_c: float | None = None  # the last reading and its trend, extrapolated through an outage
    last_slope: float | None = None
    blind_s: float = 0.0  # seconds since the last reading (0 while readings come)
    ramp: bool = False  # climbing back gradually (after a back-off or an outage)
    plant: PlantModel | None = None  # the device's identified first-order model (scheduling/plant.py)
    estimate_c: float | None = None  # during an outage: the model's estimate of the temperature
    fallback: str | None = None  # during an outage: "model", "conservative duty", "share of last duty"
    sighted_duty: float | None = None  # during an outage: the duty when the last reading came
    passive_seen_c: float | None = None  # the trips last read, for an outage that takes them with it
    critical_seen_c: float | None = None
    kernel_throttles: bool = False  # the kernel was seen slowing the device (cooling state, or service time)
    best_service_s: float | None = None  # the fastest its executors were measured (latency policy)
    floor: DeviceControl | None = None  # latency policy: the thermal controller it never serves less than


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


def passive_of(dev: DeviceView, cfg: ThermalConfig) -> float | None:
    if dev.passive_c is not None:
        return dev.passive_c
    critical = critical_of(dev, cfg)
    return None if critical is None else critical - cfg.default_critical_above_passive_c


def safety_step(dev: DeviceView, ctl: DeviceControl, cfg: ThermalConfig) -> ControlStep | None:
    """The hard back-off near the critical trip that every policy applies. None when not engaged."""
    critical = critical_of(dev, cfg)
    if dev.temp_c is None:
        if ctl.backed_off:  # backed off and now blind: stay (nearly) off until a reading says it cooled
            note = (f"{dev.name}: no temperature since its back-off ({dev.temp_reason}): held at duty "
                    f"{cfg.min_duty:.2f} until readings return")
            return ControlStep(ctl, cfg.min_duty, "back_off", note)
        return None
    if critical is None:
        return None
    passive = dev.passive_c if dev.passive_c is not None else critical - cfg.default_critical_above_passive_c
    forecast = dev.temp_c + max(0.0, dev.slope_c_per_s or 0.0) * cfg.horizon_s
    if dev.temp_c >= critical - cfg.backoff_margin_c or forecast >= critical - cfg.backoff_margin_c / 2:
        note = (f"{dev.name} {dev.temp_c:.1f} C (forecast {forecast:.1f} C in {cfg.horizon_s:g} s) near its critical "
                f"trip {critical:.1f} C: backed off until below {passive - cfg.resume_below_c:.1f} C")
        # the duty that led here was too much: the device returns at half of it (or of return_duty), so a
        # return that heads straight back into a back-off returns lower the next time (no limit cycle)
        after = min(ctl.duty, ctl.integral, cfg.return_duty / 0.5) * 0.5 if not ctl.backed_off else ctl.duty
        return ControlStep(replace(ctl, backed_off=True, duty=after, integral=after, last_error=None,
                                   limited=True, seen=True, last_temp_c=dev.temp_c, last_slope=dev.slope_c_per_s,
                                   blind_s=0.0),
                           0.0, "back_off", note)
    if ctl.backed_off:
        if dev.temp_c < passive - cfg.resume_below_c:
            start = max(cfg.min_duty, min(ctl.duty, ctl.integral, cfg.return_duty))
            note = (f"{dev.name} cooled to {dev.temp_c:.1f} C, below {passive - cfg.resume_below_c:.1f} C: serving "
                    f"again from duty {start:.2f}, rising at most {cfg.rise_per_s:g}/s")
            return ControlStep(replace(ctl, backed_off=False, duty=start, integral=start, last_error=None, ramp=True,
                                       seen=True, last_temp_c=dev.temp_c, last_slope=dev.slope_c_per_s, blind_s=0.0),
                               start, "return", note)
        note = f"{dev.name} {dev.temp_c:.1f} C still above {passive - cfg.resume_below_c:.1f} C after a back-off"
        return ControlStep(replace(ctl, seen=True, last_temp_c=dev.temp_c, last_slope=dev.slope_c_per_s, blind_s=0.0),
                           0.0, "back_off", note)
    return None


def blind_step(dev: DeviceView, ctl: DeviceControl, cfg: ThermalConfig, dt: float) -> ControlStep:
    """A device whose sensor answered before and does not now, and whose plant is not identified: nothing says
    how much heat the duty that held it makes, so it is cut to ``blind_unidentified_share`` of it (0.7 by
    default: a device held at its target cools a few degrees, room for the room to warm unseen; one still
    heating when the readings stopped, at full duty during warm-up, is not let on heating at that duty), and to
    ``min_duty`` once its last trend would by now have reached its passive trip (``fallback`` "share of last
    duty"). The trend fades over ``PRIOR_TAU_S`` (30 s)."""
    blind_s = ctl.blind_s + dt
    passive = passive_of(dev, cfg)
    sighted = ctl.sighted_duty if ctl.blind_s > 0.0 and ctl.sighted_duty is not None else min(ctl.duty, ctl.integral)
    hold = max(cfg.min_duty, cfg.blind_unidentified_share * sighted)
    why = f"duty {hold:.2f}, {cfg.blind_unidentified_share:g} of the duty that last held it ({sighted:.2f})"
    if ctl.last_temp_c is not None and passive is not None:
        # the last trend, fading over the prior time constant: a first-order device's heating slows as it nears
        # its steady state, and a held device's small trend (noise on 1 C steps) is not run on for minutes
        fade = PRIOR_TAU_S * (1.0 - math.exp(-blind_s / PRIOR_TAU_S))
        guess = ctl.last_temp_c + max(0.0, ctl.last_slope or 0.0) * fade
        if guess >= passive:
            hold = cfg.min_duty
            why = (f"duty {hold:.2f}: its last trend ({ctl.last_temp_c:.1f} C, {ctl.last_slope or 0.0:+.2f} C/s) "
                   f"would have reached its passive trip {passive:.1f} C by now")
    note = (f"{dev.name}: no temperature for {blind_s:.1f} s ({dev.temp_reason}), no identified plant model: "
            f"holding {why} until readings return (fallback share of last duty)")
    control = replace(ctl, duty=hold, integral=min(ctl.integral, hold), blind_s=blind_s, sighted_duty=sighted,
                      limited=ctl.limited or hold < cfg.limit_below, clock_s=ctl.clock_s + dt,
                      fallback="share of last duty",
                      estimate_c=None)
    return ControlStep(control, hold, "no_telemetry" if ctl.blind_s == 0.0 else "", note)


def thermal_step(dev: DeviceView, ctl: DeviceControl, cfg: ThermalConfig, dt: float) -> ControlStep:
    """Duty for one device under the thermal policy (safety included).

    Positional PI: duty = I + kp * error, where error = target - forecast. The integral I moves only while it
    can matter: not while the duty is pinned at 1 and the device is cool, not while it is pinned at the floor
    and hot, and not upward while the device uses less than its cap. It stays where the last busy spell left
    it, the duty that held the target then: a burst after a quiet spell starts from that duty, not from 1
    (letting it drift up while unused put devices 1-7% of the time above passive at 70-90% load)."""
    if dev.temp_c is None:
        if ctl.seen:
            safe = safety_step(dev, ctl, cfg)
            return safe if safe is not None else blind_step(dev, ctl, cfg, dt)
        return ControlStep(replace(ctl, duty=1.0), 1.0, "no_telemetry",
                           f"{dev.name}: no temperature ({dev.temp_reason}); serving unthrottled")
    if dev.passive_c is None and dev.critical_c is None:
        ignored = f"; {dev.limits_note}" if dev.limits_note else ""
        return ControlStep(replace(ctl, duty=1.0), 1.0, "no_telemetry",
                           f"{dev.name}: {dev.temp_c:.1f} C but no trip points known{ignored}; serving unthrottled "
                           "(give the device's limits in its profile)")
    safe = safety_step(dev, ctl, cfg)
    if safe is not None:
        return safe
    returning = ctl.ramp or ctl.blind_s > 0.0  # after a back-off, or readings back after an outage
    passive = passive_of(dev, cfg)
    target = passive - cfg.margin_c
    forecast = dev.temp_c + max(0.0, dev.slope_c_per_s or 0.0) * cfg.horizon_s
    error = target - forecast
    integral = ctl.duty if ctl.last_error is None else ctl.integral
    duty = integral + cfg.kp * error
    saturated_high = duty >= 1.0 and error > 0
    saturated_low = duty <= cfg.min_duty and error < 0
    idle = error > 0 and dev.busy < 0.85 * ctl.duty
    if not (saturated_high or saturated_low or idle):
        integral = min(1.0, max(0.0, integral + cfg.ki * error * dt))
    duty = min(1.0, max(cfg.min_duty, integral + cfg.kp * error))
    ramp = False
    if returning and duty > ctl.duty + cfg.rise_per_s * dt:
        duty, ramp = ctl.duty + cfg.rise_per_s * dt, True
        integral = min(integral, duty)  # the integral follows the ramp: no step up when the ramp ends
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
    if ramp:
        note += f", returning gradually (at most +{cfg.rise_per_s:g}/s)"
    if ctl.blind_s > 0.0:
        note += f"; readings back after {ctl.blind_s:.1f} s without"
    if dev.limits_note:
        note += f"; {dev.limits_note}"
    control = replace(ctl, duty=duty, last_error=error, backed_off=False, limited=limited, integral=integral,
                      cool_since=cool_since, clock_s=clock, seen=True, last_temp_c=dev.temp_c,
                      last_slope=dev.slope_c_per_s, blind_s=0.0, ramp=ramp, estimate_c=None, fallback=None)
    return ControlStep(control, duty, event, note)
