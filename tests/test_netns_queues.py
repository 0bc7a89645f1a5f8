"""Jenks queue separation on the netns testbed: BR1's WAN port becomes a real HTB, driven by the runner."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from scidmz.scenario import load_scenario

pytestmark = pytest.mark.root


def _scenario():
    # No campus shaper (TBF held at B_max): the border router's queues alone serve the DTN.
    return load_scenario("testbed").replace(
        campus={"hosts": 4, "rtt": 0.01}, link={"capacity": 100e6, "buffer_bdp": 1.0},
        dtn={"streams": 4, "rtt": 0.05}, shaper={"enabled": False}, duration=40.0,
    )


@pytest.mark.parametrize("telemetry", ["kernel", "dataplane"])
def test_jenks_on_br1_separates_the_dtn_and_serves_its_target(telemetry: str) -> None:
    from scidmz.plant.base import make_plant
    from scidmz.policies import make_policy
    from scidmz.policies.queue.jenks import CLASS_QID0
    from scidmz.runner import Episode

    sc = _scenario()
    target = 60e6
    steps = 34
    plant = make_plant("netns", sc, prefix="tjq", telemetry=telemetry)
    try:
        ep = Episode(plant, make_policy("jenks", queues=2))
        ep.reset(1)
        dtn_ip = [h.ip for h in plant.testbed.senders if h.kind == "dtn"][0]
        tables, served = [], []
        for _ in range(steps):
            ep.step(target)
            tables.append(plant.flows()[0])
            cfg = plant.queue_actuator.current()  # read back from the kernel
            # the DTN's flows alone in a Jenks class queue holding the target, rate = ceil -- *all* of
            # them: the policy moves each stream once it passes the long-flow mark, and until the
            # last one has moved, the others still leave through the default queue (ceil B_max)
            qs = {r.queue for r in cfg.rules if r.match.src == dtn_ip}
            others = {r.queue for r in cfg.rules if r.match.src != dtn_ip}
            ports = {sp for sp, role in zip(tables[-1]["sport"], tables[-1]["role"], strict=True) if role == "dtn"}
            ruled = {r.match.sport for r in cfg.rules if r.match.src == dtn_ip}
            every = len(ports) == sc.dtn.streams and (None in ruled or ports <= ruled)
            ok = every and len(qs) == 1 and not (qs & others) and min(qs) >= CLASS_QID0
            served.append(ok and cfg.queue(min(qs)).rate == pytest.approx(target, rel=0.01)
                          and cfg.queue(min(qs)).ceil == pytest.approx(target, rel=0.01))
        y = np.asarray(ep.history.y)[:, 0, :]
        ns, dev = plant.testbed.spec.bottleneck[1], plant.testbed.spec.bottleneck[0]
        tc = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "show", "dev", dev],
                            capture_output=True, text=True, check=True).stdout
    finally:
        plant.close()

    last = tables[-1]
    assert set(last["role"]) == {"dtn", "campus"}
    assert sum(r == "dtn" for r in last["role"]) == 4
    # the RTTs tell the two groups apart (50 ms vs 10 ms base RTTs): the kernel's windowed minimum,
    # or the data plane's RTT samples (incl. the queues, small once separated)
    key = "min_rtt" if telemetry == "kernel" else "rtt"
    dmin = [m for m, r in zip(last[key], last["role"], strict=True) if r == "dtn"]
    cmin = [m for m, r in zip(last[key], last["role"], strict=True) if r == "campus"]
    assert min(dmin) > 0.045 and max(cmin) < 0.03
    assert "htb" in tc and "bfifo" in tc and "tbf" not in tc
    # Flows are classified once they pass the data plane's 10 MB long-flow mark (~12 s here; when
    # depends on how fast the DTN's streams ramp up), each stream on its own. From the period in
    # which the last one moved (k0), the DTN is served.
    why = (f"served {served}; queues {[(q.qid, q.rate, q.ceil) for q in cfg.queues]}; "
           f"rules {[(r.match.src, r.match.sport, r.queue) for r in cfg.rules]}; roles {last['role']} "
           f"long {last['long_flow']}; y_dtn {np.round(y[:, 0] / 1e6, 1).tolist()}")
    assert served[-1], why
    k0 = steps - served[::-1].index(False) if False in served else 0
    assert k0 <= 26, why
    # Measured on the kernel: the DTN at its target, the campus queue borrowing the rest. Period k0
    # still carries what the default queue held when the last stream left it (its bfifo, up to
    # ~190 kB: +1.5 to +4 Mbit/s measured), so the window starts a period later, with one to spare.
    after = y[k0 + 2:]
    assert 0.95 * target < after[:, 0].mean() < 1.03 * target, after[:, :2]
    assert (after[:, 0] + after[:, 1]).mean() > 0.95 * sc.capacity


def test_netns_queues_bad_input() -> None:
    from scidmz.plant.netns.plant import NetnsPlant

    plant = NetnsPlant(_scenario(), prefix="tjx")
    try:
        with pytest.raises(RuntimeError, match="before reset"):
            plant.flows()
        with pytest.raises(ValueError, match="batch of 1"):
            plant.apply_queues([None, None])
    finally:
        plant.close()


def test_delay_calibration_never_takes_a_busy_machine_for_the_path(monkeypatch) -> None:
    """Probes slowed by a busy machine (12 ms on a 50 ms path) are repeated, the lowest kept, and the offset taken
    off the holds is capped at MAX_PATH_OFFSET: a late probe cannot shorten a path's RTT."""
    from types import SimpleNamespace

    from scidmz.plant.netns import probe
    from scidmz.plant.netns.testbed import MAX_PATH_OFFSET, Testbed

    tb = object.__new__(Testbed)
    dtn = SimpleNamespace(name="dtn", rtt=0.05, shaped=False)
    campus = SimpleNamespace(name="c1", rtt=0.01, shaped=True)
    tb.spec, tb.path_offset = SimpleNamespace(paths=[campus, dtn], dtn=dtn), {"campus": 0.0, "dtn": 0.0}
    rounds = {"dtn": [0.062, 0.0615, 0.0618], "c1": [0.013, 0.0104]}
    calls: list[str] = []

    def fake(_tb, name, probes, gap):
        calls.append(name)
        return {"min": rounds[name].pop(0)}

    monkeypatch.setattr(probe, "measure_rtt", fake)
    monkeypatch.setattr(Testbed, "_restart_delay_stage", lambda self: None)
    off = tb.calibrate_delay()
    assert calls == ["c1", "c1", "dtn", "dtn", "dtn"]  # campus settled on its 2nd round; the DTN never did
    assert off["campus"] == pytest.approx(0.0004) and off["dtn"] == MAX_PATH_OFFSET
