"""ABC and FFS as bottleneck disciplines of the fluid plant."""

from __future__ import annotations

import numpy as np
import pytest

from scidmz.disciplines.abc import ABCConfig
from scidmz.disciplines.abc.fluid import fluid_accept
from scidmz.disciplines.base import DisciplineConfigError
from scidmz.disciplines.ffs import FFSConfig
from scidmz.plant.fluid import constants as c
from scidmz.plant.fluid.plant import FluidPlant
from scidmz.scenario import CampusConfig, DtnConfig, LinkConfig, Scenario

G = 1e9


def _abc_scenario(n_tcp: int, traffic: str = "long", cbr: float = 10e6) -> Scenario:
    """ABC paper section 6.1: 50 Mbit/s, 24-packet buffer, 20 ms RTT; user 0 = the 'dtn' flows."""
    return Scenario(name="abc-test", link=LinkConfig(capacity=50e6, buffer=24 * c.MSS),
                    dtn=DtnConfig(streams=n_tcp, rtt=0.02, cca="cubic"),
                    campus=CampusConfig(hosts=1, rtt=0.02, cca="cubic", traffic=traffic, udp_rate=cbr),
                    duration=100.0)


def _goodput(plant: FluidPlant, periods: int) -> np.ndarray:
    ys = np.array([plant.step(plant.scenario.capacity).y[0, :2] for _ in range(periods)])
    return ys[periods // 2:].mean(axis=0)


@pytest.mark.parametrize("exact", [True, False])
def test_ffs_table_ii_on_the_fluid_plant(exact: bool) -> None:
    # Wyss et al. Table II: 15 Gbit/s egress, streams (rate, FFS) (3, 6), (4, 1) on i1 and (16, 8) on i2
    sc = Scenario(name="table2", link=LinkConfig(capacity=15 * G, buffer=1e6), dtn=DtnConfig(streams=0),
                  campus=CampusConfig(hosts=3, rtt=0.02, traffic="udp"), duration=2.0, period=0.1)
    p = FluidPlant(sc)
    p.set_udp_rates(np.array([3.0, 4.0, 16.0]) * G)
    p.set_discipline(FFSConfig(capacity_bps=15 * G, matrix_col_bps=(7 * G, 8 * G)), groups=[0, 0, 1],
                     labels=np.array([6.0, 1.0, 8.0]) * G, exact=exact)
    p.reset(0)
    rates = []
    for _ in range(20):
        p.step(15 * G)
        rates.append(p.snapshot()["rate"][0])
    got = np.mean(rates[10:], axis=0) / G
    tol = 1e-6 if exact else 2e-3
    assert got == pytest.approx([3.0, 4.0 / 3.0, 32.0 / 3.0], rel=tol)
    assert p.discipline_state()["tau"][0] == pytest.approx(4.0 / 3.0, rel=tol)


def test_without_a_discipline_table_ii_is_proportional() -> None:
    sc = Scenario(name="table2", link=LinkConfig(capacity=15 * G, buffer=1e6), dtn=DtnConfig(streams=0),
                  campus=CampusConfig(hosts=3, rtt=0.02, traffic="udp"), duration=2.0, period=0.1)
    p = FluidPlant(sc)
    p.set_udp_rates(np.array([3.0, 4.0, 16.0]) * G)
    p.reset(0)
    for _ in range(10):
        p.step(15 * G)
    got = p.snapshot()["rate"][0] / G
    assert got == pytest.approx(np.array([3.0, 4.0, 16.0]) * 15 / 23, rel=0.01)


@pytest.mark.parametrize("n", [4, 8])
def test_abc_shares_the_link_between_users_not_flows(n: int) -> None:
    # ABC paper Fig. 5: user 0 with n TCP flows vs user 1 with one; ~25 Mbit/s each with ABC
    fifo = FluidPlant(_abc_scenario(n))
    fifo.reset(0)
    g_fifo = _goodput(fifo, 100)
    p = FluidPlant(_abc_scenario(n))
    p.set_discipline(ABCConfig(capacity_bps=50e6))
    p.reset(0)
    g_abc = _goodput(p, 100)
    assert g_fifo[0] / g_fifo.sum() > 0.7
    assert 0.4 < g_abc[0] / g_abc.sum() < 0.6
    assert g_abc.sum() > 0.95 * 50e6


def test_abc_time_step_resolves_the_thresholds() -> None:
    # thresholds are a few packets (0.24 ms each at 50 Mbit/s): the adaptive step (~4 ms) must give what
    # a 0.25 ms step gives -- fluid_accept solves each step exactly, so it does
    out = []
    for dt in (None, 0.00025):
        p = FluidPlant(_abc_scenario(1, "udp", 60e6), dt=dt)
        p.set_discipline(ABCConfig(capacity_bps=50e6))
        p.reset(0)
        out.append(_goodput(p, 60))
    assert out[0] == pytest.approx(out[1], rel=0.03, abs=0.5e6)


def test_fluid_accept_holds_the_queue_at_the_threshold() -> None:
    cap, dt = 1000.0, 1.0
    acc = np.zeros(1)
    # one aggregate at twice the link: rises to its threshold (100 B after 0.1 s), then held there
    q = fluid_accept(0.0, np.array([2000.0]), np.array([100.0]), cap, dt, acc)
    assert q == pytest.approx(100.0)
    assert acc[0] == pytest.approx(1100.0)
    acc = np.zeros(2)
    # two aggregates at 800 B/s each: both until 50 B (0.083 s), then only the higher threshold's
    q = fluid_accept(0.0, np.array([800.0, 800.0]), np.array([50.0, 500.0]), cap, dt, acc)
    t1 = 50.0 / 600.0
    assert acc[0] == pytest.approx(800.0 * t1 + (cap - 800.0) * (dt - t1))
    assert acc[1] == pytest.approx(800.0)
    assert q == pytest.approx(50.0)
    # a queue above the threshold refuses everything until it has drained to it (0.2 s), then accepts
    acc = np.zeros(1)
    q = fluid_accept(300.0, np.array([500.0]), np.array([100.0]), cap, dt, acc)
    assert acc[0] == pytest.approx(400.0) and q == pytest.approx(0.0)


def test_abc_reference_rates_differentiate_aggregates() -> None:
    # section 3.2: an aggregate with a larger R_r gets more under congestion (CBR vs CBR)
    sc = Scenario(name="abc-refs", link=LinkConfig(capacity=50e6, buffer=24 * c.MSS), dtn=DtnConfig(streams=0),
                  campus=CampusConfig(hosts=2, rtt=0.02, traffic="udp"), duration=60.0)
    out = []
    for refs in ((10e3, 10e3), (30e6, 10e6)):
        p = FluidPlant(sc)
        p.set_udp_rates([40e6, 40e6])
        p.set_discipline(ABCConfig(capacity_bps=50e6, ref_rates_bps=refs), groups=[0, 1])
        p.reset(0)
        for _ in range(40):
            p.step(50e6)
        out.append(p.snapshot()["rate"][0])
    assert out[0][0] == pytest.approx(out[0][1], rel=0.2)
    assert out[1][0] > 2.0 * out[1][1]


def test_discipline_bad_input_is_one_line() -> None:
    p = FluidPlant(_abc_scenario(2))
    with pytest.raises(ValueError, match="groups must be in"):
        p.set_discipline(ABCConfig(capacity_bps=50e6), groups=[0, 5, 1])
    with pytest.raises(ValueError, match="unknown bottleneck discipline"):
        p.set_discipline("red")
    with pytest.raises(DisciplineConfigError, match="label f"):
        p.set_discipline(FFSConfig(capacity_bps=50e6, matrix_col_bps=(25e6, 25e6)), labels=[1e6, 0.0, 1e6])
    with pytest.raises(ValueError, match="exact=True"):
        p.set_discipline(ABCConfig(capacity_bps=50e6), exact=True)
    with pytest.raises(ValueError, match="runs no bottleneck discipline"):
        p.set_discipline_weights([1e6, 1e6])
    p.set_discipline(ABCConfig(capacity_bps=50e6, buffer_pkts=100))
    with pytest.raises(ValueError, match="exceeds the scenario's bottleneck buffer"):
        p.reset(0)
    p.set_discipline(ABCConfig(capacity_bps=50e6))
    with pytest.raises(ValueError, match="no queue separation"):
        p.set_queues([1e5, 1e5])
    with pytest.raises(ValueError, match="weights must be finite"):
        p.set_discipline_weights([1e6, -1.0])
    with pytest.raises(DisciplineConfigError, match="R_r"):
        ABCConfig(capacity_bps=50e6, ref_rates_bps=(1e6, 0.0))


def _dmz_run(name: str, noise: bool = True, **options: float) -> tuple[FluidPlant, np.ndarray]:
    """The DTN's rate (bit/s per period) under a discipline policy whose target steps 30 -> 70 Mbit/s."""
    from scidmz.policies import make_policy
    from scidmz.runner import Episode

    sc = Scenario(name="dmz", link=LinkConfig(capacity=100e6, buffer_bdp=0.1),
                  dtn=DtnConfig(streams=2, rtt=0.05), campus=CampusConfig(hosts=4, rtt=0.01), duration=30.0)
    p = FluidPlant(sc, packet_noise=noise)
    ep = Episode(p, make_policy(name, **options))
    ep.reset(0)
    for target in (30e6,) * 15 + (70e6,) * 15:
        _, u = ep.step(target)
        assert u[0] == sc.u_max  # no shaper: the discipline serves the DTN
    return p, np.asarray(ep.history.y)[:, 0, 0]


@pytest.mark.parametrize(("name", "options"), [("abc", {}), ("ffs", {"capacity_frac": 0.95})])
def test_abc_policy_follows_the_target_through_the_runner(name: str, options: dict) -> None:
    p, dtn = _dmz_run(name, **options)
    c = options.get("capacity_frac", 1.0) * 100e6
    assert p.discipline_state()["weights"][0] == pytest.approx([0.7 * c, 0.3 * c])
    assert dtn[-7:].mean() > dtn[8:15].mean() + 5e6  # the DTN follows its raised target


def test_ffs_at_the_link_rate_loads_its_fifo_to_one() -> None:
    # FFS-C100 forwards exactly the link rate, so the FIFO behind it sits at load 1, where the packet
    # noise overflows it most (var / 2L); a full FIFO drops by arrivals, as drop-tail, and the 50 ms
    # DTN no longer follows its target. Without the noise (the deterministic fluid queue) it does.
    _, quiet = _dmz_run("ffs", noise=False)
    _, noisy = _dmz_run("ffs")
    assert quiet[-7:].mean() > quiet[8:15].mean() + 5e6
    assert noisy[-7:].mean() < 0.5 * quiet[-7:].mean()


def test_evaluate_runs_abc_and_ffs_on_the_paired_trials(tmp_path, capsys) -> None:
    import json

    from scidmz.cli import main

    assert main(["evaluate", "small-cubic", "--policies", "abc,ffs", "--quick", "--trials", "2",
                 "--experiments", "mrae,utilization", "--tracking-uri", str(tmp_path / "mlruns"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for exp in ("mrae", "utilization"):
        s = doc["results"][exp]
        assert set(s) >= {"abc", "ffs", "trivial"} and s["abc"]["n"] == s["ffs"]["n"] == 2
    assert main(["simulate", "small-cubic", "--policy", "ffs", "--set", "policy.capacity_frac=0.85",
                 "--duration", "10", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert doc["policy"] == "ffs" and doc["utilization"] < 0.9  # FFS-C85 keeps 15 % of the link free
    assert main(["simulate", "small-cubic", "--policy", "abc", "--set", "policy.bogus=1", "--duration", "5"]) == 2
    assert "unknown option" in capsys.readouterr().err
    assert main(["simulate", "small-cubic", "--policy", "ffs", "--set", "policy.capacity_frac=2",
                 "--duration", "5"]) == 2
    assert "capacity_frac" in capsys.readouterr().err


def test_ffs_rate_feedback_minloss_loses_almost_nothing() -> None:
    # FFS section IX: a sender pacing at the RI loses nothing alone and ~0.05-1 % with a second stream;
    # Cubic 0.58-3.32 % (10 MB transfers through FFS-C85)
    from scidmz.evaluation.disciplines.fluid import ffs_rate_feedback

    rows = {(r["cca"], r["streams"]): r for r in ffs_rate_feedback(("minloss", "cubic"), (10e6,))}
    assert rows[("minloss", 1)]["loss_pct"] == 0.0
    assert rows[("minloss", 2)]["loss_pct"] < 1.5
    assert rows[("cubic", 2)]["loss_pct"] > 5 * rows[("minloss", 2)]["loss_pct"]
    # both transfers finish, the two-stream one in about twice the time (equal shares of 42.5 Mbit/s)
    assert rows[("minloss", 2)]["fct_s"] == pytest.approx(2 * 10e6 * 8 * 1.046 / 42.5e6, rel=0.15)


def test_set_ccas_bad_input() -> None:
    p = FluidPlant(_abc_scenario(2))
    with pytest.raises(ValueError, match="one entry per flow"):
        p.set_ccas(["minloss"])
    with pytest.raises(ValueError, match="unknown congestion control 'vegas'"):
        p.set_ccas(["vegas", None, None])


def test_scenario_without_a_shaper_ignores_u() -> None:
    from scidmz.scenario import load_scenario

    sc = load_scenario("small-cubic").with_overrides(["shaper.enabled=false", "duration=20s"])
    assert sc.shaper.enabled is False
    shaped = FluidPlant(load_scenario("small-cubic"))
    open_ = FluidPlant(sc)
    out = []
    for p in (shaped, open_):
        p.reset(0)
        ys = np.array([p.step(5e6).y[0] for _ in range(20)])
        out.append(ys[10:, 1].mean())
    assert out[0] < 6e6 < 30e6 < out[1]  # u = 5 Mbit/s caps the shaped campus only
    with pytest.raises(ValueError, match="shaper.enabled: expected true or false"):
        load_scenario("small-cubic").with_overrides(["shaper.enabled=3"])
