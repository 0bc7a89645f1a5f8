"""The ABC and FFS papers' congestion-controlled experiments on the fluid plant, through the runner.

The packet-level reproductions (ABC Fig. 4, FFS Table II) need no transport and
live in ``disciplines.packet``; these need TCP, so the disciplines run inside the
fluid plant (the same numba cores) as the runner's discipline kind: the paper's
fixed configuration (``PaperDiscipline``) is loaded before the reset and keeps its
weights every period; a drop-tail FIFO is the ``none`` policy. The campus shaper
is off in every scenario (``shaper.enabled = false``): the senders meet only at
the bottleneck, as in the papers.

- ABC (Menth et al. 2019, section 6.1/6.2): 50 Mbit/s bottleneck, 24-packet
  buffer, 20 ms RTT, 100 Mbit/s access links. Fig. 5: client 0 with N
  saturated TCP connections vs client 1 with one; Fig. 6: client 0 CBR at R_0
  vs one TCP connection. Goodput over the second half of each run.
- FFS (Wyss et al., section VII-A, Table III): two senders with different CCAs
  through one FFS node with equal fairness-matrix entries, 10 ms one-way delay;
  FIFO, FFS-C100 (sum M = C) and FFS-C85 (sum M = 0.85 C). Metrics as the paper
  defines them: F = mean over pairs of min/max throughput, U = mean
  utilisation, L(x) = fraction of pairs whose latency increase is < x ms,
  J(x) = fraction whose jitter is < x ms, RTT sampled every second like ping.

Who is who: client 1 (one TCP connection) is the scenario's DTN stream, the
discipline's aggregate 0; client 0 is the campus side, aggregate 1 (the runner's
grouping: DTN streams vs the rest).

Our choices where the papers are silent (labelled):

- Transport: the fluid plant's CCAs (reno, cubic, bbr, bbr2); a sender's access
  link is a cap outside the bottleneck: Fig. 5's N connections of client 0 are a
  ``[[flows]]`` entry capped at 100 Mbit/s / N each. Client 1's 100 Mbit/s, twice
  the bottleneck, is not modelled (a DTN stream has no cap; it could only bind for
  an RTT of slow start).
- Table III's bottleneck rate and buffer are not given: 50 Mbit/s (as ABC's)
  and 1000 packets (Linux's default txqueuelen, which a Mininet link without a
  queue size keeps). CCA pairs: every unordered pair of different CCAs.
- Latency increase = mean of the per-second RTT samples minus the base RTT;
  jitter = mean absolute difference of consecutive samples (RFC 3550's idea);
  throughputs over the run after its first 5 s.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from ...disciplines.abc import ABCConfig
from ...disciplines.ffs import FFSConfig
from ...plant.fluid import constants as c
from ...scenario import CampusConfig, DtnConfig, LinkConfig, Scenario, ShaperConfig
from ..trials import run_plant
from .paper import PAPER_TABLE_III

__all__ = ["PaperDiscipline", "abc_tcp_flows", "abc_cbr_vs_tcp", "ffs_table3", "ffs_rate_feedback", "table3_metrics"]

ABC_LINK = 50e6
ABC_BUFFER_PKTS = 24
ABC_RTT = 0.020
ACCESS_BPS = 100e6
T3_LINK = 50e6
T3_BUFFER_PKTS = 1000
T3_RTT = 0.020
T3_WARMUP_S = 5.0
FLUID_CCAS = ("reno", "cubic", "bbr", "bbr2")

# The papers' experiments run one or two unshaped, ACK-clocked senders; the fluid queue's packet noise
# was measured with the testbed's 18 flows, 10 of them shaped (constants.ARRIVAL_IDC), and nothing
# measured a pair: the FIFO these experiments compare against keeps the deterministic fluid queue, as
# the ABC and FFS cores do (ours; jenks.fluid does the same).
FEW_FLOWS_IDC = 0.0


class PaperDiscipline:
    """A bottleneck discipline as a paper configured it: a fixed configuration and fixed weights.

    The runner's discipline kind (``runner.Episode``): ``configure`` is loaded into the
    plant before its reset and ``weights`` given to it every period; here they never
    change with the target (the papers have none), so the discipline runs exactly as
    its configuration says (ABC: every aggregate at the one reference rate R_r; FFS:
    the fairness-matrix column).
    """

    kind = "discipline"

    def __init__(self, name: str, config: Any, weights: tuple[float, ...]) -> None:
        self.name = name
        self.config = config
        self._w = np.asarray(weights, dtype=np.float64)

    def reset(self, scenario: Scenario, batch: int = 1) -> None:
        pass

    def configure(self, scenario: Scenario) -> Any:
        return self.config

    def weights(self, scenario: Scenario, target: np.ndarray) -> np.ndarray:
        return self._w


def _abc() -> PaperDiscipline:
    cfg = ABCConfig(capacity_bps=ABC_LINK)
    return PaperDiscipline("abc", cfg, (cfg.ref_rate_bps, cfg.ref_rate_bps))


def _ffs(capacity: float) -> PaperDiscipline:
    col = (capacity / 2, capacity / 2)
    return PaperDiscipline("ffs", FFSConfig(capacity_bps=capacity, matrix_col_bps=col), col)


def _fifo() -> Any:
    from ...policies import make_policy

    return make_policy("none")


def _abc_scenario(n_tcp: int, client0: str, cbr: float, duration: float, seed: int) -> Scenario:
    """Client 1 is the DTN stream; client 0 its N TCP connections (a ``[[flows]]`` entry, each capped
    at its share of the 100 Mbit/s access link) or one UDP CBR campus host at ``cbr``."""
    tcp = client0 == "tcp"
    flows = ({"name": "client0", "count": n_tcp, "rtt": ABC_RTT, "cca": "cubic", "rate": ACCESS_BPS / n_tcp,
              "shaped": False},) if tcp else ()
    return Scenario(
        name=f"abc-{client0}",
        link=LinkConfig(capacity=ABC_LINK, buffer=ABC_BUFFER_PKTS * c.MSS, arrival_idc=FEW_FLOWS_IDC),
        dtn=DtnConfig(streams=1, rtt=ABC_RTT, cca="cubic"),
        campus=CampusConfig(hosts=0 if tcp else 1, rtt=ABC_RTT, cca="cubic", traffic="udp", udp_rate=cbr),
        shaper=ShaperConfig(enabled=False), flows=flows, duration=duration, seed=seed)


def _goodputs(scenarios: list[Scenario], policy: Any, seed: int) -> np.ndarray:
    """Goodput (bit/s) of client 0 and client 1 per scenario over the second half: (B, 2)."""
    traces, _ = run_plant(scenarios[0], policy, np.zeros(scenarios[0].steps), seed,
                          plant_options={"scenarios": scenarios} if len(scenarios) > 1 else None)
    steps = len(traces[0])
    return np.array([[tr.df["rate_campus"].iloc[steps // 2:].mean(), tr.df["rate_dtn"].iloc[steps // 2:].mean()]
                     for tr in traces])


def abc_tcp_flows(counts: list[int], duration: float, seed: int) -> list[dict[str, Any]]:
    """ABC Fig. 5 on the fluid plant: client 0 with N TCP connections vs client 1 with one."""
    rows = []
    for n in counts:
        sc = _abc_scenario(n, "tcp", 0.0, duration, seed)
        row: dict[str, Any] = {"n_flows": n}
        for name, pol in (("fifo", _fifo()), ("abc", _abc())):
            g = _goodputs([sc], pol, seed)[0]
            row[f"{name}_goodput0_bps"], row[f"{name}_goodput1_bps"] = float(g[0]), float(g[1])
        rows.append(row)
    return rows


def abc_cbr_vs_tcp(rates: list[float], duration: float, seed: int) -> list[dict[str, Any]]:
    """ABC Fig. 6 on the fluid plant: client 0 CBR at R_0 (capped by its access link) vs one TCP connection."""
    scs = [_abc_scenario(1, "udp", min(r, ACCESS_BPS), duration, seed) for r in rates]
    out = {name: _goodputs(scs, pol, seed) for name, pol in (("fifo", _fifo()), ("abc", _abc()))}
    return [{"r0_bps": r, **{f"{k}_goodput{j}_bps": float(out[k][i, j]) for k in out for j in (0, 1)}}
            for i, r in enumerate(rates)]


def _pair_scenario(a: str, b: str, duration: float, seed: int) -> Scenario:
    return Scenario(
        name=f"t3-{a}-{b}", link=LinkConfig(capacity=T3_LINK, buffer=T3_BUFFER_PKTS * c.MSS, arrival_idc=FEW_FLOWS_IDC),
        dtn=DtnConfig(streams=1, rtt=T3_RTT, cca=a),
        campus=CampusConfig(hosts=1, rtt=T3_RTT, cca=b, traffic="long"), shaper=ShaperConfig(enabled=False),
        duration=duration, seed=seed)


def table3_metrics(pairs: list[tuple[str, str]], tput: np.ndarray, rtts: list[np.ndarray], link_bps: float,
                   base_rtt: float) -> dict[str, Any]:
    """Table III's metrics (section VII-A) from per-pair throughputs (P, 2) and per-second RTT samples."""
    lat_ms = np.array([(np.mean(r) - base_rtt) * 1e3 if len(r) else np.nan for r in rtts])
    jit_ms = np.array([np.abs(np.diff(r)).mean() * 1e3 if len(r) > 1 else np.nan for r in rtts])
    fair = tput.min(axis=1) / np.maximum(tput.max(axis=1), 1e-9)
    util = tput.sum(axis=1) / link_bps
    return {
        "F": float(fair.mean() * 100), "U": float(util.mean() * 100),
        "L2": float((lat_ms < 2).mean() * 100), "L50": float((lat_ms < 50).mean() * 100),
        "J2": float((jit_ms < 2).mean() * 100), "J50": float((jit_ms < 50).mean() * 100),
        "pairs": [{"cca0": a, "cca1": b, "tput0_bps": float(tput[i, 0]), "tput1_bps": float(tput[i, 1]),
                   "latency_increase_ms": float(lat_ms[i]), "jitter_ms": float(jit_ms[i])}
                  for i, (a, b) in enumerate(pairs)],
    }


def ffs_table3(ccas: tuple[str, ...], duration: float, seed: int) -> dict[str, Any]:
    """Table III on the fluid plant: per scheme the paper's six metrics and the per-pair numbers."""
    pairs = list(itertools.combinations(ccas, 2))
    scs = [_pair_scenario(a, b, duration, seed) for a, b in pairs]
    warm = int(T3_WARMUP_S / scs[0].period)
    schemes: dict[str, Any] = {}
    for name, pol in (("fifo", _fifo()), ("ffs100", _ffs(T3_LINK)), ("ffs85", _ffs(0.85 * T3_LINK))):
        rtt = np.zeros((scs[0].steps, len(pairs)))

        def ping(k: int, plant: Any, rtt: np.ndarray = rtt) -> None:
            # a ping once a second sees the base RTT plus the bottleneck queue at that moment
            rtt[k] = T3_RTT + plant.queue_state()["bytes"][:, 0] / (T3_LINK / 8.0)

        traces, _ = run_plant(scs[0], pol, np.zeros(scs[0].steps), seed, on_period=ping,
                              plant_options={"scenarios": scs})
        tput = np.array([[tr.df["rate_dtn"].iloc[warm:].mean(), tr.df["rate_campus"].iloc[warm:].mean()]
                         for tr in traces])
        schemes[name] = table3_metrics(pairs, tput, [rtt[warm:, i] for i in range(len(pairs))], T3_LINK, T3_RTT)
    return {"ccas": list(ccas), "pairs": [list(p) for p in pairs], "duration_s": duration, "seed": seed,
            "link_bps": T3_LINK, "buffer_pkts": T3_BUFFER_PKTS, "rtt_s": T3_RTT,
            "schemes": schemes, "paper": {k: list(v) for k, v in PAPER_TABLE_III.items()}}


def _rate_feedback_scenario(cca: str, n: int, size: float, max_s: float, period: float, seed: int) -> Scenario:
    """One FFS ingress per stream: stream 1 is the DTN (aggregate 0), stream 2 a ``[[flows]]`` entry
    (aggregate 1), each a ``size``-byte transfer."""
    tcp = "cubic" if cca == "minloss" else cca  # minloss is set per flow on the plant (setup)
    flows = ({"name": "stream2", "rtt": T3_RTT, "cca": tcp, "size": size, "shaped": False},) if n == 2 else ()
    return Scenario(name=f"rf-{cca}-{n}",
                    link=LinkConfig(capacity=T3_LINK, buffer=T3_BUFFER_PKTS * c.MSS, arrival_idc=FEW_FLOWS_IDC),
                    dtn=DtnConfig(streams=1, rtt=T3_RTT, cca=tcp, transfer=size),
                    campus=CampusConfig(hosts=0, rtt=T3_RTT), shaper=ShaperConfig(enabled=False), flows=flows,
                    duration=max_s, period=period, seed=seed)


def ffs_rate_feedback(ccas: tuple[str, ...] = ("minloss", "cubic", "bbr"), sizes: tuple[float, ...] = (1e6, 10e6),
                      seed: int = 0, max_s: float = 60.0) -> list[dict[str, Any]]:
    """FFS section IX on the fluid plant: 1 or 2 concurrent transfers of ``size`` bytes through an
    FFS-C85 node (Table III's link), each stream from its own ingress; loss at the node and FCT
    (first start to last byte delivered).

    ``minloss`` paces at the rate indicator (Algorithm 2) the node gave it one RTT before
    (``FluidPlant.set_ccas``, before the episode); the others are the plant's CCAs, which ignore the RI.
    """
    rows = []
    period = 0.05
    for cca in ccas:
        for n in (1, 2):
            for size in sizes:
                sc = _rate_feedback_scenario(cca, n, size, max_s, period, seed)

                def minloss(plant: Any, n: int = n) -> None:
                    plant.set_ccas(["minloss"] * n)

                def done(k: int, plant: Any) -> bool:
                    return len(plant.flows()[0]["src"]) == 0

                traces, rec = run_plant(sc, _ffs(0.85 * T3_LINK), np.zeros(sc.steps), seed, on_period=done,
                                        setup=minloss if cca == "minloss" else None, want_records=True)
                df = traces[0].df
                sent = float((df["dtn_sent_bytes"] + df["campus_sent_bytes"]).sum())
                lost = float((df["dtn_lost_bytes"] + df["campus_lost_bytes"]).sum())
                fin = rec[rec["class"].astype(str).isin(["dtn", "campus"])]
                fct = (float(fin["finish"].max() - fin["start"].min()) if len(fin) == n else float("nan"))
                rows.append({"cca": cca, "streams": n, "size_bytes": size, "loss_pct": 100.0 * lost / max(sent, 1.0),
                             "fct_s": fct})
    return rows
