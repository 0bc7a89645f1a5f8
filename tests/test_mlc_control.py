"""MLC control law (eq. 1, Table 3), anti-windup PI (Fig. 5), gains and the NaN fallback."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from scidmz.identification.regressors import FEATURE_NAMES
from scidmz.policies.rate.mlc import AntiWindupPI, Gains, MLCPolicy, desired_state
from scidmz.scenario import load_scenario
from scidmz.state import History

SC = load_scenario("small-cubic")  # B_max = 100 Mbit/s
C = SC.capacity


# -- Table 3 ------------------------------------------------------------------------


def test_desired_state_table3() -> None:
    yd = desired_state(np.array([60e6, 20e6]), C, np.array([18.0, 5.0]), rtt_dtn=0.1, rtt_campus=0.01)
    assert yd.shape == (2, 7)
    np.testing.assert_allclose(yd[0], [60e6, 40e6, 0.1, 0.01, 0.0, 0.0, 18.0])
    np.testing.assert_allclose(yd[1], [20e6, 80e6, 0.1, 0.01, 0.0, 0.0, 5.0])


@pytest.mark.parametrize("bad", [150e6, -1.0, float("nan")])
def test_desired_state_rejects_bad_target(bad: float) -> None:
    with pytest.raises(ValueError, match="target"):
        desired_state(bad, C, 10.0)


# -- gains ----------------------------------------------------------------------------


def test_gains_round_trip(tmp_path) -> None:
    g = Gains(0.285, 1.486, 1.565, delta_u=0.2)
    p = g.save(tmp_path / "g.json", extra={"scenario": "x"})
    assert Gains.load(p) == g
    assert Gains.load(tmp_path / "g.json") == g
    (tmp_path / "d").mkdir()
    g.save(tmp_path / "d" / "gains.json")
    assert Gains.load(tmp_path / "d") == g  # a directory holding gains.json


@pytest.mark.parametrize("vals", [(-0.1, 1, 1), (1, float("nan"), 1), (1, 1, float("inf")), (1, 1, "x")])
def test_gains_reject_negative_or_nonfinite(vals) -> None:
    with pytest.raises(ValueError, match="gain"):
        Gains(*vals)


def test_gains_load_errors(tmp_path) -> None:
    p = tmp_path / "g.json"
    p.write_text(json.dumps({"kp": 1.0, "ki": -2.0, "kw": 1.0}))
    with pytest.raises(ValueError, match="ki must be >= 0"):
        Gains.load(p)
    p.write_text(json.dumps({"kp": 1.0}))
    with pytest.raises(ValueError, match="missing gain"):
        Gains.load(p)
    p.write_text("{not json")
    with pytest.raises(ValueError, match="invalid JSON"):
        Gains.load(p)
    with pytest.raises(FileNotFoundError):
        Gains.load(tmp_path / "nope.json")


# -- anti-windup PI ---------------------------------------------------------------------


def _pi(kp: float, ki: float, kw: float, delta: float = 1e9, batch: int = 1) -> AntiWindupPI:
    return AntiWindupPI(Gains(kp, ki, kw), u_min=0.0, u_max=100.0, delta_u=delta, period=1.0, batch=batch)


def test_sign_convention_dtn_below_target_lowers_campus_rate() -> None:
    pi = _pi(0.5, 0.2, 1.0)
    u = pi.step(np.array([50.0]), np.array([-10.0]), np.array([50.0]))  # e = y - y_d < 0
    assert u[0] < 50.0
    pi = _pi(0.5, 0.2, 1.0)
    u = pi.step(np.array([50.0]), np.array([+10.0]), np.array([50.0]))
    assert u[0] > 50.0


def test_change_limit_and_bounds() -> None:
    pi = _pi(5.0, 0.0, 0.0, delta=3.0)
    u_prev = np.array([50.0])
    for _ in range(30):
        u = pi.step(np.array([50.0]), np.array([-100.0]), u_prev)
        assert abs(u[0] - u_prev[0]) <= 3.0 + 1e-12
        assert 0.0 <= u[0] <= 100.0
        u_prev = u
    assert u_prev[0] == 0.0  # reached and held the lower saturation


def _saturate_then_recover(kw: float) -> tuple[float, int]:
    """Drive u into the lower limit for 50 periods, then reverse the error; return (|I| peak, periods to leave)."""
    pi = _pi(0.2, 0.5, kw)
    u = np.array([50.0])
    peak = 0.0
    for _ in range(50):
        u = pi.step(np.array([50.0]), np.array([-20.0]), u)
        peak = max(peak, abs(float(pi.integral[0])))
    assert u[0] == 0.0
    for k in range(1, 500):
        u = pi.step(np.array([50.0]), np.array([+20.0]), u)
        if u[0] > 0.0:
            return peak, k
    return peak, 500


def test_integrator_does_not_wind_up_while_saturated_and_recovers_fast() -> None:
    peak_aw, leave_aw = _saturate_then_recover(kw=1.0)
    peak_no, leave_no = _saturate_then_recover(kw=0.0)
    # Without back-calculation the integral grows by Ki*e every period (50 x 0.5 x 20 = 500).
    assert peak_no == pytest.approx(500.0)
    # With it, the integral settles where u_bar sits at the limit (bounded, independent of time).
    assert peak_aw < 100.0
    assert leave_aw <= 3
    assert leave_no > 5 * leave_aw


def test_per_instance_gains_vectorised() -> None:
    pi = AntiWindupPI([Gains(0, 0, 0), Gains(1, 0, 0)], 0.0, 100.0, 1e9, batch=2)
    u = pi.step(np.array([50.0, 50.0]), np.array([-10.0, -10.0]), np.array([50.0, 50.0]))
    np.testing.assert_allclose(u, [50.0, 40.0])
    with pytest.raises(ValueError, match="3 gain sets"):
        AntiWindupPI([Gains(0, 0, 0)] * 3, 0.0, 100.0, 1e9, batch=2)


# -- MLCPolicy ---------------------------------------------------------------------------


class _Echo:
    """A stand-in inverse model recording its inputs and answering B_max - y_d,DTN (absolute units)."""

    n_features = 22
    per_unit = False

    def __init__(self, out: float | None = None) -> None:
        self.out = out
        self.seen: list[np.ndarray] = []

    def __call__(self, X: np.ndarray) -> np.ndarray:
        self.seen.append(X.copy())
        if self.out is not None:
            return np.full(X.shape[0], self.out)
        return C - X[:, 0]


def _history(rates_dtn: list[float], us: list[float], af: float = 18.0) -> History:
    y0 = np.array([[0.0, 0.0, 0.1, 0.01, 0.0, 0.0, 0.0]])
    h = History(y0)
    for rd, u in zip(rates_dtn, us, strict=True):
        h.append(np.array([u]), np.array([[rd, C - rd, 0.12, 0.02, 0.01, 0.01, af]]), np.array([60e6]))
    return h


def test_policy_feeds_eq1_features_in_order() -> None:
    model = _Echo()
    pol = MLCPolicy(model, Gains(0.0, 0.0, 0.0, delta_u=1.0))
    pol.reset(SC, 1)
    h = _history([50e6, 55e6], [45e6, 42e6], af=17.0)
    u = pol.decide(h, np.array([60e6]))
    X = model.seen[-1]
    assert X.shape == (1, len(FEATURE_NAMES))
    np.testing.assert_allclose(X[0, :7], [60e6, 40e6, SC.dtn.rtt, SC.campus.rtt, 0, 0, 17.0])  # y_d(t)
    assert X[0, 7] == 55e6 and X[0, 14] == 50e6  # y(t-T), y(t-2T) DTN rates
    assert X[0, 21] == 42e6  # u(t-T)
    assert u[0] == pytest.approx(40e6)  # zero gains: u = u_hat


def test_policy_lowers_campus_rate_when_dtn_below_target() -> None:
    pol = MLCPolicy(_Echo(), Gains(0.5, 0.5, 1.0, delta_u=0.5))
    pol.reset(SC, 1)
    u = pol.decide(_history([40e6, 40e6], [40e6, 40e6]), np.array([60e6]))
    assert u[0] < 40e6  # the trivial rate would be 40 Mbit/s
    pol.reset(SC, 1)
    u = pol.decide(_history([80e6, 80e6], [40e6, 40e6]), np.array([60e6]))
    assert u[0] > 40e6


def test_nan_from_model_falls_back_to_trivial_and_warns_once() -> None:
    pol = MLCPolicy(_Echo(out=float("nan")), Gains(0.3, 1.0, 1.0))
    pol.reset(SC, 1)
    h = _history([40e6], [40e6])
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        u1 = pol.decide(h, np.array([70e6]))
        u2 = pol.decide(h, np.array([70e6]))
    assert u1[0] == pytest.approx(30e6) and u2[0] == pytest.approx(30e6)
    assert np.all(np.isfinite(pol.pi.integral))
    assert pol.fallbacks == 2
    assert sum("non-finite" in str(w.message) for w in rec) == 1


def test_width_mismatch_is_a_clear_error() -> None:
    class Narrow(_Echo):
        n_features = 21

    with pytest.raises(ValueError, match="21 input features"):
        MLCPolicy(Narrow(), Gains(0, 0, 0))


def test_policy_needs_reset() -> None:
    pol = MLCPolicy(_Echo(), Gains(0, 0, 0))
    with pytest.raises(RuntimeError, match="reset"):
        pol.decide(_history([1.0], [1.0]), np.array([1.0]))


def test_band_limiter_bounds_deviation_from_trivial_and_follows_target_steps() -> None:
    # A wildly wrong model: the band keeps u within Delta_u of B_max - R*, even right after a target step.
    pol = MLCPolicy(_Echo(out=0.0), Gains(0.0, 0.0, 0.0, delta_u=0.05, limiter="band"))
    pol.reset(SC, 1)
    h = _history([60e6, 60e6], [40e6, 40e6])
    u = pol.decide(h, np.array([20e6]))  # target stepped 60 -> 20 Mbit/s: trivial 80 Mbit/s
    assert u[0] == pytest.approx(80e6 - 0.05 * C)


def test_rate_limiter_is_a_slew_limit_with_bumpless_start() -> None:
    pol = MLCPolicy(_Echo(out=0.0), Gains(0.0, 0.0, 0.0, delta_u=0.05, limiter="rate"))
    pol.reset(SC, 1)
    h = History(np.zeros((1, 7)))
    u0 = pol.decide(h, np.array([60e6]))  # first decision: around the trivial 40 Mbit/s, not B_max
    assert u0[0] == pytest.approx(40e6 - 0.05 * C)
    h.append(u0, np.array([[60e6, 40e6, 0.1, 0.01, 0, 0, 18]]), np.array([60e6]))
    u1 = pol.decide(h, np.array([60e6]))
    assert u1[0] == pytest.approx(u0[0] - 0.05 * C)


def test_gains_limiter_validated_and_saved(tmp_path) -> None:
    with pytest.raises(ValueError, match="limiter"):
        Gains(0.1, 0.1, 0.1, limiter="nope")
    g = Gains(0.1, 0.2, 0.3, 0.07, "rate")
    assert Gains.load(g.save(tmp_path / "g.json")) == g
