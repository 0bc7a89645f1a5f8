"""The scenario's ``[[flows]]`` section: per-flow RTT, CCA, start/stop, size, rate schedule, UDP."""

from __future__ import annotations

import numpy as np
import pytest

from scidmz.plant.fluid import constants as c
from scidmz.plant.fluid.plant import FluidPlant
from scidmz.scenario import Scenario, load_scenario


def _scenario(flows: list[dict], **kw) -> Scenario:
    base = load_scenario("small-cubic").replace(
        campus={"hosts": kw.pop("hosts", 0)}, dtn={"streams": kw.pop("streams", 0)},
        link={"capacity": 100e6, "buffer_bdp": 1.0}, shaper={"enabled": False}, duration=60.0)
    d = base.to_dict()
    d["flows"] = flows
    return Scenario.from_dict(d, source="test")


def test_parse_round_trip_and_units() -> None:
    sc = _scenario([{"name": "far", "count": 2, "rtt": "60ms", "cca": "bbr", "schedule": [["30s", "5M"]]},
                    {"name": "cbr", "cca": "udp", "rate": "20M", "start": "10s", "stop": "50s", "shaped": False},
                    {"name": "x", "size": "10MB"}])
    far, cbr, x = sc.flows
    assert (far.count, far.rtt, far.cca, far.schedule) == (2, 0.06, "bbr", ((30.0, 5e6),))
    assert (cbr.rate, cbr.start, cbr.stop, cbr.shaped) == (20e6, 10.0, 50.0, False)
    assert x.size == 10e6 and x.rtt == 0.01
    assert Scenario.from_dict(sc.to_dict()).flows == sc.flows
    assert sc.with_overrides(["link.capacity=200M"]).flows == sc.flows


def test_flows_from_a_toml_file(tmp_path) -> None:
    f = tmp_path / "jenks-test1.toml"
    f.write_text('name = "t1"\n[dtn]\nstreams = 0\n[campus]\nhosts = 0\n'
                 '[[flows]]\nrtt = "2ms"\n[[flows]]\nrtt = "60ms"\ncca = "bbr"\n')
    sc = load_scenario(f)
    assert [g.rtt for g in sc.flows] == [0.002, 0.06]


@pytest.mark.parametrize("flow, msg", [
    ({"cca": "udp"}, "needs its sending rate"),
    ({"count": 0}, "count must be >= 1"),
    ({"rtt": "0ms"}, "rtt must be > 0"),
    ({"cca": "vegas"}, "cca must be one of"),
    ({"start": "5s", "stop": "1s"}, "stop must be after start"),
    ({"schedule": [["2s", "1M"], ["1s", "2M"]]}, "schedule times must increase"),
    ({"schedule": [["1s"]]}, r"must be a \[time, rate\] pair"),
    ({"schedule": "fast"}, "array of"),
    ({"size": "-1MB"}, "size"),
    ({"bogus": 1}, "unknown scenario key 'flows\\[0\\].bogus'"),
])
def test_bad_entries_get_one_line(flow, msg) -> None:
    with pytest.raises(ValueError, match=msg) as e:
        _scenario([flow])
    assert "\n" not in str(e.value)


def test_fluid_plant_runs_each_entry_as_listed() -> None:
    sc = _scenario([
        {"name": "near", "rtt": "10ms"},
        {"name": "far", "rtt": "60ms", "cca": "bbr"},
        {"name": "cbr", "cca": "udp", "rate": "30M", "start": "10s", "stop": "30s"},
        {"name": "xfer", "size": "5MB", "start": "40s", "rtt": "20ms"},
    ], hosts=2)
    pl = FluidPlant(sc)
    pl.reset(0)
    sh = pl.shape
    assert (sh.n_campus, sh.n_extra, sh.extra_off) == (2, 4, 2)
    rates, tables = [], []
    for _ in range(60):
        pl.step(sc.u_max)
        rates.append(pl.snapshot()["rate"][0].copy())
        tables.append(pl.flows()[0])
    r = np.asarray(rates) / 1e6
    _near, _far, cbr, xfer = (2, 3, 4, 5)
    # per-flow base RTT, CCA and names reach the flow table
    t = tables[15]
    by_name = dict(zip(t["name"], t["min_rtt"], strict=True))
    assert by_name["near"] == pytest.approx(0.010) and by_name["far"] == pytest.approx(0.060)
    assert {"cbr", "campus"} <= set(t["name"]) and t["proto"][t["name"].index("cbr")] == 17
    # the UDP entry sends 30 Mbit/s from 10 s, stops at its boundary and is recorded
    assert r[:9, cbr].max() == 0 and r[31:, cbr].max() == 0
    rec = pl.flow_records()
    stopped = rec[np.isclose(rec["start"], 10.0)]
    assert len(stopped) == 1 and 30.0 <= float(stopped["finish"].iloc[0]) < 31.0
    # the fixed-size transfer starts at 40 s and its FCT is recorded (next to a BBR flow that keeps
    # the 1 BDP queue full it gets 2-4 Mbit/s: 11-16 s for its 5 MB)
    done = rec[np.isclose(rec["start"], 40.0)]
    assert len(done) == 1 and done["bytes"].iloc[0] == pytest.approx(5e6 * c.WIRE_PER_PAYLOAD)
    assert r[:39, xfer].max() == 0


def test_schedule_degrades_a_flow_and_lifts_it() -> None:
    """ext Test 2's "degraded" flow: a cap outside the bottleneck from 10 s to 20 s."""
    sc = _scenario([{"name": "tcp", "rtt": "20ms", "schedule": [["10s", "20M"], ["20s", "1G"]]},
                    {"name": "udp", "cca": "udp", "rate": "10M", "schedule": [["25s", "40M"]]}])
    pl = FluidPlant(sc)
    pl.reset(0)
    r = []
    for _ in range(35):
        pl.step(sc.u_max)
        r.append(pl.snapshot()["rate"][0].copy())
    r = np.asarray(r) / 1e6
    assert r[5:10, 0].mean() > 80.0  # alone beside a 10 Mbit/s CBR: the rest of 100 Mbit/s
    assert r[11:20, 0].max() <= 20.0 * 1.02 and r[12:20, 0].mean() > 18.0
    assert r[22:25, 0].mean() > 60.0  # lifted
    assert r[5:24, 1].mean() == pytest.approx(10.0, rel=0.05)  # the CBR's own schedule: 10 -> 40 Mbit/s
    assert r[27:, 1].mean() > 25.0


def test_udp_alone_delivers_its_rate_and_extras_count_as_campus() -> None:
    sc = _scenario([{"name": "cbr", "cca": "udp", "rate": "30M", "start": "0s"}], streams=2)
    pl = FluidPlant(sc)
    pl.reset(0)
    ys = [pl.step(sc.u_max).y[0] for _ in range(20)]
    y = np.asarray(ys)
    # the DTN's two CUBIC streams take the rest; the CBR is campus traffic at its rate
    assert y[10:, 1].mean() == pytest.approx(30e6, rel=0.05)
    assert y[10:, 0].mean() > 55e6


def test_batch_of_scenarios_with_the_same_flow_counts() -> None:
    a = _scenario([{"rtt": "10ms"}, {"rtt": "50ms"}])
    b = _scenario([{"rtt": "20ms"}, {"rtt": "80ms", "cca": "bbr"}])
    pl = FluidPlant(a, scenarios=[a, b])
    pl.reset(0)
    base = pl.snapshot()["base_rtt"]
    assert base[0].tolist() == pytest.approx([0.01, 0.05]) and base[1].tolist() == pytest.approx([0.02, 0.08])
    with pytest.raises(ValueError, match="different flow layout"):
        FluidPlant(a, scenarios=[a, _scenario([{"rtt": "10ms"}])])


def test_netns_testbed_lays_out_one_host_per_flow() -> None:
    """The testbed's description (no root): shaped flows beside the campus on S1, unshaped ones beside the
    DTN on S3, one receiver each, per-flow RTT and CCA, bbr2 mapped to bbr and recorded."""
    from scidmz.plant.netns.spec import describe

    sc = _scenario([{"name": "a", "count": 2, "rtt": "10ms"},
                    {"name": "b", "rtt": "60ms", "cca": "bbr2", "shaped": False},
                    {"name": "u", "cca": "udp", "rate": "5M", "shaped": False}], hosts=1, streams=2)
    tb = describe(sc, "tfz", available_ccas=["reno", "cubic", "bbr"])
    fh = tb.flow_hosts
    assert [h.name for h in fh] == ["s2", "s3", "s4", "s5"]
    assert [h.flow.name for h in fh] == ["a", "a", "b", "u"]
    assert [h.shaped for h in fh] == [True, True, False, False]
    assert all(h.ip.startswith("10.1.") for h in fh[:2]) and all(h.ip.startswith("10.3.") for h in fh[2:])
    assert len({h.ip for h in tb.hosts.values()}) == len(tb.hosts)  # no address used twice
    assert [h.rtt for h in fh] == pytest.approx([0.01, 0.01, 0.06, 0.01])
    assert [h.cca for h in fh] == ["cubic", "cubic", "bbr", "udp"]
    assert tb.cca_mapped["flows.b"] == ("bbr2", "bbr")
    assert {h.role for h in fh} == {"campus"} and tb.campus[0].role == "campus"
    assert [tb.hosts[h.peer].kind for h in fh] == ["receiver"] * 4
    assert set(tb.delay_table()) == {tb.hosts[h.peer].ip for h in tb.senders}
