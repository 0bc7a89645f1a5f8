"""The scenario's ``[[flows]]`` on the netns testbed: one real host per flow, per-host CCA, start/stop,
rate schedules, a fixed-size flow's FCT, UDP beside TCP."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from scidmz.scenario import Scenario, load_scenario

pytestmark = pytest.mark.root


def _scenario() -> Scenario:
    base = load_scenario("testbed").replace(
        campus={"hosts": 0, "short_flow_senders": 0}, dtn={"streams": 0, "rtt": 0.04},
        link={"capacity": 50e6, "buffer_bdp": 1.0}, shaper={"enabled": False}, duration=12.0)
    d = base.to_dict()
    d["flows"] = [
        {"name": "near", "rtt": "10ms", "shaped": False},
        {"name": "capped", "rtt": "40ms", "cca": "bbr", "rate": "20M", "schedule": [["6s", "5M"]], "shaped": False},
        {"name": "sized", "rtt": "20ms", "size": "4MB", "start": "2s"},
        {"name": "cbr", "cca": "udp", "rate": "8M", "start": "3s", "stop": "9s", "schedule": [["6s", "15M"]],
         "shaped": False},
    ]
    return Scenario.from_dict(d, source="test")


def test_flows_run_as_scheduled_on_real_hosts() -> None:
    from scidmz.plant.netns.plant import NetnsPlant

    sc = _scenario()
    rates, udp_rows, ss = [], [], ""
    with NetnsPlant(sc, prefix="tnf", telemetry="kernel") as plant:
        plant.reset(0)
        hosts = {h.flow.name: h for h in plant.flow_hosts}
        for k in range(1, 13):
            plant.step(sc.capacity)
            rates.append(plant.info["flow_rate"][0] / 1e6)
            tab = plant.flows()[0]
            udp_rows.append([(s, sp) for s, p, sp in zip(tab["src"], tab["proto"], tab["sport"], strict=True)
                             if p == 17])
            if k == 4:
                ss = subprocess.run(["ip", "netns", "exec", hosts["capped"].ns, "ss", "-tin"],
                                    capture_output=True, text=True, check=True).stdout
        rec = plant.flow_records().set_index("name")
        prefix_ns = plant.testbed.ns("")
    r = np.array(rates)  # row k-1 = period (k-1, k] s
    near, capped, sized, cbr = r.T
    assert "bbr" in ss  # the capped flow's socket runs its own CCA
    # Access link: 20 Mbit/s, then 5 Mbit/s from the boundary at 6 s on.
    assert 8 < capped[2:6].mean() <= 21 and capped[7:].max() <= 5.6
    # UDP: off until 3 s, 8 Mbit/s, 15 Mbit/s from 6 s, nothing after its stop at 9 s.
    assert cbr[:3].max() < 0.1
    assert cbr[4:6].mean() == pytest.approx(8.0, rel=0.15)
    assert cbr[7:9].mean() == pytest.approx(15.0, rel=0.15)
    assert cbr[10:].max() < 0.1
    # The UDP flow is in the policy's flow table while it sends, with its real source port.
    assert udp_rows[5] and all(sp > 0 for _, sp in udp_rows[5]) and not udp_rows[11]
    # Fixed size: started at its 2 s boundary and delivered whole.
    assert rec.loc["sized", "start"] == 2.0 and bool(rec.loc["sized", "ok"])
    assert 4e6 * 8 / 50e6 < rec.loc["sized", "fct"] < 10
    assert np.isnan(sized[:2]).sum() == 0 and sized[:2].max() < 0.1
    assert near[1:].min() > 5 and (r.sum(axis=1) <= 50 * 1.03).all()
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert prefix_ns not in left
