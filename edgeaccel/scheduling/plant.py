"""A first-order thermal model of one device, identified online from its readings and the work it was given.

    T[k+1] - T[k] = (1 - a) (T_ss(u) - T[k]),    T_ss(u) = T_idle + gain * u,    a = exp(-dt / tau)

``u`` is the share of the interval the device was busy (what the duty cap let through, as measured), ``tau``
the thermal time constant, ``T_ss(u)`` where the device settles when kept that busy. An RC board, a heat sink,
an SoC die all look like this to within a few degrees over seconds to minutes; what it gets wrong (a second
time constant, the kernel slowing the device above its passive trip) the fit absorbs locally, because old
samples are forgotten (``FORGET`` per sample: about four minutes of memory at two samples a second).

Fitted by exponentially weighted least squares on ``y = T[k+1] - T[k]`` against ``(T[k] - ref) / 10, 1, u``
(scaled so the normal equations are well conditioned), with a weak ridge pull toward a prior: while the data
say nothing about a direction (a device held at one duty says nothing about how the temperature depends on the
duty) the estimate in that direction drifts to the prior instead of to noise. The model counts as identified
once it has seen the temperature move (``MIN_SPAN_C``) and the duty vary (``MIN_DUTY_SPAN``), and its
parameters are physical (a positive time constant, a positive gain). Pure data: every update returns a new one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

FORGET = 0.996  # per sample
RIDGE = 0.05  # pull toward the prior, in units of one sample's information
MIN_SAMPLES = 12
MIN_SPAN_C = 4.0  # the readings must have moved this much for the time constant to mean anything
MIN_DUTY_SPAN = 0.25  # ...and the busy share this much for the gain to
TAU_RANGE_S = (0.5, 3600.0)
SCALE_C = 10.0
PRIOR_TAU_S = 30.0
PRIOR_GAIN_C = 40.0


@dataclass(frozen=True)
class PlantModel:
    ref_c: float  # temperature the regressor is centred on (the passive trip, or the first reading)
    dt_s: float | None = None  # the sample interval the fit is in (the first one seen)
    sums: tuple[float, ...] = (0.0,) * 9  # weighted sum of phi phi^T, row-major
    rhs: tuple[float, float, float] = (0.0, 0.0, 0.0)  # weighted sum of phi y
    theta: tuple[float, float, float] | None = None  # (c_temp, c_const, c_duty)
    samples: int = 0
    temp_span: tuple[float, float] | None = None  # lowest and highest reading fitted
    duty_span: tuple[float, float] | None = None
    residual_c: float = 0.0  # RMS of the one-step prediction error (EWMA)

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
        y = after_c - before_c
        residual = self.residual_c
        if self.theta is not None:
            error = y - sum(p * t for p, t in zip(phi, self.theta))
            residual = math.sqrt(0.9 * residual ** 2 + 0.1 * error ** 2) if self.samples else abs(error)
        sums = tuple(FORGET * s + phi[i // 3] * phi[i % 3] for i, s in enumerate(self.sums))
        rhs = tuple(FORGET * r + p * y for r, p in zip(self.rhs, phi))
        lo_t, hi_t = self.temp_span or (after_c, after_c)
        lo_u, hi_u = self.duty_span or (busy, busy)
        model = replace(self, dt_s=ref_dt, sums=sums, rhs=rhs, samples=self.samples + 1,
                        temp_span=(min(lo_t, before_c, after_c), max(hi_t, before_c, after_c)),
                        duty_span=(min(lo_u, busy), max(hi_u, busy)), residual_c=residual)
        return replace(model, theta=model._solve())

    def _prior(self, dt_s: float) -> tuple[float, float, float]:
        k = 1.0 - math.exp(-dt_s / PRIOR_TAU_S)
        # settles at ref (the passive trip) at half duty, PRIOR_GAIN_C per unit of duty
        return (-k * SCALE_C, k * (-0.5 * PRIOR_GAIN_C), k * PRIOR_GAIN_C)

    def _solve(self) -> tuple[float, float, float] | None:
        prior = self._prior(self.dt_s or 0.5)
        m = [list(self.sums[0:3]), list(self.sums[3:6]), list(self.sums[6:9])]
        b = list(self.rhs)
        for i in range(3):
            m[i][i] += RIDGE
            b[i] += RIDGE * prior[i]
        return _solve3(m, b)

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
        """Degrees the steady state rises from idle to fully busy."""
        if self.theta is None or self.theta[0] >= 0:
            return None
        return -SCALE_C * self.theta[2] / self.theta[0]

    def steady_c(self, duty: float) -> float | None:
        if self.theta is None or self.theta[0] >= 0:
            return None
        c_temp, c_const, c_duty = self.theta
        return self.ref_c - SCALE_C * (c_const + c_duty * duty) / c_temp

    @property
    def identified(self) -> bool:
        tau, gain = self.tau_s, self.gain_c
        if tau is None or gain is None or self.samples < MIN_SAMPLES:
            return False
        if not (TAU_RANGE_S[0] <= tau <= TAU_RANGE_S[1]) or gain <= 0:
            return False
        span_t = self.temp_span[1] - self.temp_span[0] if self.temp_span else 0.0
        span_u = self.duty_span[1] - self.duty_span[0] if self.duty_span else 0.0
        return span_t >= MIN_SPAN_C and span_u >= MIN_DUTY_SPAN

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


def _solve3(m: list[list[float]], b: list[float]) -> tuple[float, float, float] | None:
    """Gaussian elimination with partial pivoting; None when singular."""
    a = [row[:] + [v] for row, v in zip(m, b)]
    for col in range(3):
        pivot = max(range(col, 3), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-12:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(col + 1, 3):
            f = a[r][col] / a[col][col]
            for c in range(col, 4):
                a[r][c] -= f * a[col][c]
    x = [0.0, 0.0, 0.0]
    for r in (2, 1, 0):
        x[r] = (a[r][3] - sum(a[r][c] * x[c] for c in range(r + 1, 3))) / a[r][r]
    return (x[0], x[1], x[2])
