"""`scidmz control run --plant netns --policy jenks`: Jenks queue separation live on BR1 (root).

The daemon runs the queue policy through the same runner as every policy: each period it
reads the kernel's per-flow table, Jenks groups the long flows by minimum RTT, and the
HTB on BR1's WAN port gives the DTN's queue the admin's target (rate = ceil).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

needs_root = [pytest.mark.root, pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")]


@needs_root[0]
@needs_root[1]
def test_control_run_netns_jenks_serves_the_target_through_br1_queues(tmp_path, capsys):
    from pyroute2 import netns

    from scidmz.cli import main

    before = set(netns.listnetns())
    log = tmp_path / "log.jsonl"
    assert main(["control", "run", "testbed", "--plant", "netns", "--policy", "jenks", "--target", "60M",
                 "--duration", "30", "--no-api", "--log", str(log), "--plant-opt", "telemetry=kernel",
                 "--set", "campus.hosts=4", "--set", "dtn.streams=4", "--set", "dtn.rtt=50ms",
                 "--set", "link.buffer_bdp=1", "--set", "shaper.enabled=false", "--set", "policy.queues=2",
                 "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["periods"] >= 25 and not summary["problems"], summary
    periods = [json.loads(x) for x in log.read_text().splitlines() if '"k"' in x and '"event"' not in x]
    assert all(not p["fallback"] for p in periods[2:]), [p["reason"] for p in periods if p["fallback"]]
    # the queue policy leaves the campus uplink open: the queues do the work
    assert all(p["u_policy"] == 100e6 for p in periods)
    # classified once the flows pass 10 MB (~12 s), then the DTN is held at its target
    late = np.array([p["y"]["rate_dtn"] for p in periods[20:]])
    assert 0.93 * 60e6 < late.mean() < 1.05 * 60e6, late
    assert set(netns.listnetns()) <= before  # the testbed is gone


def test_control_run_rejects_policy_options_for_a_policy_without_them(capsys):
    # no root needed: the options are refused before any plant is built
    from scidmz.cli import main

    assert main(["control", "run", "testbed", "--plant", "fluid", "--policy", "trivial", "--target", "60M",
                 "--set", "policy.queues=2", "--no-api", "--duration", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "takes no policy.* options" in err[0]
