"""A packet-level reference for the fluid model's timer recovery: one Linux TCP CUBIC flow under random loss.

    python benchmarks/small_window_tcp.py [--against reports/fidelity] [--seeds 4] [--duration 60]

Next to a BBR v1 DTN the campus CUBIC flows lose 9-17 % of their packets and sit at
1-5-packet windows, where Linux repairs losses with timers. This script checks that the
mechanism the fluid model uses (``cca._flight_lost``, docs/fluid_model.md) is enough to explain
the kernel's counters: a single flow, each packet lost independently with probability p, the
RTT fixed, and Linux's loss recovery as the source has it -- RACK marks a packet lost when one
sent after it is (S)ACKed (reordering window min RTT / 4 outside Recovery, tcp_rack_reo_wnd),
Recovery with PRR (tcp_cwnd_reduction), the tail-loss probe only in Open (tcp_schedule_loss_probe:
2 SRTT + 2 ms, + TCP_RTO_MIN with one packet out, capped at the RTO), the RTO from the head's
send (SRTT + 200 ms, doubled per timeout until an ACK: tcp_retransmit_timer), cwnd 1 after it
(tcp_enter_loss), CUBIC with beta 0.7, fast convergence and its ACK-counted Reno-friendly window.
Ours: no delayed ACKs, F-RTO or undo; ACKs are never lost; windows are real numbers (Linux: whole
packets; we send while in flight < floor(cwnd)).

With ``--against`` it reads the kernel's trivial-TBF runs (``kernel_buffer*.json``: BBR v1 DTN,
CUBIC campus), runs the flow at each buffer's campus loss fraction and RTT (10 ms + the measured
queuing delay), and prints both per flow and second next to each other. It also prints, per
ssthresh, how often a Recovery ends in an RTO against the fluid model's p^(beta floor(ssthresh))
per recovery of 1 / (1 - p) rounds. One JSON object on stdout.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import random
import sys
from pathlib import Path
from typing import Any

BETA = 717 / 1024  # tcp_cubic.c beta
C = 0.4
RTO_MIN = 0.200  # TCP_RTO_MIN
TIMEOUT_MIN = 0.002  # TCP_TIMEOUT_MIN_US
FRIENDLY = 3 * (1 - BETA) / (1 + BETA)  # W_est per RTT of ACKs


class Flow:
    """One bulk CUBIC sender; ``stats`` counts what the kernel's MIB counters count."""

    def __init__(self, p: float, rtt: float, seed: int, duration: float) -> None:
        self.p, self.rtt, self.rng, self.duration = p, rtt, random.Random(seed), duration
        self.events: list[tuple[float, int, str, Any]] = []
        self.k = 0
        self.una = self.nxt = self.rcv_nxt = 0
        self.seg: dict[int, dict[str, Any]] = {}
        self.rcv: set[int] = set()
        self.cwnd, self.ssth, self.state = 10.0, 1e9, "open"
        self.high = self.prior = self.prr_del = self.prr_out = 0.0
        self.backoff = 0
        self.rto_at: float | None = None
        self.tlp_at: float | None = None
        self.tlp_high: int | None = None
        self.epoch: float | None = None
        self.lastmax = self.K = self.origin = self.west = 0.0
        self.stats = {"out": 0, "retrans": 0, "rto": 0, "tlp": 0, "recoveries": 0}
        self.recoveries: list[tuple[int, bool]] = []  # (floor ssthresh, ended in an RTO)
        self._rec_ssth: int | None = None

    def _push(self, t: float, kind: str, data: Any = None) -> None:
        self.k += 1
        heapq.heappush(self.events, (t, self.k, kind, data))

    def in_flight(self) -> int:
        n = self.nxt - self.una
        for s in range(self.una, self.nxt):
            g = self.seg[s]
            n -= g["sacked"] or g["lost"]
            n += g["retx"] and not g["sacked"]
        return n

    def _xmit(self, t: float, s: int, new: bool) -> None:
        self.seg[s]["sent"] = t
        self.stats["out"] += 1
        if not new:
            self.stats["retrans"] += 1
            self.seg[s]["retx"] = True
        if self.rng.random() >= self.p:
            self._push(t + self.rtt, "ack", s)
        if self.state == "rec":
            self.prr_out += 1

    def _send_new(self, t: float) -> None:
        self.seg[self.nxt] = {"sent": t, "sacked": False, "lost": False, "retx": False}
        self.nxt += 1
        self._xmit(t, self.nxt - 1, True)

    def _try_send(self, t: float) -> None:
        while self.in_flight() < math.floor(self.cwnd + 1e-9):
            lost = next((s for s in range(self.una, self.nxt) if self.seg[s]["lost"] and not self.seg[s]["retx"]),
                        None)
            if lost is None:
                self._send_new(t)
            else:
                self._xmit(t, lost, False)
        self._set_timers(t)

    def _rto(self) -> float:
        return (self.rtt + RTO_MIN) * 2 ** self.backoff

    def _set_timers(self, t: float) -> None:
        if self.nxt == self.una:
            self.rto_at = self.tlp_at = None
            return
        self.rto_at = max(self.seg[self.una]["sent"] + self._rto(), t)
        self.tlp_at = None
        if self.state == "open" and self.tlp_high is None:
            pto = 2 * self.rtt + (RTO_MIN if self.nxt - self.una == 1 else TIMEOUT_MIN)
            self.tlp_at = min(t + pto, self.rto_at)

    def _ssthresh(self) -> float:
        self.epoch = None
        self.lastmax = self.cwnd * (1 + BETA) / 2 if self.cwnd < self.lastmax else self.cwnd
        return max(self.cwnd * BETA, 2.0)

    def _cong_avoid(self, t: float, acked: int) -> None:
        if self.cwnd < self.ssth:
            self.cwnd = min(self.cwnd + acked, max(self.ssth, self.cwnd))
            return
        if self.epoch is None:
            self.epoch, self.west = t, self.cwnd
            self.K = ((self.lastmax - self.cwnd) / C) ** (1 / 3) if self.lastmax > self.cwnd else 0.0
            self.origin = max(self.lastmax, self.cwnd)
        target = self.origin + C * (t - self.epoch + self.rtt - self.K) ** 3
        self.west += FRIENDLY * acked / self.cwnd
        target = max(target, self.west)
        cnt = max(self.cwnd / (target - self.cwnd), 2.0) if target > self.cwnd else 100 * self.cwnd
        self.cwnd += acked / cnt

    def _end_recovery(self, rto: bool) -> None:
        if self._rec_ssth is not None:
            self.recoveries.append((self._rec_ssth, rto))
            self._rec_ssth = None

    def _on_ack(self, t: float, s: int) -> None:
        if s in self.rcv or s < self.rcv_nxt:
            return
        self.rcv.add(s)
        while self.rcv_nxt in self.rcv:
            self.rcv.discard(self.rcv_nxt)
            self.rcv_nxt += 1
        newly = 0
        g = self.seg.get(s)
        if g is not None and not g["sacked"]:
            g.update(sacked=True, lost=False, retx=False)
            newly += 1
        una0 = self.una
        while self.una < self.rcv_nxt:
            newly += not self.seg.pop(self.una)["sacked"]
            self.una += 1
        if newly:
            self.backoff = 0  # an RTT sample (timestamps) clears icsk_backoff
        if self.tlp_high is not None and self.una >= self.tlp_high:
            self.tlp_high = None
        self._rack(t, (g["sent"], s) if g is not None else (t, s))
        if self.state in ("rec", "loss") and self.una >= self.high:
            if self.state == "rec":
                self.cwnd = self.ssth
                self._end_recovery(False)
            self.state = "open"
        if self.state == "rec":
            infl = self.in_flight()
            self.prr_del += newly
            delta = self.ssth - infl
            if delta < 0:
                snd = math.ceil(self.ssth * self.prr_del / self.prior) - self.prr_out
            else:
                snd = min(delta, max(self.prr_del - self.prr_out, newly) + (self.una > una0))
            self.cwnd = infl + max(snd, 0 if self.prr_out else 1)
        elif self.state == "loss":
            self.cwnd = min(self.cwnd + newly, max(self.ssth, self.cwnd))
        else:
            self._cong_avoid(t, newly)
        self._try_send(t)

    def _rack(self, t: float, newest: tuple[float, int]) -> None:
        sacked = sum(self.seg[s]["sacked"] for s in range(self.una, self.nxt))
        reo = self.rtt / 4 if self.state == "open" and sacked < 3 else 0.0
        marked, wake = False, None
        for s in range(self.una, self.nxt):
            g = self.seg[s]
            if g["sacked"] or (g["lost"] and not g["retx"]) or (g["sent"], s) >= newest:
                continue
            due = g["sent"] + self.rtt + reo
            if t >= due - 1e-12:
                g.update(lost=True, retx=False)
                marked = True
            else:
                wake = due if wake is None else min(wake, due)
        if wake is not None:
            self._push(wake, "reo", newest)
        if marked and self.state == "open":
            self.stats["recoveries"] += 1
            self.prior = self.cwnd
            self.ssth = self._ssthresh()
            self._rec_ssth = int(self.ssth)
            self.state, self.high, self.prr_del, self.prr_out = "rec", self.nxt, 0, 0
            self.cwnd = self.in_flight() + 1

    def _on_rto(self, t: float) -> None:
        self.stats["rto"] += 1
        self._end_recovery(True)
        if self.state == "open":
            self.ssth = self._ssthresh()
        self.lastmax, self.epoch = 0.0, None  # bictcp_reset
        for s in range(self.una, self.nxt):
            if not self.seg[s]["sacked"]:
                self.seg[s].update(lost=True, retx=False)
        self.state, self.high, self.tlp_high, self.cwnd = "loss", self.nxt, None, 1.0
        self.backoff += 1
        self._xmit(t, self.una, False)
        self.rto_at, self.tlp_at = t + self._rto(), None

    def _on_tlp(self, t: float) -> None:
        self.stats["tlp"] += 1
        self._send_new(t)
        self.tlp_high, self.tlp_at = self.nxt, None
        self.rto_at = max(self.seg[self.una]["sent"] + self._rto(), t)

    def run(self) -> Flow:
        self._try_send(0.0)
        while True:
            nxt = [(self.events[0][0], "ev")] if self.events else []
            nxt += [(x, k) for x, k in ((self.rto_at, "rto"), (self.tlp_at, "tlp")) if x is not None]
            t, kind = min(nxt)
            if t > self.duration:
                return self
            if kind == "rto":
                self._on_rto(t)
            elif kind == "tlp":
                self._on_tlp(t)
            else:
                _, _, ev, data = heapq.heappop(self.events)
                if ev == "ack":
                    self._on_ack(t, data)
                else:
                    self._rack(t, data)
                    self._try_send(t)


def simulate(p: float, rtt: float, seeds: int, duration: float) -> dict[str, Any]:
    """Per flow and second over ``seeds`` flows, and Recovery's RTO share per floor(ssthresh)."""
    tot: dict[str, float] = {}
    rec: dict[int, list[bool]] = {}
    for seed in range(seeds):
        f = Flow(p, rtt, seed, duration).run()
        for k, v in f.stats.items():
            tot[k] = tot.get(k, 0.0) + v / duration / seeds
        for ssth, rto in f.recoveries:
            rec.setdefault(min(ssth, 4), []).append(rto)
    out: dict[str, Any] = {k: round(v, 2) for k, v in tot.items()}
    out["pkts_per_rtt"] = round(tot["out"] * rtt, 2)
    out["recovery_rto"] = {
        f"ssthresh {k}{'+' if k == 4 else ''}": {
            "n": len(v), "packet_level": round(sum(v) / len(v), 3),
            "fluid_model": round(1 - (1 - p ** max(BETA * k, 1.0)) ** (1 / (1 - p)), 3)}
        for k, v in sorted(rec.items())}
    return out


def kernel_points(d: Path) -> list[dict[str, Any]]:
    """(buffer, campus loss fraction, campus RTT, per-flow counters) of the kernel's BBR-vs-CUBIC runs."""
    pts = []
    for path in sorted(d.glob("kernel_buffer*.json")):
        res = json.loads(path.read_text())
        if res.get("campus_cca", "cubic") != "cubic":
            continue
        periods_s = res["netns"]["duration_s"] - res["netns"]["warmup_s"]
        for r in res["netns"].get("bbr", []):
            if r.get("qdelay_campus") is None:
                continue  # a refused run: no queue measured, so no RTT to run the flow at
            c = r["tcp_counters"]["campus"]
            flows = 10.0
            pts.append({
                "file": path.name, "buffer_bdp": r["buffer_bdp"], "p": round(c["retrans_frac"], 4),
                "rtt": round(0.010 + r["qdelay_campus"], 4),
                "kernel": {k: round(c[m] / periods_s / flows, 2) for k, m in (
                    ("out", "OutSegs"), ("retrans", "RetransSegs"), ("rto", "TCPTimeouts"),
                    ("tlp", "TCPLossProbes"), ("recoveries", "TCPSackRecovery"))},
            })
    return pts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--against", type=Path, default=None, help="directory of the kernel's kernel_buffer*.json")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--duration", type=float, default=60.0, help="simulated seconds per flow")
    a = ap.parse_args()
    if a.seeds < 1 or a.duration <= 0:
        print("small_window_tcp: --seeds must be >= 1 and --duration > 0", file=sys.stderr)
        return 2
    if a.against is not None and not a.against.is_dir():
        print(f"small_window_tcp: {a.against} is not a directory", file=sys.stderr)
        return 2
    rows = []
    if a.against is not None:
        for pt in kernel_points(a.against):
            if pt["p"] > 0:
                rows.append({**pt, "packet_level": simulate(pt["p"], pt["rtt"], a.seeds, a.duration)})
    else:
        for p, rtt in ((0.16, 0.0107), (0.145, 0.0337), (0.09, 0.105), (0.01, 0.010)):
            rows.append({"p": p, "rtt": rtt, "packet_level": simulate(p, rtt, a.seeds, a.duration)})
    print(json.dumps({"benchmark": "small_window_tcp", "seeds": a.seeds, "duration_s": a.duration,
                      "unit": "per flow and second", "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
