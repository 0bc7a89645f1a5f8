"""``FluidPlant``: the batched flow-level simulator behind ``make_plant("fluid", ...)``.

This module builds the arrays of ``layout.py`` from one or more scenarios of
the same shape, calls the numba kernel once per control period, and turns
its output into the seven Table 3 variables (``StateBatch``), the per-period
ground truth (``info``), finished-flow records and per-flow snapshots.
The model itself is documented in ``docs/fluid_model.md`` and ``kernel.py``.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...disciplines.base import FluidLayout
from ...disciplines.registry import fluid_id
from ...scenario import Scenario
from ...units import check_rates
from ..base import StateBatch, register_plant
from . import constants as c
from . import layout as L

__all__ = ["FluidPlant", "FlowShape"]

# numba's fallback "workqueue" threading layer aborts if two Python threads run
# parallel kernels at once; batched plants stepped from several threads take turns.
_PARALLEL_LOCK = threading.Lock()
# without a discipline the bottleneck is drop-tail: nothing in front of the FIFO, no discipline arrays
_DROPTAIL = fluid_id("droptail")
_NO_DISCIPLINE = FluidLayout(n_params=1, n_aggregates=1, state=(1, 1), flow_rows=1, work=(1, 1))


@dataclass(frozen=True)
class _Discipline:
    """The discipline ``set_discipline`` put in front of the FIFO: its fluid hook, and the flows' groups
    and labels, (B, F)."""

    config: Any
    hooks: Any  # the discipline's fluid module (scidmz.disciplines.base documents it)
    layout: FluidLayout
    groups: np.ndarray
    labels: np.ndarray
    exact: bool
    shaped: bool


@dataclass(frozen=True)
class FlowShape:
    """How the flow axis of the arrays is laid out (identical for every instance of a batch)."""

    n_dtn: int  # DTN streams: flows [0, n_dtn)
    n_campus: int  # long campus TCP flows or UDP hosts: [n_dtn, extra_off)
    campus_kind: str  # long | udp | weibull
    n_send: int  # Weibull senders; sender g owns slots [short_off + g*slots, ... + slots)
    slots: int
    n_extra: int = 0  # the scenario's [[flows]] entries: [extra_off, short_off), campus class

    @property
    def extra_off(self) -> int:
        return self.n_dtn + self.n_campus

    @property
    def short_off(self) -> int:
        return self.n_dtn + self.n_campus + self.n_extra

    @property
    def n_flows(self) -> int:
        return self.short_off + self.n_send * self.slots

    @classmethod
    def of(cls, sc: Scenario) -> FlowShape:
        kind = sc.campus.traffic
        if kind == "long":
            n_campus = sc.campus.hosts * sc.campus.flows_per_host
        elif kind == "udp":
            n_campus = sc.campus.hosts
        else:
            n_campus = 0
        n_send = sc.campus.short_flow_senders + (sc.campus.hosts if kind == "weibull" else 0)
        return cls(sc.dtn.streams, n_campus, kind, n_send, c.SHORT_SLOTS_PER_SENDER,
                   sum(g.count for g in sc.flows))


# the fluid model: its sources here (and the disciplines' files the kernel compiles in)
_MODEL_FILES = ("constants.py", "layout.py", "common.py", "cca.py", "kernel.py", "plant.py")


@functools.cache
def model_fingerprint() -> str:
    """Short SHA-256 of the fluid model's sources: what a recorded trace of this plant depends on,
    so that a dataset made by another version of the model is not mistaken for this one's."""
    import hashlib
    from pathlib import Path

    from ...disciplines.registry import fluid_sources

    h = hashlib.sha256()
    here = Path(__file__).parent
    for path in [here / name for name in _MODEL_FILES] + fluid_sources():
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _disciplines_of(policy: Any, plant: FluidPlant) -> list[Any]:
    """The registry entries a discipline policy (or the kind ``"discipline"``: every one) may run."""
    from ...disciplines import registry

    if isinstance(policy, str):
        return [registry.get(n) for n in registry.names()]
    return [registry.for_config(policy.configure(plant.scenario))]


def _has_noise_hooks(entry: Any) -> bool:
    """Whether a discipline's fluid hook meets the packet noise and was found to agree with the kernel
    with it (``noise_edge``, ``noise_drop``, ``NOISE_FOOTING``: ``scidmz.disciplines.base``)."""
    hooks = entry.fluid()
    return hasattr(hooks, "noise_edge") and hasattr(hooks, "noise_drop") and bool(getattr(hooks, "NOISE_FOOTING", False))


def min_base_rtt(sc: Scenario) -> float:
    """Smallest base RTT of any flow the scenario can have (seeds the adaptive sub-step)."""
    rtts = [sc.dtn.rtt] if sc.dtn.streams else []
    if sc.campus.hosts or sc.campus.short_flow_senders:
        rtts.append(sc.campus.rtt)
    rtts += [g.rtt for g in sc.flows]
    return min(rtts, default=1.0)


def _group_slices(sc: Scenario, extra_off: int) -> list[tuple[Any, slice]]:
    """Each ``[[flows]]`` entry with the flow slots it owns."""
    out, f = [], extra_off
    for g in sc.flows:
        out.append((g, slice(f, f + g.count)))
        f += g.count
    return out


def _seed_words(seed: int) -> int:
    # A non-zero 64-bit xorshift state derived from the seed (splitmix64).
    z = (int(seed) * 0x9E3779B97F4A7C15 + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    z ^= z >> 31
    return z or 0x2545F4914F6CDD1D


class FluidPlant:
    """B independent fluid simulations of the Science DMZ bottleneck, stepped one period T at a time.

    ``scenarios`` (optional) gives each instance its own scenario of the same
    shape (same flow counts and traffic kind, same period); otherwise all use
    ``scenario``. ``dt`` fixes the sub-step (default: adaptive, a fifth of the smallest current RTT,
    see constants.DT_RTT_DIVISOR). ``packet_noise=False`` turns off the bottleneck's packet-level
    queue noise (constants.ARRIVAL_IDC), a deterministic fluid queue
    without packet-level burstiness (the model as it was before that noise was added).
    """

    def __init__(
        self,
        scenario: Scenario,
        batch: int = 1,
        scenarios: list[Scenario] | None = None,
        dt: float | None = None,
        packet_noise: bool = True,
    ) -> None:
        if scenarios is not None:
            scenarios = list(scenarios)
            if not scenarios:
                raise ValueError("scenarios must not be empty")
            if batch not in (1, len(scenarios)):
                raise ValueError(f"batch={batch} does not match {len(scenarios)} scenarios")
            batch = len(scenarios)
        if int(batch) != batch or batch < 1:
            raise ValueError(f"batch must be a positive whole number, got {batch!r}")
        self.scenario: Scenario = scenario
        self.batch: int = int(batch)
        self.scenarios: list[Scenario] = scenarios or [scenario] * self.batch
        self.shape = FlowShape.of(self.scenarios[0])
        for i, sc in enumerate(self.scenarios):
            if FlowShape.of(sc) != self.shape:
                raise ValueError(
                    f"scenario {i} ('{sc.name}') has a different flow layout than scenario 0; "
                    "a batch needs the same DTN streams, campus hosts/flows and traffic kind"
                )
            if sc.period != self.scenarios[0].period:
                raise ValueError(f"scenario {i} ('{sc.name}') has a different period T")
        if dt is not None and not (0 < dt <= self.scenario.period):
            raise ValueError(f"dt must be in (0, period], got {dt!r}")
        self._dt_override = dt
        self._packet_noise = bool(packet_noise)
        self._u_max = np.array([sc.u_max for sc in self.scenarios])
        self._closed = False
        self._records: list[np.ndarray] = []
        self._info: dict[str, np.ndarray] = {}
        self._kernel: Any = None
        #: wall seconds of the first kernel call (numba import and cache load + one period); None before it
        self.kernel_load_s: float | None = None
        self._parallel = False
        self._queues: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        self._discipline: _Discipline | None = None
        self._udp_rates: np.ndarray | None = None
        self._ccas: np.ndarray | None = None
        self._shaper = True
        self._alloc()
        self.reset()

    # -- construction ------------------------------------------------------------------
    @property
    def period(self) -> float:
        return self.scenario.period

    @property
    def model_version(self) -> str:
        """The model that makes this plant's numbers (``model_fingerprint``; ``-nonoise`` without the
        FIFO's packet noise); recorded in every trace's metadata as ``plant_model``."""
        return model_fingerprint() + ("" if self._packet_noise else "-nonoise")

    def _alloc(self) -> None:
        B, F = self.batch, self.shape.n_flows
        self.P = np.zeros((B, L.NP, F))
        self.S = np.zeros((B, L.NS, F))
        self.I = np.zeros((B, L.NI))
        self.IP = np.zeros((B, L.NIP))
        self.Q = np.zeros((B, 1, L.NQS))
        self.QP = np.zeros((B, 1, L.NQP))
        self.G = np.zeros((B, max(self.shape.n_send, 1), 2))
        self.RNG = np.zeros(B, dtype=np.uint64)
        self.OUT = np.zeros((B, L.NOUT))
        self._alloc_discipline(_NO_DISCIPLINE)
        sh = self.shape
        per = self.scenario.period
        gap_min = min(sc.campus.weibull.gap_min for sc in self.scenarios)
        cap = sh.n_dtn + 8 + int(sh.n_send * (per / gap_min + sh.slots + 2))
        self.REC = np.zeros((B, cap, L.NREC))
        self.NREC = np.zeros(B, dtype=np.int64)

    def _fill(self, i: int, sc: Scenario, seed: int) -> None:
        sh = self.shape
        rng = np.random.default_rng(seed)
        P, S, inst, IP = self.P[i], self.S[i], self.I[i], self.IP[i]
        P[:] = 0.0
        S[:] = 0.0
        inst[:] = 0.0
        d, n0, ne = sh.n_dtn, sh.short_off, sh.extra_off
        cca = c.CCA_CODES
        # DTN streams: the transfer split evenly, start jittered after dtn.start
        P[L.P_CLASS, :d] = c.CLASS_DTN
        P[L.P_CCA, :d] = cca[sc.dtn.cca]
        P[L.P_BASE, :d] = sc.dtn.rtt
        # Transfer sizes are payload; the model counts frame bytes (constants.MSS).
        wire = c.WIRE_PER_PAYLOAD
        P[L.P_SIZE, :d] = math.inf if sc.dtn.transfer is None else sc.dtn.transfer * wire / max(d, 1)
        P[L.P_START, :d] = sc.dtn.start + rng.uniform(0.0, c.DTN_START_JITTER, d)
        # long campus flows or UDP hosts (behind the shaper)
        P[L.P_CLASS, d:n0] = c.CLASS_CAMPUS
        P[L.P_CCA, d:ne] = cca["udp"] if sh.campus_kind == "udp" else cca[sc.campus.cca]
        P[L.P_UDP, d:ne] = sc.campus.udp_rate
        P[L.P_SIZE, d:n0] = math.inf
        P[L.P_START, d:ne] = rng.uniform(0.0, c.CAMPUS_START_JITTER, ne - d)
        # Weibull short-flow slots (behind the shaper)
        P[L.P_CLASS, n0:] = c.CLASS_SHORT
        P[L.P_CCA, n0:] = cca[sc.campus.cca]
        P[L.P_SIZE, n0:] = math.inf
        P[L.P_START, n0:] = math.inf
        P[L.P_SENDER, n0:] = np.repeat(np.arange(sh.n_send), sh.slots) if sh.n_send else 0
        P[L.P_BASE, d:] = sc.campus.rtt
        P[L.P_SHAPED, d:] = 1.0
        P[L.P_QID, :] = 0.0
        P[L.P_RMAX, :] = math.inf
        # [[flows]] entries: exactly as listed (no start jitter: the papers' flows join on cue)
        for g, sl in _group_slices(sc, ne):
            P[L.P_CCA, sl] = cca[g.cca]
            P[L.P_BASE, sl] = g.rtt
            P[L.P_START, sl] = g.start
            P[L.P_SIZE, sl] = math.inf if g.size is None else g.size * wire
            P[L.P_SHAPED, sl] = 1.0 if g.shaped else 0.0
            P[L.P_UDP, sl] = g.rate if g.cca == "udp" else 0.0
            if g.cca != "udp" and g.rate is not None:
                P[L.P_RMAX, sl] = g.rate / 8.0
        S[L.S_FSTART, :] = -1.0
        S[L.S_RTT, :] = P[L.P_BASE, :]
        S[L.S_MINRTT, :] = P[L.P_BASE, :]
        w = sc.campus.weibull
        IP[L.IP_CAP] = sc.capacity / 8.0
        if self._dt_override is not None:
            nsub = max(1, int(math.ceil(sc.period / self._dt_override - 1e-9)))
            IP[L.IP_DT] = sc.period / nsub
            IP[L.IP_NSUB] = nsub
        else:
            IP[L.IP_DT] = -1.0  # adaptive (constants.DT_RTT_DIVISOR)
            IP[L.IP_NSUB] = 0
        IP[L.IP_BURST] = sc.shaper.burst if sc.shaper.burst is not None else -1.0
        IP[L.IP_LATENCY] = sc.shaper.latency
        IP[L.IP_PERIOD] = sc.period
        IP[L.IP_DTN_TRANSFER] = math.inf if sc.dtn.transfer is None else sc.dtn.transfer * wire
        IP[L.IP_DTN_BASE] = sc.dtn.rtt
        IP[L.IP_CAMPUS_BASE] = sc.campus.rtt
        IP[L.IP_G_SHAPE], IP[L.IP_G_SCALE], IP[L.IP_G_MIN], IP[L.IP_G_MAX] = (
            w.gap_shape, w.gap_scale, w.gap_min, w.gap_max)
        IP[L.IP_Z_SHAPE], IP[L.IP_Z_SCALE], IP[L.IP_Z_MIN], IP[L.IP_Z_MAX] = (
            w.size_shape, w.size_scale * wire, w.size_min * wire, w.size_max * wire)
        IP[L.IP_DISCIPLINE] = _DROPTAIL
        IP[L.IP_LINK_BURST] = sc.link_burst_bytes
        idc = c.ARRIVAL_IDC if sc.link.arrival_idc is None else sc.link.arrival_idc
        IP[L.IP_ARRIVAL_IDC] = idc if self._packet_noise else 0.0
        self.Q[i] = 0.0
        if self._queues is None:
            self.QP[i, 0, L.QP_BUFFER] = sc.buffer_bytes
            self.QP[i, 0, L.QP_WEIGHT] = 1.0
            self.QP[i, 0, L.QP_CEIL] = math.inf
        else:
            buf, weight, fq, ceil = self._queues
            self.QP[i, :, L.QP_BUFFER] = buf[i]
            self.QP[i, :, L.QP_WEIGHT] = weight[i]
            self.QP[i, :, L.QP_CEIL] = ceil[i]
            P[L.P_QID, :] = fq[i]
        self.G[i] = 0.0
        if sh.n_send:
            self.G[i, :, 0] = rng.uniform(0.0, w.gap_max, sh.n_send)
        inst[L.I_RTTC] = -1.0
        inst[L.I_RTTD] = sc.dtn.rtt
        inst[L.I_NEXTFID] = n0
        inst[L.I_DTN_FIRST] = math.inf
        inst[L.I_DTN_DONE] = math.inf
        inst[L.I_DTN_LASTFIN] = -math.inf
        inst[L.I_NEXT_START] = -1.0
        inst[L.I_RTTMIN] = min_base_rtt(sc)
        inst[L.I_DTN_LEFT] = d if sc.dtn.transfer is not None and d else math.inf
        self.RNG[i] = np.uint64(_seed_words(int(rng.integers(0, 2**62))))
        if not self._shaper or not sc.shaper.enabled:
            P[L.P_SHAPED] = 0.0
        if self._ccas is not None:
            P[L.P_CCA] = self._ccas[i]
        if self._udp_rates is not None:
            udp = P[L.P_CCA] == cca["udp"]
            P[L.P_UDP, udp] = self._udp_rates[i, udp]
        if self._discipline is not None:
            self._fill_discipline(i)

    # -- Plant protocol ---------------------------------------------------------------
    def reset(self, seed: int | None = None) -> StateBatch:
        """Start a new episode; instance i uses seed + i (seed None: its scenario's seed + i)."""
        self._check_open()
        seeds = [(sc.seed if seed is None else int(seed)) + i for i, sc in enumerate(self.scenarios)]
        self._records = []
        self._t = 0.0
        self._y = np.zeros((self.batch, 7))
        self._info = {}
        return self.reset_instances(np.arange(self.batch), seeds)

    def reset_instances(self, rows: np.ndarray | list[int], seeds: np.ndarray | list[int]) -> StateBatch:
        """Restart only instances ``rows`` (with their own seeds); the others go on untouched.

        Each instance keeps its own clock, so a vectorised RL environment can
        autoreset one episode while the rest of the batch continues.
        """
        self._check_open()
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        seeds = np.asarray(seeds, dtype=np.int64).reshape(-1)
        if rows.shape != seeds.shape:
            raise ValueError(f"reset_instances: {rows.size} rows but {seeds.size} seeds")
        for i, s in zip(rows, seeds, strict=True):
            sc = self.scenarios[int(i)]
            self._fill(int(i), sc, int(s))
            self._y[i] = 0.0
            self._y[i, 2] = sc.dtn.rtt
            self._y[i, 3] = sc.campus.rtt
        return StateBatch(self._t, self._y.copy())

    def _flow_events(self) -> None:
        """``[[flows]]`` schedules and stops due by each instance's clock, at this period boundary."""
        for i, sc in enumerate(self.scenarios):
            t = self.I[i, L.I_T] + 1e-9
            P, S = self.P[i], self.S[i]
            for g, sl in _group_slices(sc, self.shape.extra_off):
                if g.schedule:
                    due = [r for when, r in g.schedule if when <= t]
                    if due:
                        if g.cca == "udp":
                            P[L.P_UDP, sl] = due[-1]
                        else:
                            P[L.P_RMAX, sl] = due[-1] / 8.0
                if g.stop is not None and g.stop <= t:
                    # nothing more to send: the kernel completes the flow once what is in flight is out
                    on = S[L.S_ON, sl] > 0
                    tosend = S[L.S_TOSEND, sl]
                    left = np.isfinite(tosend) & (tosend <= 1e-6)
                    S[L.S_SIZE, sl] = np.where(on & ~left, S[L.S_DELIV, sl] + S[L.S_QB, sl] + S[L.S_TB, sl],
                                               S[L.S_SIZE, sl])
                    S[L.S_TOSEND, sl] = np.where(on, 0.0, S[L.S_TOSEND, sl])
                    P[L.P_START, sl] = np.where(S[L.S_FSTART, sl] < 0, math.inf, P[L.P_START, sl])

    def step(self, u: np.ndarray | float) -> StateBatch:
        """Apply campus rate(s) u (bit/s) for one period T; return y measured at its end."""
        self._check_open()
        arr = check_rates(u, self.batch, 0.0, self._u_max, "fluid plant", clip=False)
        if self._kernel is None:
            from numba import get_num_threads

            from .kernel import advance_period, advance_period_serial

            # threads only pay with several instances and more than one thread
            self._parallel = self.batch > 1 and get_num_threads() > 1
            self._kernel = advance_period if self._parallel else advance_period_serial
        sh = self.shape
        if sh.n_extra:
            self._flow_events()
        args = (self.P, self.S, self.I, self.IP, self.Q, self.QP, self.G, self.RNG, arr,
                self.OUT, self.REC, self.NREC, sh.n_dtn, sh.short_off, sh.n_send, sh.slots,
                self.DP, self.DM, self.DS, self.DF, self.DW, self.DG)
        t0 = time.perf_counter() if self.kernel_load_s is None else 0.0
        if self._parallel:
            with _PARALLEL_LOCK:
                self._kernel(*args)
        else:
            self._kernel(*args)
        if self.kernel_load_s is None:
            # The first call loads numba and the cached machine code (~1 s per process);
            # kept apart so speed figures can say what they measure.
            self.kernel_load_s = time.perf_counter() - t0
        T = self.period
        self._t += T
        o = self.OUT
        y = np.empty((self.batch, 7))
        y[:, 0] = o[:, L.O_DTN_B] * 8.0 / T
        y[:, 1] = o[:, L.O_CAMP_B] * 8.0 / T
        y[:, 2] = o[:, L.O_RTTD]
        y[:, 3] = o[:, L.O_RTTC]
        y[:, 4] = o[:, L.O_QDD]
        y[:, 5] = o[:, L.O_QDC]
        y[:, 6] = o[:, L.O_ACTIVE]
        self._y = y
        cap = np.array([sc.capacity for sc in self.scenarios])
        done = self.I[:, L.I_DTN_DONE]
        fct = np.full(self.batch, np.nan)
        fin = np.isfinite(done)
        fct[fin] = done[fin] - self.I[fin, L.I_DTN_FIRST]
        self._info = {
            "dtn_bytes": o[:, L.O_DTN_B].copy(),
            "campus_bytes": o[:, L.O_CAMP_B].copy(),
            "dtn_lost_bytes": o[:, L.O_DTN_L].copy(),
            "campus_lost_bytes": o[:, L.O_CAMP_L].copy(),
            "shaper_lost_bytes": o[:, L.O_TBF_L].copy(),
            "shaper_out_bytes": o[:, L.O_TBF_OUT].copy(),
            "dtn_sent_bytes": o[:, L.O_DTN_SENT].copy(),
            "campus_sent_bytes": o[:, L.O_CAMP_SENT].copy(),
            "shaper_delay": o[:, L.O_TBF_DELAY].copy(),
            "queue_bytes": o[:, L.O_QBYTES].copy(),
            "short_flows_done": o[:, L.O_SHORT_DONE].copy(),
            "short_flows_waiting": self.I[:, L.I_WAITING].copy(),
            "dtn_fct": fct,
            "utilization": (o[:, L.O_DTN_B] + o[:, L.O_CAMP_B]) * 8.0 / (cap * T),
        }
        n = self.NREC
        if n.any():
            rows = []
            for i in range(self.batch):
                if n[i]:
                    r = self.REC[i, : n[i]]
                    rows.append(np.column_stack([np.full(n[i], i, dtype=np.float64), r]))
            self._records.append(np.vstack(rows))
        return StateBatch(self._t, y.copy())

    @property
    def info(self) -> dict[str, Any]:
        """Ground truth of the last period: (B,) float arrays (bytes, s, fraction)."""
        return dict(self._info)

    def close(self) -> None:
        self._closed = True

    def __enter__(self) -> FluidPlant:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("this FluidPlant is closed")

    # -- the bottleneck's queues (for queue-separation policies) ------------------------------
    def set_queues(
        self,
        buffers: np.ndarray | list[float],
        weights: np.ndarray | list[float] | None = None,
        flow_queue: np.ndarray | list[int] | None = None,
        ceilings: np.ndarray | list[float] | None = None,
    ) -> None:
        """Replace the bottleneck FIFO by K weighted drop-tail queues (Jenks RTT classes etc.).

        ``buffers``: bytes per queue, shape (K,) or (B, K); ``weights``: service
        weights (default equal), same shapes; ``flow_queue``: the queue of every
        flow, shape (F,) or (B, F), ints in [0, K) (default 0; flow order as in
        ``snapshot()``); ``ceilings``: bit/s each queue may never exceed (default
        none: spare capacity is lent by weight; a ceiling equal to the queue's
        share is HTB with ceil = rate). May be called between periods: a flow that changes
        queue takes its queued bytes along; bytes in queues that disappear move
        to queue 0. The configuration survives ``reset``.
        """
        self._check_open()
        B, F = self.batch, self.shape.n_flows
        buf = np.asarray(buffers, dtype=np.float64)
        if self._discipline is not None and buf.shape[-1:] != (1,):
            raise ValueError("this plant runs a bottleneck discipline in front of one FIFO: no queue separation")
        if buf.ndim not in (1, 2) or buf.shape[-1] < 1:
            raise ValueError(f"buffers must have shape (K,) or ({B}, K), got {buf.shape}")
        K = buf.shape[-1]
        buf = np.broadcast_to(buf, (B, K)).copy()
        if not np.all(np.isfinite(buf)) or np.any(buf <= 0):
            raise ValueError("queue buffers must be finite and > 0 bytes")
        w = np.ones((B, K)) if weights is None else np.asarray(weights, dtype=np.float64)
        if w.shape not in ((K,), (B, K)):
            raise ValueError(f"weights must have shape ({K},) or ({B}, {K}), got {w.shape}")
        w = np.broadcast_to(w, (B, K)).copy()
        if not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise ValueError("queue weights must be finite and > 0")
        fq = np.zeros((B, F), dtype=np.int64) if flow_queue is None else np.asarray(flow_queue)
        if fq.shape not in ((F,), (B, F)):
            raise ValueError(f"flow_queue must have shape ({F},) or ({B}, {F}), got {fq.shape}")
        if fq.size and (not np.issubdtype(fq.dtype, np.integer) or fq.min() < 0 or fq.max() >= K):
            raise ValueError(f"flow_queue must hold queue numbers in [0, {K})")
        fq = np.broadcast_to(fq, (B, F)).astype(np.int64)
        ce = np.full((B, K), math.inf) if ceilings is None else np.asarray(ceilings, dtype=np.float64) / 8.0
        if ce.shape not in ((K,), (B, K)):
            raise ValueError(f"ceilings must have shape ({K},) or ({B}, {K}), got {ce.shape}")
        if np.any(np.isnan(ce)) or np.any(ce <= 0):
            raise ValueError("queue ceilings must be > 0 bit/s")
        ce = np.broadcast_to(ce, (B, K)).copy()
        old_q = self.Q
        new_q = np.zeros((B, K, L.NQS))
        keep = min(K, old_q.shape[1])
        new_q[:, :keep] = old_q[:, :keep]
        if old_q.shape[1] > K:
            new_q[:, 0, : L.QS_RATE] += old_q[:, K:, : L.QS_RATE].sum(axis=1)
        old = self.P[:, L.P_QID].astype(np.int64)
        old = np.where(old < K, old, 0)
        qb = self.S[:, L.S_QB]
        bi = np.broadcast_to(np.arange(B)[:, None], (B, F))
        np.add.at(new_q[:, :, L.QS_BYTES], (bi, old), -qb)
        np.add.at(new_q[:, :, L.QS_BYTES], (bi, fq), qb)
        new_q[:, :, L.QS_BYTES] = np.maximum(new_q[:, :, L.QS_BYTES], 0.0)
        qp = np.zeros((B, K, L.NQP))
        qp[:, :, L.QP_BUFFER] = buf
        qp[:, :, L.QP_WEIGHT] = w
        qp[:, :, L.QP_CEIL] = ce
        self.Q, self.QP = new_q, qp
        self.P[:, L.P_QID] = fq
        self._queues = (buf, w, fq.copy(), ce)

    # -- which policies the packet-noise model covers (equal footing across policy kinds) ---------
    #: Policy kinds whose queues the packet-noise model (``link.arrival_idc``) acts in and whose
    #: footing was checked: the rate policies' FIFO, a queue policy's HTB leaves (each at its own
    #: rate, lending its idle to the others), and the FIFO behind a discipline whose fluid hook has
    #: the noise hooks (``noise_edge``/``noise_drop``, ``scidmz.disciplines.base``) and
    #: ``NOISE_FOOTING``. Not "host": the model gives a paced DTN's arrivals no burstiness at all, an
    #: assumption nobody measured against the kernel (real paced TCP still sends short bursts; the
    #: kernel's paced DTN was never measured as ``reports/leaderboard/noise.json`` measured ABC and
    #: FFS), so fluid pacing rows are "not comparable" until that measurement models it.
    NOISE_KINDS: frozenset[str] = frozenset({"rate", "queue", "discipline"})

    def noise_covers(self, policy: Any) -> bool:
        """Whether this plant models ``policy`` on equal footing with the trivial TBF: its packet-noise
        model acts in the queues that policy creates. ``policy``: a kind (``scidmz.kinds.POLICY_KINDS``)
        or a policy object (its ``kind``; a discipline policy's own discipline is checked).

        A comparison across kinds (``scidmz leaderboard``) marks the rows of policies not covered
        "not comparable" and keeps them out of its ranking. A discipline is covered when its fluid
        hook has the noise hooks (the kernel skips the noise behind one that has not) and declares
        ``NOISE_FOOTING``: the fluid discipline with the noise agreed with the kernel's
        (``benchmarks/noise_footing.py``, ``reports/leaderboard/noise.json``); the kind
        ``"discipline"`` alone is covered when every registered discipline is. Without packet noise
        (``packet_noise=False``) every policy sees the same deterministic queue: all are covered.
        """
        from ...kinds import POLICY_KINDS

        kind = policy if isinstance(policy, str) else getattr(policy, "kind", None)
        if kind not in POLICY_KINDS:
            raise ValueError(f"noise_covers: unknown policy kind {kind!r} (choose from {', '.join(POLICY_KINDS)})")
        if not self._packet_noise:
            return True
        if kind != "discipline":
            return kind in self.NOISE_KINDS
        return "discipline" in self.NOISE_KINDS and all(_has_noise_hooks(e) for e in _disciplines_of(policy, self))

    # -- a bottleneck discipline (drop-tail, ABC, FFS: scidmz.disciplines) in front of the FIFO --------
    def set_discipline(
        self,
        config: Any,
        groups: np.ndarray | list[int] | None = None,
        labels: np.ndarray | list[float] | None = None,
        exact: bool = False,
        shaped: bool = False,
    ) -> None:
        """Run a bottleneck discipline (its configuration, e.g. ``ABCConfig``) at the bottleneck; None removes it.

        ``groups``: each flow's aggregate (ABC) or ingress (FFS), ints, shape
        (F,) or (B, F); default: the DTN streams are 0, every other flow 1 (the
        Science DMZ's two aggregates). ABC needs ``len(ref_rates_bps)`` (or 2)
        aggregates, FFS one matrix entry per ingress. ``labels``: FFS fair-share
        labels f before the node, bit/s (default: f = r, the first node's own
        rate). ``exact``: FFS with tau solved exactly every sub-step (equation 2)
        instead of the estimators and Appendix A. ``shaped``: keep the campus
        behind the token-bucket shaper (default: no shaper -- the discipline
        is the way the admin serves the DTN). The bottleneck must be one FIFO;
        the buffer is the scenario's. Takes effect at the next ``reset``.
        """
        self._check_open()
        if config is None:
            self._discipline = None
            return
        from ...disciplines import registry
        from ...disciplines.base import check_labels

        entry = registry.for_config(config)
        if self._queues is not None and self._queues[0].shape[1] != 1:
            raise ValueError("a bottleneck discipline runs in front of one FIFO; this plant has several queues")
        hooks = entry.fluid()
        B, F = self.batch, self.shape.n_flows
        lay = hooks.layout(config, F, labels is not None, bool(exact))
        if groups is None:
            grp = np.ones((B, F), dtype=np.int64)
            grp[:, : self.shape.n_dtn] = 0
        else:
            grp = np.asarray(groups)
            if grp.shape not in ((F,), (B, F)) or (grp.size and not np.issubdtype(grp.dtype, np.integer)):
                raise ValueError(f"groups must be integers of shape ({F},) or ({B}, {F})")
            grp = np.broadcast_to(grp, (B, F)).astype(np.int64)
        n_agg = lay.n_aggregates
        if grp.size and (grp.min() < 0 or grp.max() >= n_agg):
            raise ValueError(f"groups must be in [0, {n_agg}) for this {entry.name} configuration")
        lab = np.zeros((B, F)) if labels is None else np.asarray(labels, dtype=np.float64)
        if lab.shape not in ((F,), (B, F)):
            raise ValueError(f"labels must have shape ({F},) or ({B}, {F})")
        if labels is not None:
            check_labels("f", lab)
        self._discipline = _Discipline(config, hooks, lay, grp.copy(), np.broadcast_to(lab, (B, F)).copy(),
                                       bool(exact), bool(shaped))
        self._alloc_discipline(lay)

    def _alloc_discipline(self, lay: FluidLayout) -> None:
        """The discipline's arrays in the sizes its hook asks for (their contents are the hook's)."""
        B, F = self.batch, self.shape.n_flows
        self.DP = np.zeros((B, lay.n_params))
        self.DM = np.zeros((B, lay.n_aggregates))
        self.DS = np.zeros((B, *lay.state))
        self.DF = np.zeros((B, lay.flow_rows, F))
        self.DW = np.zeros((B, *lay.work))
        self.DG = np.zeros((B, F), dtype=np.int64)

    def set_discipline_weights(self, weights: np.ndarray | list[float]) -> None:
        """Change the discipline's per-aggregate weights now, shape (A,) or (B, A), bit/s.

        ABC: the aggregates' reference rates R_r (section 3.2); FFS: the
        fairness-matrix column, rescaled to sum to the discipline's capacity;
        drop-tail: kept, and no effect. Meters, averages and tau keep running
        (an admin's change, not a restart).
        """
        self._check_open()
        d = self._discipline
        if d is None:
            raise ValueError("set_discipline_weights: this plant runs no bottleneck discipline")
        n = d.layout.n_aggregates
        w = np.asarray(weights, dtype=np.float64)
        if w.shape not in ((n,), (self.batch, n)):
            raise ValueError(f"discipline weights must have shape ({n},) or ({self.batch}, {n}), got {w.shape}")
        w = np.broadcast_to(w, (self.batch, n))
        if not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise ValueError("discipline weights must be finite and > 0 bit/s")
        d.hooks.set_weights(d.config, self.DM, self.DS, w)

    def _fill_discipline(self, i: int) -> None:
        d = self._discipline
        if not d.shaped:
            self.P[i, L.P_SHAPED] = 0.0
        for arr in (self.DP, self.DM, self.DS, self.DF, self.DW):
            arr[i] = 0.0
        self.DG[i] = d.groups[i]
        d.hooks.init(d.config, self.DP[i], self.DM[i], self.DS[i], self.DF[i], d.groups[i], d.labels[i], d.exact,
                     self.scenarios[i].buffer_bytes, c.MSS)
        self.IP[i, L.IP_DISCIPLINE] = d.hooks.FLUID_ID

    def discipline_state(self) -> dict[str, np.ndarray]:
        """The discipline's state now: ``weights`` (B, A) bit/s; ABC ``activity_avg`` (B,); FFS ``tau``,
        ``accepted_rate`` (bit/s) (B,). Empty without a discipline."""
        d = self._discipline
        if d is None:
            return {}
        return d.hooks.state(d.config, self.DM, self.DS)

    def set_shaper(self, enabled: bool) -> None:
        """Without the shaper (``False``) the campus goes straight to the bottleneck and u is ignored:
        a plain FIFO (or a discipline) between all senders, as in the ABC and FFS papers. Takes effect
        at the next ``reset`` and survives it."""
        self._check_open()
        self._shaper = bool(enabled)

    def set_ccas(self, ccas: list[str | None] | None) -> None:
        """Give flows their own congestion control (one name or None per flow, snapshot order), incl.
        ``minloss`` (FFS's rate-feedback sender, fluid plant only); None: the scenario's. Takes effect
        at the next ``reset`` and survives it."""
        self._check_open()
        if ccas is None:
            self._ccas = None
            return
        F = self.shape.n_flows
        if len(ccas) != F:
            raise ValueError(f"set_ccas needs one entry per flow ({F}), got {len(ccas)}")
        bad = [x for x in ccas if x is not None and x not in c.CCA_CODES]
        if bad:
            raise ValueError(f"unknown congestion control {bad[0]!r} (choose from {', '.join(c.CCA_CODES)})")
        codes = np.empty((self.batch, F))
        for i in range(self.batch):
            sc = self.scenarios[i]
            codes[i, : self.shape.n_dtn] = c.CCA_CODES[sc.dtn.cca]
            codes[i, self.shape.n_dtn:] = c.CCA_CODES[sc.campus.cca]
            if self.shape.campus_kind == "udp":
                codes[i, self.shape.n_dtn: self.shape.extra_off] = c.CCA_CODES["udp"]
            for g, sl in _group_slices(sc, self.shape.extra_off):
                codes[i, sl] = c.CCA_CODES[g.cca]
        for f, name in enumerate(ccas):
            if name is not None:
                codes[:, f] = c.CCA_CODES[name]
        self._ccas = codes

    def set_udp_rates(self, rates: np.ndarray | list[float] | None) -> None:
        """Give every UDP sender its own constant rate (bit/s, shape (F,) or (B, F); entries of
        non-UDP flows are ignored); None: the scenario's ``campus.udp_rate``. Takes effect at the
        next ``reset`` and survives it (the papers' per-host CBR rates)."""
        self._check_open()
        if rates is None:
            self._udp_rates = None
            return
        B, F = self.batch, self.shape.n_flows
        r = np.asarray(rates, dtype=np.float64)
        if r.shape not in ((F,), (B, F)):
            raise ValueError(f"UDP rates must have shape ({F},) or ({B}, {F}), got {r.shape}")
        if not np.all(np.isfinite(r)) or np.any(r < 0):
            raise ValueError("UDP rates must be finite and >= 0 bit/s")
        self._udp_rates = np.broadcast_to(r, (B, F)).copy()

    def set_rate_limits(self, limits: np.ndarray | list[float]) -> None:
        """Limit flows' sending rates (bit/s, shape (F,) or (B, F); inf = none) from the next period on.

        A flow limited outside the bottleneck (the Jenks papers' "degraded"
        flows, short Exp 4 / ext Test 2). ``reset`` lifts every limit.
        """
        self._check_open()
        B, F = self.batch, self.shape.n_flows
        lim = np.asarray(limits, dtype=np.float64)
        if lim.shape not in ((F,), (B, F)):
            raise ValueError(f"rate limits must have shape ({F},) or ({B}, {F}), got {lim.shape}")
        if np.any(np.isnan(lim)) or np.any(lim <= 0):
            raise ValueError("rate limits must be > 0 bit/s (inf: none)")
        self.P[:, L.P_RMAX] = np.broadcast_to(lim / 8.0, (B, F))

    def set_pacing(self, rates: np.ndarray | float | None) -> None:
        """Pace the DTN (``HostPlant``): its aggregate rate, bit/s of frames ((B,) or a number), shared
        evenly by its streams as per-flow rate caps (``P_RMAX``, frame bytes/s), from the next period on.

        As ``SO_MAX_PACING_RATE`` on each DTN socket (``actuators.pacing`` on the netns plant). ``None``
        lifts it; ``reset`` does too. Which flows are paced, and at what rate, is ``P_RMAX`` of the DTN
        flows (finite while paced).
        """
        self._check_open()
        d = self.shape.n_dtn
        if rates is None:
            self.P[:, L.P_RMAX, :d] = math.inf
            return
        arr = check_rates(rates, self.batch, 0.0, np.inf, "fluid plant pacing", clip=False)
        self.P[:, L.P_RMAX, :d] = (arr / 8.0 / max(d, 1))[:, None]

    def queue_state(self) -> dict[str, np.ndarray]:
        """Per-queue state now, (B, K) arrays: ``bytes`` queued, ``buffer``, ``weight``, ``rate`` (bytes/s served)."""
        return {
            "bytes": self.Q[:, :, L.QS_BYTES].copy(),
            "buffer": self.QP[:, :, L.QP_BUFFER].copy(),
            "weight": self.QP[:, :, L.QP_WEIGHT].copy(),
            "rate": self.Q[:, :, L.QS_RATE].copy(),
        }

    # -- ground truth beyond the protocol ------------------------------------------------
    def flow_records(self) -> Any:
        """Finished flows since reset: instance, class ('dtn'/'campus'/'short'), flow_id, start, finish, bytes, fct."""
        import pandas as pd

        cols = ["instance", "class", "flow_id", "start", "finish", "bytes"]
        if not self._records:
            df = pd.DataFrame({k: pd.Series(dtype="float64") for k in cols})
        else:
            arr = np.vstack(self._records)
            df = pd.DataFrame(arr, columns=cols)
        df["instance"] = df["instance"].astype("int64")
        df["flow_id"] = df["flow_id"].astype("int64")
        df["class"] = pd.Categorical.from_codes(df["class"].astype("int64"), categories=list(c.CLASS_NAMES)) \
            if len(df) else pd.Categorical([], categories=list(c.CLASS_NAMES))
        df["fct"] = df["finish"] - df["start"]
        return df

    def records_lost(self) -> np.ndarray:
        """(B,) number of finished-flow records that did not fit the per-period buffer (should be 0)."""
        return self.I[:, L.I_REC_LOST].copy()

    def snapshot(self) -> dict[str, np.ndarray]:
        """Per-flow state now, (B, F) arrays: what a Jenks/ABC/FFS policy needs per flow.

        ``rate`` (bit/s delivered over the last period), ``send_rate`` (bit/s now),
        ``rtt`` (s, at the end of the period, incl. shaper and bottleneck queues; base if idle),
        ``base_rtt``, ``cwnd`` (bytes; BBR: its inflight cap), ``queue_id``,
        ``queue_bytes`` (bytes in the bottleneck queue), ``shaper_bytes``,
        ``lost`` (bytes lost in the last period), ``active`` (0/1), ``cls``
        (0 dtn, 1 campus, 2 short), ``cca`` (constants.CCA_CODES), ``flow_id``.
        """
        S, P = self.S, self.P
        rtt = np.where(S[:, L.S_ON] > 0, S[:, L.S_RTT], P[:, L.P_BASE])
        return {
            "rate": S[:, L.S_PBYTES] * 8.0 / self.period,
            "send_rate": S[:, L.S_RATE] * 8.0,
            "rtt": rtt,
            "base_rtt": P[:, L.P_BASE].copy(),
            "cwnd": S[:, L.S_CWND].copy(),
            "queue_id": P[:, L.P_QID].astype(np.int64),
            "queue_bytes": S[:, L.S_QB].copy(),
            "shaper_bytes": S[:, L.S_TB].copy(),
            "lost": S[:, L.S_PLOST].copy(),
            "active": S[:, L.S_ON].copy(),
            "cls": P[:, L.P_CLASS].astype(np.int64),
            "cca": P[:, L.P_CCA].astype(np.int64),
            "flow_id": S[:, L.S_FID].astype(np.int64),
        }

    # -- queue policies (runner.Episode: plant.flows() -> policy -> plant.apply_queues) -----------
    _ROLES = ("dtn", "campus", "short")

    @staticmethod
    def flow_address(i: int) -> str:
        """The synthetic source address of flow ``i`` (snapshot order) in ``flows()`` tables."""
        return f"10.{100 + (i >> 16)}.{(i >> 8) & 255}.{i & 255}"

    def flows(self) -> list[dict[str, Any]]:
        """Per instance, the active flows as the table a queue policy reads (the data plane's view).

        Columns: src (``flow_address``), dst, sport, dport, proto (17 for UDP campus senders),
        rtt (now, incl. queues), min_rtt (the base RTT: the fluid plant has no per-packet samples
        whose windowed minimum would approach it; ours), rate, long_flow (short flows are not),
        role (dtn | campus | short), name (the ``[[flows]]`` entry's, else the role).
        """
        snap = self.snapshot()
        udp = c.CCA_CODES["udp"]
        out = []
        for b in range(self.batch):
            idx = np.flatnonzero(snap["active"][b] > 0)
            cls = snap["cls"][b, idx]
            names = [self._ROLES[int(k)] for k in snap["cls"][b]]
            for g, sl in _group_slices(self.scenarios[b], self.shape.extra_off):
                names[sl] = [g.name] * g.count
            out.append({
                "src": [self.flow_address(int(i)) for i in idx],
                "dst": ["10.9.0.1"] * idx.size,
                "sport": (40000 + idx % 20000).tolist(),
                "dport": [5201] * idx.size,
                "proto": [17 if k == udp else 6 for k in snap["cca"][b, idx].tolist()],
                "rtt": snap["rtt"][b, idx],
                "min_rtt": snap["base_rtt"][b, idx],
                "rate": snap["rate"][b, idx],
                "long_flow": (cls != 2).tolist(),
                "role": [self._ROLES[int(k)] for k in cls.tolist()],
                "name": [names[int(i)] for i in idx],
            })
        return out

    def apply_queues(self, configs: Any) -> None:
        """Load one ``QueueConfig`` per instance (or one for all): queues with their rate as the
        service weight, ``ceil`` as the ceiling, ``buffer`` bytes; flows by their ``src`` rule."""
        cfgs = list(configs) if isinstance(configs, list | tuple) else [configs] * self.batch
        if len(cfgs) != self.batch:
            raise ValueError(f"got {len(cfgs)} queue configurations for a batch of {self.batch}")
        k = max(len(c.queues) for c in cfgs)
        n = self.shape.n_flows
        buffers = np.full((self.batch, k), float(self.scenario.buffer_bytes))
        weights = np.full((self.batch, k), 1e-9)  # padding queues hold no flow
        ceils = np.full((self.batch, k), np.inf)
        fq = np.zeros((self.batch, n), dtype=np.int64)
        index = {self.flow_address(i): i for i in range(n)}
        for b, cfg in enumerate(cfgs):
            order = [q.qid for q in cfg.queues]
            for j, q in enumerate(cfg.queues):
                buffers[b, j], weights[b, j], ceils[b, j] = float(q.buffer), float(q.rate), float(q.ceil)
            fq[b, :] = order.index(cfg.default)
            for r in cfg.rules:
                i = index.get(r.match.src or "")
                if i is None:
                    raise ValueError(f"queue rule for {r.match.src}: no such flow in this plant")
                fq[b, i] = order.index(r.queue)
        self.set_queues(buffers, weights, fq, ceils)

    def __repr__(self) -> str:
        dt = "adaptive" if self._dt_override is None else f"{self._dt_override:g}s"
        return f"FluidPlant({self.scenario.name!r}, batch={self.batch}, flows={self.shape.n_flows}, dt={dt})"


register_plant("fluid", FluidPlant, model_version=model_fingerprint)
