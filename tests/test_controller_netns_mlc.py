"""`scidmz control run testbed --plant netns --policy mlc`: the MLC live on real kernel TCP (root).

No --model or --gains: the daemon runs the model and gains that ship with scidmz for the
`testbed` scenario, the ones `scidmz reproduce mlc --plant netns` produced
(src/scidmz/datasets/README.md). The test checks the live path: the daemon builds the
testbed, the MLC decides u every period from data-plane telemetry within its saturator band,
no fallback once running, real DTN traffic, and everything is torn down.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

pytestmark = [pytest.mark.root, pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")]


def test_control_run_netns_mlc_uses_the_shipped_model_decides_every_period_and_tears_down(tmp_path, capsys):
    from pyroute2 import netns

    from scidmz.cli import main
    from scidmz.datasets import shipped_model
    from scidmz.policies.rate.mlc import Gains
    from scidmz.scenario import load_scenario

    sc = load_scenario("testbed")
    model_dir, gains_file = shipped_model(sc)
    gains = Gains.load(gains_file)
    before = set(netns.listnetns())
    log = tmp_path / "log.jsonl"
    assert main(["control", "run", "testbed", "--plant", "netns", "--policy", "mlc",
                 "--target", "50M", "--duration", "12", "--no-api", "--log", str(log),
                 "--set", "campus.hosts=4", "--json"]) == 0
    out = capsys.readouterr()
    assert f"using the model and gains shipped for 'testbed' ({model_dir})" in out.err
    summary = json.loads(out.out.strip().splitlines()[-1])
    assert summary["periods"] >= 8 and not summary["problems"]
    periods = [json.loads(x) for x in log.read_text().splitlines() if '"k"' in x and '"event"' not in x]
    assert periods[0]["target"] == 50e6
    steady = periods[3:]
    assert steady and all(not p["fallback"] for p in steady), [p["reason"] for p in steady if p["fallback"]]
    u_pol = np.array([p["u_policy"] for p in steady])
    trivial = sc.capacity - 50e6
    # The MLC refines the trivial setting within its +-Delta_u band (Fig. 5; the shipped gains' Delta_u).
    assert np.all(np.isfinite(u_pol)) and np.all(np.abs(u_pol - trivial) <= gains.delta_u * sc.capacity + 1)
    assert np.mean([p["y"]["rate_dtn"] for p in steady]) > 20e6  # real DTN traffic flowed
    assert set(netns.listnetns()) <= before  # the testbed is gone
