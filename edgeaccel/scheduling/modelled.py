"""Control from the device's identified plant model (scheduling/plant.py): what the latency policy serves, and
what the thermal and latency policies do while a sensor is lost.

Latency: flat out while the model says the temperature, even at full duty, stays below its limit over the
forecast horizon; past that, the busy share that brings the forecast to that limit at the horizon: it falls
smoothly from 1 to the duty whose steady state is the limit as the device approaches it (a first-order device
approached that way does not overshoot, so nothing flips between extremes). Never below what the thermal
controller would grant at the same temperature (it runs alongside as a floor). The limit is ``passive -
latency_passive_margin_c``: a sensor lost while the device is above passive leaves it there, blind, for the
whole cool-down (seconds to a time constant), which no outage target allows. ``latency_above_passive`` raises it
to ``critical - latency_margin_c``. A kernel that slows the device above passive makes heat there cheaper but work
slower: where the zone's cooling device shows it, and until the model is identified, the latency policy is the
thermal policy, which is safe on any device; where only the service time shows it (the same requests taking
longer near the passive trip), the limit becomes the thermal policy's target (passive - margin).

Sensor lost: the model, run forward from the last reading with the work actually admitted, estimates the
temperature; the duty is the one that keeps that estimate ``blind_guard_c`` below the thermal policy's target
(passive - margin), less a guard for a rise of the room that nothing can see, growing over the device's time
constant to ``blind_ambient_rise_c``; that guard alone cuts to no less than ``blind_keep_share`` of the duty
before ("model"). A model whose one-step forecasts miss by more than ``LOOSE_FIT_C`` is not run forward: the
duty it says holds that temperature, or the last duty if lower, is kept ("conservative duty"). Without an
identified model, a share of the last duty (scheduling/control.py, "share of last duty"). ``fallback`` says
which (in the trace and ``model.telemetry``), and the first reading back ends it.
"""

from __future__ import annotations

import math

from .control import (ControlStep, DeviceControl, ThermalConfig, blind_step, critical_of, passive_of, safety_step,
                      thermal_step)
from .decision import DeviceView
from .plant import PRIOR_TAU_S, PlantModel
from .plant import evolve as replace  # cheap: no __post_init__ on these

LOOSE_FIT_C = 1.5  # a model whose one-step forecasts miss by more (RMS) is not run forward through an outage
SLOWED = 1.4  # a service time this many times the best seen, near the passive trip: the kernel slows the device


def learn(dev: DeviceView, ctl: DeviceControl, cfg: ThermalConfig, dt: float) -> DeviceControl:
    """Fit the interval that just ended into the device's plant model (a reading now and one before it)."""
    if dev.temp_c is None:
        return ctl
    plant = ctl.plant
    passive, critical = passive_of(dev, cfg), critical_of(dev, cfg)
    if plant is None:
        plant = PlantModel(passive if passive is not None else dev.temp_c)
    elif ctl.last_temp_c is not None and ctl.blind_s == 0.0 and dev.throttled is not True:
        # the kernel slowing the device changes heat per busy second: those intervals would teach it wrong
        plant = plant.update(ctl.last_temp_c, dev.busy, dev.temp_c, dt)
    return replace(ctl, plant=plant, passive_seen_c=passive if passive is not None else ctl.passive_seen_c,
                   critical_seen_c=critical if critical is not None else ctl.critical_seen_c,
                   kernel_throttles=ctl.kernel_throttles or bool(dev.throttled))


def with_trips(dev: DeviceView, ctl: DeviceControl) -> DeviceView:
    """The device as last known: an outage that takes the trip points with it keeps the ones read before."""
    if dev.passive_c is None and dev.critical_c is None and ctl.passive_seen_c is not None:
        return replace(dev, passive_c=ctl.passive_seen_c, critical_c=ctl.critical_seen_c)
    return dev


def blind(dev: DeviceView, ctl: DeviceControl, cfg: ThermalConfig, dt: float) -> ControlStep:
    """A device whose sensor answered before and does not now (backed off stays backed off)."""
    dev = with_trips(dev, ctl)
    safe = safety_step(dev, ctl, cfg)
    if safe is not None:
        return safe
    plant = ctl.plant
    passive = passive_of(dev, cfg)
    if plant is None or not plant.identified or ctl.last_temp_c is None or passive is None:
        return blind_step(dev, ctl, cfg, dt)
    blind_s = ctl.blind_s + dt
    sighted = ctl.sighted_duty if ctl.blind_s > 0.0 and ctl.sighted_duty is not None else ctl.duty
    tau = plant.tau_s or PRIOR_TAU_S
    # a room that warms while nothing is read raises the device by as much, over its time constant: the target
    # makes room for ``blind_ambient_rise_c`` of it from the start, as fast as the device would feel it
    unseen = cfg.blind_ambient_rise_c * (1.0 - math.exp(-blind_s / tau))
    target = passive - cfg.margin_c - cfg.blind_guard_c - unseen
    first = ctl.blind_s == 0.0
    if plant.residual_c > LOOSE_FIT_C:
        # the model forecasts this device's next reading poorly: its estimate is not run forward, only the
        # duty it says holds the target (or the last duty, if lower) is kept
        steady = plant.duty_for(target, target, cfg.horizon_s)
        duty = min(1.0, max(cfg.min_duty, min(steady, sighted)))
        note = (f"{dev.name}: no temperature for {blind_s:.1f} s ({dev.temp_reason}): holding duty {duty:.2f}, a "
                f"conservative duty from its plant model (its steady state {target:.1f} C; the fit is too loose, "
                f"{plant.residual_c:.1f} C, to estimate the temperature) until readings return")
        control = replace(ctl, duty=duty, integral=min(ctl.integral, duty), blind_s=blind_s, estimate_c=None,
                          fallback="conservative duty", limited=ctl.limited or duty < cfg.limit_below,
                          sighted_duty=sighted, clock_s=ctl.clock_s + dt)
        return ControlStep(control, duty, "no_telemetry" if first else "", note)
    start = ctl.estimate_c if ctl.estimate_c is not None else ctl.last_temp_c
    estimate = plant.forecast_c(start, dev.busy, dt)  # from the last reading (or estimate), one interval on
    # above the target: the shortest way down; below it, approached over a time constant (a slow device would
    # otherwise be cut to the floor for minutes to gain a degree)
    horizon = cfg.horizon_s if estimate > target else max(cfg.horizon_s, tau)
    duty = plant.duty_for(estimate, target, horizon)
    # the guard for the room is a hedge, not a heat the model knows of: alone it cuts to at most
    # ``blind_keep_share`` of the duty that held the device (on a device with little room between idle and
    # passive it would otherwise starve it); the estimate itself, above its target without the guard, cuts more
    known = target + unseen
    duty = max(duty, min(cfg.blind_keep_share * sighted, plant.duty_for(estimate, known, horizon)))
    duty = min(1.0, max(cfg.min_duty, duty))
    note = (f"{dev.name}: no temperature for {blind_s:.1f} s ({dev.temp_reason}): holding duty {duty:.2f} from its "
            f"plant model (estimated {estimate:.1f} C, kept below {target:.1f} C: passive {passive:.1f} C - "
            f"{cfg.margin_c + cfg.blind_guard_c:g} - {unseen:.1f} for a rise of the room it cannot see; "
            f"{plant.describe()}) until readings return")
    control = replace(ctl, duty=duty, integral=min(ctl.integral, duty), blind_s=blind_s, estimate_c=estimate,
                      fallback="model", limited=ctl.limited or duty < cfg.limit_below, sighted_duty=sighted,
                      clock_s=ctl.clock_s + dt)
    return ControlStep(control, duty, "no_telemetry" if first else "", note)


def thermal(dev: DeviceView, ctl: DeviceControl, cfg: ThermalConfig, dt: float) -> ControlStep:
    """The thermal policy's step for one device: its controller, learning the plant, model-based when blind."""
    if dev.temp_c is None and ctl.seen:
        return blind(dev, ctl, cfg, dt)
    return thermal_step(dev, learn(dev, ctl, cfg, dt), cfg, dt)


def latency(dev: DeviceView, ctl: DeviceControl, cfg: ThermalConfig, dt: float,
            service_s: float | None = None) -> ControlStep:
    """The latency policy's step for one device (see the module's docstring). ``service_s``: the device's
    measured service time now (its fastest executor's)."""
    if dev.temp_c is None and ctl.seen:
        return blind(dev, ctl, cfg, dt)
    ctl = learn(dev, ctl, cfg, dt)
    ctl = _slowed(dev, ctl, cfg, service_s)
    floor = thermal_step(dev, ctl.floor or DeviceControl(), cfg, dt)
    plant, critical, passive = ctl.plant, critical_of(dev, cfg), passive_of(dev, cfg)
    # a cooling device bound to the zone (its state readable, throttling or not) says the kernel slows the device
    # above its passive trip: heat there buys nothing, the target is the thermal policy's, and a second controller
    # chasing it from the model only made the duty wander after a change of ambient (0.98x thermal). Throttling
    # seen only in the service time comes late, with the thermal controller's state wound down at the hotter
    # level: the model then holds the thermal target instead (below)
    visible = dev.throttled is not None
    if (dev.temp_c is None or plant is None or not plant.identified or critical is None or passive is None
            or visible):
        why = "" if dev.temp_c is None or critical is None else f"; {plant.describe()}: serving as the thermal policy"
        if visible and why:
            why = "; its cooling device shows the kernel slows it above its passive trip: serving as the thermal policy"
        main = replace(floor.control, plant=ctl.plant, passive_seen_c=ctl.passive_seen_c,
                       critical_seen_c=ctl.critical_seen_c, kernel_throttles=ctl.kernel_throttles, floor=floor.control)
        return ControlStep(main, floor.duty, floor.event, floor.note + why)
    limit = critical - cfg.latency_margin_c
    why = f"critical {critical:.1f} C - {cfg.latency_margin_c:g}"
    if ctl.kernel_throttles and passive - cfg.margin_c < limit:
        limit, why = passive - cfg.margin_c, (f"passive {passive:.1f} C - {cfg.margin_c:g}: the kernel slows the "
                                              "device above it")
    elif not cfg.latency_above_passive and passive - cfg.latency_passive_margin_c < limit:
        limit, why = passive - cfg.latency_passive_margin_c, (
            f"passive {passive:.1f} C - {cfg.latency_passive_margin_c:g}: a lost sensor must not find it above "
            "passive")
    # the straight-line forecast is not used: only the temperature itself backs off (the model forecasts), and
    # a back-off ends a few degrees below the limit rather than below passive (the latency policy's own level)
    safety = replace(cfg, resume_below_c=passive - (limit - 3.0))
    safe = safety_step(replace(dev, slope_c_per_s=0.0), ctl, safety)
    if safe is not None:
        return ControlStep(replace(safe.control, floor=floor.control), safe.duty, safe.event, safe.note)
    # a horizon of at least half a time constant: on a slow device a few seconds' forecast turns each 1 C step
    # of the reading into a large change of duty
    horizon = max(cfg.horizon_s, 0.5 * (plant.tau_s or 0.0))
    flat_out = plant.forecast_c(dev.temp_c, 1.0, horizon)
    if flat_out <= limit:
        duty, how = 1.0, f"flat out (forecast {flat_out:.1f} C in {horizon:.3g} s at full duty)"
    else:
        # a reading above the limit by more than a sensor step (1 C on x86_pkg_temp) says the model under-forecasts
        # (the room warmed faster than the fit follows): aim below the limit by twice that, so the device is back
        # before the back-off
        aim = limit - 2.0 * max(0.0, dev.temp_c - limit - 1.0)
        duty = min(1.0, max(cfg.min_duty, plant.duty_for(dev.temp_c, aim, horizon)))
        how = f"duty {duty:.2f} brings the forecast to {aim:.1f} C in {horizon:.3g} s"
        if plant.forecast_c(dev.temp_c, cfg.min_duty, cfg.horizon_s) >= critical - cfg.backoff_margin_c / 2:
            safe = safety_step(replace(dev, temp_c=critical), ctl, safety)  # even the floor duty heads for critical
            if safe is not None:
                return ControlStep(replace(safe.control, floor=floor.control), safe.duty, safe.event,
                                   safe.note + f"; {plant.describe()}")
    if floor.duty > duty and not floor.control.backed_off:
        duty, how = floor.duty, f"duty {floor.duty:.2f}, the thermal controller's (never less)"
    limited = duty < cfg.limit_below
    event = "duty_cycle" if limited and not ctl.limited else ("return" if ctl.limited and not limited else "")
    note = (f"{dev.name} {dev.temp_c:.1f} C, limit {limit:.1f} C ({why}): {how}; {plant.describe()}")
    control = replace(ctl, duty=duty, integral=duty, backed_off=False, limited=limited, seen=True,
                      last_temp_c=dev.temp_c, last_slope=dev.slope_c_per_s, blind_s=0.0, ramp=False,
                      estimate_c=None, fallback=None, floor=floor.control, clock_s=ctl.clock_s + dt)
    return ControlStep(control, duty, event, note)


def _slowed(dev: DeviceView, ctl: DeviceControl, cfg: ThermalConfig, service_s: float | None) -> DeviceControl:
    """Note a kernel (or firmware) that slows the device near its passive trip without a cooling state to say
    so: the same work takes ``SLOWED`` times its best service time while the device is that hot."""
    if service_s is None or service_s <= 0:
        return ctl
    best = service_s if ctl.best_service_s is None else min(ctl.best_service_s, service_s)
    passive = passive_of(dev, cfg)
    slowed = (dev.temp_c is not None and passive is not None and dev.temp_c >= passive - 1.0
              and service_s > SLOWED * best)
    return replace(ctl, best_service_s=best, kernel_throttles=ctl.kernel_throttles or slowed)


def telemetry_fields(ctl: DeviceControl | None) -> dict:
    """What ``model.telemetry`` adds to a device's sample: how the policy sees the device now."""
    if ctl is None:
        return {}
    plant = ctl.plant.summary() if ctl.plant is not None and ctl.plant.theta is not None else None
    return {"fallback": ctl.fallback if ctl.blind_s > 0.0 else None,
            "estimated_temp_c": ctl.estimate_c if ctl.blind_s > 0.0 else None, "plant": plant}
