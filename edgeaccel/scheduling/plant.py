"""A first-order thermal model of one device, identified online from its readings and the work it was given.

    T[k+1] - T[k] = (1 - a) (T_ss(u) - T[k]),    T_ss(u) = T_idle + gain * u,    a = exp(-dt / tau)

``u`` is the share of the interval the device was busy (what the duty cap let through, as measured), ``tau``
the thermal time constant, ``T_ss(u)`` where the device settles when kept that busy. An RC board, a heat sink,
an SoC die all look like this to within a few degrees over seconds to minutes.

Fitted by recursive least squares in Kalman form on ``y = T[k+1] - T[k]`` against ``((T[k] - ref) / 10, 1, u)``
= ``(-(1-a) 10, (1-a)(T_idle - ref), (1-a) gain)``. Only the constant term is let drift (``DRIFT``: the room
warms, a fan stops, so T_idle moves); the time constant and the gain are taken as the device's own and barely
drift: a forgetting factor forgets in every direction alike, and a device held at one temperature for minutes
then un-learns them. The data are closed-loop (the duty of an interval was decided from the reading that starts
it, noise included, and that noise is in ``y`` too), which biases plain least squares: a device with a 25 s time
constant held by the thermal policy read as 1900 s after a minute. So the update uses instruments, the reading
and the busy share one interval earlier, whose noise is not in ``y`` (instrumental-variable RLS): the same
device reads 33-38 s, with the heating rate per unit of duty (gain / tau, what a forecast over seconds needs)
within a few percent.
The model counts as identified once it has seen the temperature move (``MIN_SPAN_C``) and the duty vary
(``MIN_DUTY_SPAN``), knows the rate of change and the gain to ``REL_SD`` by its own covariance, and its
parameters are physical (a positive time constant, a positive gain). Pure data:
every update returns a new one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIN_SAMPLES = 12
MIN_SPAN_C = 4.0  # the readings must have moved this much for the time constant to mean anything
MIN_DUTY_SPAN = 0.25  # ...and the busy share this much for the gain to
# ...and the fit's own uncertainty of both must be below these shares of their values: the heating rate per
# unit of duty (c_duty) is what a forecast over seconds needs; the time constant (c_temp) matters less the
# slower the device, and is the hard one to pin down on a slow one
REL_SD = (1.5, None, 0.6)
TAU_RANGE_S = (0.5, 3600.0)
SCALE_C = 10.0
PRIOR_TAU_S = 30.0
PRIOR_GAIN_C = 40.0
PRIOR_VAR = (1.0, 25.0, 25.0)  # the prior is a guess: wide
NOISE_VAR = 0.5  # of one interval's temperature change: two readings of 1 C steps with noise
DRIFT = (1e-7, 3e-3, 1e-6)  # per interval: the constant term (ambient) drifts, tau and gain hardly
INSTRUMENT_JUMP = (3.0, 0.2)  # C, busy share: an earlier value this far off is no instrument
LOCK_FIT_C = 1.2  # once identified, tau and the gain are held while one-step forecasts miss by less (RMS)


def evolve(obj, **changes):
    """``dataclasses.replace`` for the scheduler's frozen state (no ``__post_init__``, no slots), about ten times
    cheaper: a decision makes a score of them, and ``replace`` was most of the policies' time."""
    new = object.__new__(type(obj))
    new.__dict__.update(obj.__dict__)
    new.__dict__.update(changes)
    return new


@dataclass(frozen=True)
class PlantModel:
    ref_c: float  # temperature the regressor is centred on (the passive trip, or the first reading)
    dt_s: float | None = None  # the sample interval the fit is in (the first one seen)
    theta: tuple[float, float, float] | None = None  # (c_temp, c_const, c_duty)
    cov: tuple[float, ...] | None = None  # their covariance, row-major 3x3
    samples: int = 0
    temp_span: tuple[float, float] | None = None  # lowest and highest reading fitted
    duty_span: tuple[float, float] | None = None
    residual_c: float = 0.0  # RMS of the one-step prediction error (EWMA)
    earlier_c: float | None = None  # the reading before the last interval's first one
    earlier_busy: float | None = None  # the busy share of the interval before
    operating_busy: float | None = None  # the recent busy share (EWMA over about ten intervals)
    identified: bool = False  # known well enough to act on (see the module's docstring; set by every update)

    # -- fitting -------------------------------------------------------------------------------------
    def update(self, before_c: float, busy: float, after_c: float, dt_s: float) -> PlantModel:
        """One interval: ``before_c`` at its start, ``after_c`` at its end, busy ``busy`` of it."""
        if dt_s <= 0:
            return self
        ref_dt = self.dt_s if self.dt_s is not None else dt_s
        if not 0.5 * ref_dt <= dt_s <= 2.0 * ref_dt:
            return self  # a forced extra decision or a stall: not the interval the fit is in
        busy = min(1.0, max(0.0, busy))
        phi = ((before_c - self.ref_c) / SCALE_C, 1.0, busy)
        # the instruments: the reading and busy share one interval earlier, whose noise is not in y (see the
        # module's docstring); where either jumped (a load starting, a back-off) it says little about this
        # interval's, and a weak instrument makes the fit unstable: the interval's own value stands in
        earlier = self.earlier_c if self.earlier_c is not None else before_c
        earlier_busy = self.earlier_busy if self.earlier_busy is not None else busy
        z = ((earlier if abs(earlier - before_c) <= INSTRUMENT_JUMP[0] else before_c) - self.ref_c) / SCALE_C, 1.0, \
            earlier_busy if abs(earlier_busy - busy) <= INSTRUMENT_JUMP[1] else busy
        y = after_c - before_c
        prior = self.theta if self.theta is not None else _prior(ref_dt)
        start = list(self.cov) if self.cov is not None else [PRIOR_VAR[0], 0, 0, 0, PRIOR_VAR[1], 0, 0, 0, PRIOR_VAR[2]]
        for i in range(3):
            start[4 * i] += DRIFT[i]
        error = y - sum(p * t for p, t in zip(phi, prior, strict=True))
        if self.identified and self.residual_c <= LOCK_FIT_C:
            # identified and fitting: the time constant and the gain are the device's; only the constant term
            # (the room, the fan) goes on being fitted. Closed-loop data around a hold say little about the
            # other two, and what they seem to say (noise the controller answered) drifts them
            k = start[4] / (NOISE_VAR + start[4])
            theta = (prior[0], prior[1] + k * error, prior[2])
            cov = tuple(v if i != 4 else (1 - k) * start[4] for i, v in enumerate(self.cov))
            return self._after(ref_dt, theta, cov, before_c, busy, after_c, error)
        theta, cov = _step(prior, start, phi, z, error)
        if cov is None:  # the instrumental step lost positive variances: the plain least-squares one
            theta, cov = _step(prior, start, phi, phi, error)
        if cov is None:
            return self
        return self._after(ref_dt, theta, cov, before_c, busy, after_c, error)

    def _after(self, ref_dt, theta, cov, before_c, busy, after_c, error) -> PlantModel:
        residual = math.sqrt(0.9 * self.residual_c ** 2 + 0.1 * error ** 2) if self.samples else abs(error)
        lo_t, hi_t = self.temp_span or (after_c, after_c)
        lo_u, hi_u = self.duty_span or (busy, busy)
        model = evolve(self, dt_s=ref_dt, theta=theta, cov=cov, samples=self.samples + 1,
                       temp_span=(min(lo_t, before_c, after_c), max(hi_t, before_c, after_c)),
                       duty_span=(min(lo_u, busy), max(hi_u, busy)), residual_c=residual, earlier_c=before_c,
                       earlier_busy=busy, operating_busy=busy if self.operating_busy is None else
                       0.9 * self.operating_busy + 0.1 * busy)
        model.__dict__["identified"] = model._identify()  # frozen: set once, here
        return model

    # -- what it says ----------------------------------------------------------------------------------
    @property
    def tau_s(self) -> float | None:
        if self.theta is None or self.dt_s is None:
            return None
        keep = 1.0 + self.theta[0] / SCALE_C  # a = exp(-dt / tau)
        if not 0.0 < keep < 1.0:
            return None
        return -self.dt_s / math.log(keep)

    @property
    def gain_c(self) -> float | None:
        """Degrees the steady state rises from idle to fully busy. At most what the operating point allows:
        the device idle cannot settle below the coolest reading seen (the room, at the coldest), so the steady
        state at the recent duty less that reading, per unit of that duty, bounds it. A gain read too high
        (closed-loop data say little about it) would make a small cut of the duty look like a large cooling."""
        if self.theta is None or self.theta[0] >= 0:
            return None
        raw = -SCALE_C * self.theta[2] / self.theta[0]
        if self.operating_busy is None or self.temp_span is None:
            return raw
        busy = max(self.operating_busy, 0.05)
        bound = (self._raw_steady(busy) - self.temp_span[0]) / busy
        return min(raw, bound) if bound > 0 else raw

    def _raw_steady(self, duty: float) -> float:
        c_temp, c_const, c_duty = self.theta
        return self.ref_c - SCALE_C * (c_const + c_duty * duty) / c_temp

    def steady_c(self, duty: float) -> float | None:
        """Where the device settles busy a ``duty`` share: the fit at the recent duty (where the data are), and
        the gain from there."""
        if self.theta is None or self.theta[0] >= 0:
            return None
        if self.operating_busy is None:
            return self._raw_steady(duty)
        return self._raw_steady(self.operating_busy) + self.gain_c * (duty - self.operating_busy)

    def _identify(self) -> bool:
        """Whether the fit is known well enough to act on (stored in ``identified`` by every update)."""
        tau, gain = self.tau_s, self.gain_c
        if tau is None or gain is None or self.samples < MIN_SAMPLES:
            return False
        if not (TAU_RANGE_S[0] <= tau <= TAU_RANGE_S[1]) or gain <= 0:
            return False
        span_t = self.temp_span[1] - self.temp_span[0] if self.temp_span else 0.0
        span_u = self.duty_span[1] - self.duty_span[0] if self.duty_span else 0.0
        if span_t < MIN_SPAN_C or span_u < MIN_DUTY_SPAN:
            return False
        # spans are not information: a one-interval dip of the duty moves the reading less than its 1 C step
        return all(math.sqrt(max(0.0, self.cov[4 * i])) <= REL_SD[i] * abs(self.theta[i]) for i in (0, 2))

    def forecast_c(self, temp_c: float, duty: float, horizon_s: float) -> float:
        """Temperature after ``horizon_s`` busy a ``duty`` share, from ``temp_c`` (identified models only)."""
        steady, tau = self.steady_c(duty), self.tau_s
        if steady is None or tau is None:
            raise ValueError("the plant model is not identified")
        return steady + (temp_c - steady) * math.exp(-horizon_s / tau)

    def duty_for(self, temp_c: float, target_c: float, horizon_s: float) -> float:
        """The busy share that brings ``temp_c`` to ``target_c`` in ``horizon_s`` (unclamped): at the target it
        is the duty that holds it there; below, more; above, less."""
        tau, gain, idle = self.tau_s, self.gain_c, self.steady_c(0.0)
        if tau is None or gain is None or idle is None or gain <= 0:
            raise ValueError("the plant model is not identified")
        keep = math.exp(-horizon_s / tau)
        steady = (target_c - temp_c * keep) / (1.0 - keep)
        return (steady - idle) / gain

    def describe(self) -> str:
        tau, gain, full = self.tau_s, self.gain_c, self.steady_c(1.0)
        if tau is None or gain is None or full is None:
            return f"plant model not identified ({self.samples} samples)"
        state = "identified" if self.identified else "not identified yet"
        return (f"plant model {state}: tau {tau:.1f} s, settles at {full:.1f} C flat out, {gain:.1f} C from idle to "
                f"full duty ({self.samples} samples, fit error {self.residual_c:.2f} C)")

    def summary(self) -> dict:
        return {"identified": self.identified, "tau_s": self.tau_s, "gain_c": self.gain_c,
                "steady_full_c": self.steady_c(1.0), "steady_idle_c": self.steady_c(0.0), "samples": self.samples,
                "fit_error_c": self.residual_c}


def _prior(dt_s: float) -> tuple[float, float, float]:
    """Settles at ref (the passive trip) at half duty, PRIOR_GAIN_C per unit of duty, PRIOR_TAU_S."""
    k = 1.0 - math.exp(-dt_s / PRIOR_TAU_S)
    return (-k * SCALE_C, k * (-0.5 * PRIOR_GAIN_C), k * PRIOR_GAIN_C)


def _step(theta, cov, phi, z, error):
    """One recursive (instrumental-variable) least-squares step; (theta, None) when it breaks down."""
    c0, c1, c2, c3, c4, c5, c6, c7, c8 = cov
    p_z = (c0 * z[0] + c1 * z[1] + c2 * z[2], c3 * z[0] + c4 * z[1] + c5 * z[2], c6 * z[0] + c7 * z[1] + c8 * z[2])
    phi_p = (phi[0] * c0 + phi[1] * c3 + phi[2] * c6, phi[0] * c1 + phi[1] * c4 + phi[2] * c7,
             phi[0] * c2 + phi[1] * c5 + phi[2] * c8)
    denom = NOISE_VAR + phi[0] * p_z[0] + phi[1] * p_z[1] + phi[2] * p_z[2]
    if denom <= 0:
        return theta, None
    gain = (p_z[0] / denom, p_z[1] / denom, p_z[2] / denom)
    new = tuple(cov[3 * i + j] - gain[i] * phi_p[j] for i in range(3) for j in range(3))
    if new[0] <= 0 or new[4] <= 0 or new[8] <= 0:
        return theta, None
    return (theta[0] + gain[0] * error, theta[1] + gain[1] * error, theta[2] + gain[2] * error), new
