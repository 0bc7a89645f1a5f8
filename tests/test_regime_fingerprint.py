"""A model trained in one regime or CCA warns, naming both, when used in another."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from scidmz.regime import fingerprint, mismatch
from scidmz.scenario import load_scenario


def test_fingerprint_tells_the_regimes_and_ccas_apart():
    sh, deep = fingerprint(load_scenario("paper-cubic")), fingerprint(load_scenario("paper-cubic-deep"))
    assert sh["regime"] == "shallow" and deep["regime"] == "deep"
    assert sh["buffer_bdp"] == pytest.approx(0.05) and deep["buffer_bdp"] == pytest.approx(1.0)
    # The dict form stored in dataset metadata gives the same fingerprint, also with an explicit buffer.
    sc = load_scenario("paper-bbr2")
    assert fingerprint(sc.to_dict()) == fingerprint(sc)
    explicit = sc.replace(link={"buffer": 0.05 * 1e9 * 0.1 / 8})
    assert fingerprint(explicit)["buffer_bdp"] == pytest.approx(0.05)
    assert mismatch(sh, load_scenario("paper-cubic")) is None


def test_mismatch_names_both_scenarios():
    msg = mismatch(fingerprint(load_scenario("paper-cubic-deep")), load_scenario("paper-bbr2"))
    assert "paper-cubic-deep" in msg and "paper-bbr2" in msg
    assert "regime" in msg and "dtn_cca" in msg


class _Predictor:
    n_features = 22
    per_unit = False

    def __init__(self, meta):
        self.meta = meta

    def __call__(self, X):
        return np.full(len(X), 5e8)


def test_mlc_warns_once_when_its_model_meets_another_regime():
    from scidmz.policies.rate.mlc import Gains, MLCPolicy

    pol = MLCPolicy(_Predictor({"scenario_fingerprint": fingerprint(load_scenario("paper-cubic-deep"))}),
                    Gains(0.3, 1.0, 1.0))
    with pytest.warns(UserWarning, match="paper-cubic-deep.*paper-cubic'"):
        pol.reset(load_scenario("paper-cubic"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pol.reset(load_scenario("paper-cubic"))  # said once per scenario
        MLCPolicy(_Predictor({"scenario_fingerprint": fingerprint(load_scenario("paper-cubic"))}),
                  Gains(0.3, 1.0, 1.0)).reset(load_scenario("paper-cubic"))
