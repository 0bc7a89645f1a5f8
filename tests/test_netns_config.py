"""Testbed pieces that need no root: CCA mapping, prefixes, the Weibull schedule, iperf3 reports."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from scidmz.plant.netns.manage.registry import check_prefix
from scidmz.plant.netns.spec import resolve_cca
from scidmz.plant.netns.spec import testbed_ccas as available_ccas
from scidmz.plant.netns.traffic.iperf import parse_iperf_json
from scidmz.plant.netns.traffic.sockflows import weibull_schedule


def test_bbr2_maps_to_bbr_with_a_warning_and_unknown_cca_is_an_error(caplog):
    if "bbr" not in available_ccas():
        pytest.skip("kernel without bbr")
    with caplog.at_level(logging.WARNING, logger="scidmz.testbed"):
        assert resolve_cca("bbr2", "dtn.cca") == "bbr"
    assert "bbr2 is not available" in caplog.text
    assert resolve_cca("cubic", "x") == "cubic"
    with pytest.raises(ValueError, match="'vegas' is not available"):
        resolve_cca("vegas", "campus.cca")


@pytest.mark.parametrize("bad", ["", "1abc", "UPPER", "waytoolongprefix", "a-b"])
def test_bad_prefixes_are_refused(bad):
    with pytest.raises(ValueError, match="prefix"):
        check_prefix(bad)
    assert check_prefix("sdz2") == "sdz2"


def test_weibull_schedule_is_seeded_and_clipped_to_table6_bounds():
    kw = dict(gap_shape=0.5, gap_scale=0.02, gap_min=0.001, gap_max=0.1,
              size_shape=0.5, size_scale=100e3, size_min=10e3, size_max=10e6)
    g1, s1 = weibull_schedule(np.random.default_rng(3), 5000, **kw)
    g2, s2 = weibull_schedule(np.random.default_rng(3), 5000, **kw)
    assert np.array_equal(g1, g2) and np.array_equal(s1, s2)
    assert g1.min() >= 0.001 and g1.max() <= 0.1 and s1.min() >= 10e3 and s1.max() <= 10e6
    # Weibull(k=0.5) x scale has median scale * ln(2)^2 (before clipping, which the median survives).
    assert np.median(s1) == pytest.approx(100e3 * np.log(2) ** 2, rel=0.1)


def test_iperf_report_parsing_and_errors():
    rep = ('{"end": {"sum_sent": {"bytes": 1000, "seconds": 2.0, "retransmits": 3},'
           ' "sum_received": {"bytes": 900, "seconds": 2.0},'
           ' "streams": [{"sender": {"mean_rtt": 10000}}], "sender_tcp_congestion": "bbr"}}')
    r = parse_iperf_json(rep)
    assert r["bytes_received"] == 900 and r["retransmits"] == 3 and r["cca"] == "bbr"
    assert r["mean_rtt"] == pytest.approx(0.01)
    with pytest.raises(RuntimeError, match="iperf3 failed: unable to connect"):
        parse_iperf_json('{"error": "unable to connect"}')
    with pytest.raises(ValueError, match="not JSON"):
        parse_iperf_json("garbage")
