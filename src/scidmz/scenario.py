"""Scenarios: the bottleneck, the DTN, the campus traffic, the shaper and T.

A scenario is a TOML file or a built-in name (``scidmz/scenarios/*.toml``).
Strings such as "1G", "10ms", "10GB" are parsed here, at the edge; the
``Scenario`` object holds SI floats only (bit/s, s, bytes). Each section is a
frozen pydantic dataclass: a key's type annotation (``Rate``, ``Time``,
``Whole``, ...) says how it is parsed, pydantic walks the tables and names the
failing key (``flows[0].rtt``), and ``_validate`` holds the checks that span
several keys.

Topology and defaults follow the MLC paper (Vega et al., section 3.1 and
Fig. 2): a 1 Gbit/s WAN bottleneck at BR1, 100 campus hosts (one long TCP
flow each, base RTT 10 ms) shaped by a TBF on S1-eth1, and a DTN with 8
parallel streams at 100 ms base RTT.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable
from dataclasses import field, fields
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import BeforeValidator, ConfigDict, ValidationError
from pydantic.dataclasses import dataclass as _pydantic_dataclass

from . import limits as _limits
from .units import FRAME_BYTES, MTU, parse_rate, parse_size, parse_time

__all__ = [
    "resolve_scenario",
    "CCAS",
    "TRAFFIC_KINDS",
    "LinkConfig",
    "DtnConfig",
    "WeibullConfig",
    "CampusConfig",
    "ShaperConfig",
    "Scenario",
    "builtin_names",
    "load_scenario",
    "parse_override",
    "FlowGroup",
]

CCAS = ("reno", "cubic", "bbr", "bbr2")
TRAFFIC_KINDS = ("long", "weibull", "udp")


# -- field types: each key's parsing and check lives in its annotation ---------
# The sections are pydantic dataclasses (still plain dataclasses for fields/replace/asdict):
# pydantic walks the TOML tables, rejects unknown keys and reports the failing key's path.


def _si(parser: Callable[..., float]) -> BeforeValidator:
    """A unit-parsing field ("600M", "10ms", "1MB" -> SI float); None stays None."""

    def check(v: Any) -> Any:
        if v is None:
            return None
        try:
            return parser(v, what="")
        except ValueError as exc:
            raise ValueError(str(exc).removeprefix(": ")) from None

    return BeforeValidator(check)


# numbers.Real/Integral so NumPy scalars pass as the Python numbers they hold; bool is refused.
def _whole(v: Any) -> int:
    if (isinstance(v, bool | np.bool_) or not isinstance(v, numbers.Real)
            or not math.isfinite(v) or int(v) != v):
        raise ValueError(f"expected a whole number, got {v!r}")
    return int(v)


def _number(v: Any) -> float:
    if isinstance(v, bool | np.bool_) or not isinstance(v, numbers.Real):
        raise ValueError(f"expected a number, got {v!r}")
    return float(v)


def _string(v: Any) -> str:
    if not isinstance(v, str):
        raise ValueError(f"expected a string, got {v!r}")
    return v


def _flag(v: Any) -> bool:
    if not isinstance(v, bool | np.bool_):
        raise ValueError(f"expected true or false, got {v!r}")
    return bool(v)


def _schedule(v: Any) -> tuple[tuple[float, float], ...]:
    if not isinstance(v, list | tuple):
        raise ValueError("must be an array of [time, rate] pairs")
    out = []
    for j, item in enumerate(v):
        if not isinstance(item, list | tuple) or len(item) != 2:
            raise ValueError(f"[{j}] must be a [time, rate] pair, got {item!r}")
        out.append((parse_time(item[0], what=f"[{j}] time"), parse_rate(item[1], what=f"[{j}] rate")))
    return tuple(out)


def _flow_list(v: Any) -> Any:
    if not isinstance(v, list | tuple):
        raise ValueError("must be an array of tables ([[flows]] entries)")
    return tuple(v)


Rate = Annotated[float, _si(parse_rate)]
Time = Annotated[float, _si(parse_time)]
Size = Annotated[float, _si(parse_size)]
OptRate = Annotated[float | None, _si(parse_rate)]
OptTime = Annotated[float | None, _si(parse_time)]
OptSize = Annotated[float | None, _si(parse_size)]
Whole = Annotated[int, BeforeValidator(_whole)]
Number = Annotated[float, BeforeValidator(_number)]
Text = Annotated[str, BeforeValidator(_string)]
Flag = Annotated[bool, BeforeValidator(_flag)]
Schedule = Annotated[tuple[tuple[float, float], ...], BeforeValidator(_schedule)]

_CONFIG = ConfigDict(extra="forbid")


def dataclass(cls: type) -> Any:
    """A frozen scenario section validated by pydantic (unknown keys rejected)."""
    return _pydantic_dataclass(frozen=True, config=_CONFIG)(cls)


@dataclass
class LinkConfig:
    """The WAN bottleneck (BR1 egress): capacity B_max and drop-tail buffer."""

    capacity: Rate = 1e9  # bit/s, B_max
    buffer: OptSize = None  # bytes; None -> buffer_bdp x BDP of the DTN path
    buffer_bdp: Number = 1.0
    # bytes of tokens the bottleneck saves while its queue is empty (it is a token bucket at
    # B_max); None -> one 1 ms timer tick of B_max, at least 2 frames (Scenario.link_burst_bytes)
    burst: OptSize = None
    # fluid plant only: index of dispersion of the frames arriving at the bottleneck, the variance
    # of its queues' packet-level noise; None -> plant/fluid/constants.ARRIVAL_IDC (measured with
    # the testbed's mix), 0 -> a deterministic fluid queue
    arrival_idc: Number | None = None


@dataclass
class DtnConfig:
    """DTN-s -> DTN-r: parallel TCP streams (GridFTP/Globus style)."""

    streams: Whole = 8
    rtt: Time = 0.100  # base RTT, s
    cca: Text = "cubic"
    transfer: OptSize = None  # bytes for the whole transfer (all streams); None = unlimited
    start: Time = 0.0  # s


@dataclass
class WeibullConfig:
    """Short-flow generator, Table 6 of the MLC paper (Weibull k, lambda, clipped)."""

    gap_shape: Number = 0.5
    gap_scale: Time = 0.020  # s
    gap_min: Time = 0.001
    gap_max: Time = 0.100
    size_shape: Number = 0.5
    size_scale: Size = 100e3  # bytes
    size_min: Size = 10e3
    size_max: Size = 10e6


@dataclass
class CampusConfig:
    """Campus senders s1..sN behind S1; their aggregate passes the TBF at rate u."""

    hosts: Whole = 100
    rtt: Time = 0.010  # base RTT, s
    cca: Text = "cubic"
    traffic: Text = "long"  # long | weibull | udp (what every host sends)
    flows_per_host: Whole = 1  # parallel long TCP flows per host (N_s = hosts x flows_per_host)
    udp_rate: Rate = 10e6  # bit/s per host when traffic == "udp"
    short_flow_senders: Whole = 0  # extra hosts sending Weibull short flows (MLC section 4.5)
    weibull: WeibullConfig = field(default_factory=WeibullConfig)

    @property
    def streams(self) -> int:
        """Number of long-lived campus TCP streams (N_s of MLC Table 5)."""
        return self.hosts * self.flows_per_host if self.traffic == "long" else 0


@dataclass
class ShaperConfig:
    """TBF on S1-eth1: the actuator. ``latency`` bounds its queue (tc's TBF limit)."""

    rate: OptRate = None  # initial rate, bit/s; None -> B_max
    burst: OptSize = None  # bytes; None -> derived from rate and period of the kernel timer
    latency: Time = 0.050  # s of queue at the current rate before TBF drops
    min_rate: Rate = 0.0
    max_rate: OptRate = None  # None -> B_max
    # False: no shaper -- campus hosts go straight to the bottleneck and u is ignored (the ABC and
    # FFS papers' senders; an admin serving the DTN with queues or a bottleneck discipline). The
    # netns plant then holds its campus TBF at B_max, the uplink's line rate.
    enabled: Flag = True


@dataclass
class FlowGroup:
    """A ``[[flows]]`` entry: ``count`` identical campus flows beside the DTN and the campus hosts.

    For the experiments that need flows one by one (the Jenks papers' tests: per-flow base
    RTT and CCA, flows that join, leave or "degrade", UDP beside TCP). ``cca`` is a TCP
    congestion control or ``udp``; ``rate`` is a UDP flow's sending rate, or a TCP flow's cap
    outside the bottleneck (its access link; None: none). ``schedule`` changes that rate over
    time: ``[["30s", "5M"], ["60s", "100M"]]``. ``size`` makes it a fixed-size transfer (its
    FCT is recorded); ``stop`` ends it (nothing more is sent from then). ``shaped``: the flow
    passes the campus shaper, as the campus hosts do. Schedules and stops take effect at the
    first period boundary at or after their time (ours: the plants act once per period T).
    """

    name: Text = "flows"
    count: Whole = 1
    rtt: Time = 0.010  # base RTT, s
    cca: Text = "cubic"
    rate: OptRate = None  # bit/s
    start: Time = 0.0  # s
    stop: OptTime = None  # s
    size: OptSize = None  # bytes
    schedule: Schedule = ()  # (time s, rate bit/s)
    shaped: Flag = True


@dataclass
class Scenario:
    """Everything a plant needs to be built; SI floats only."""

    name: Text = "custom"
    link: LinkConfig = field(default_factory=LinkConfig)
    dtn: DtnConfig = field(default_factory=DtnConfig)
    campus: CampusConfig = field(default_factory=CampusConfig)
    shaper: ShaperConfig = field(default_factory=ShaperConfig)
    flows: Annotated[tuple[FlowGroup, ...], BeforeValidator(_flow_list)] = ()  # [[flows]] entries
    period: Time = 1.0  # T, s
    duration: Time = 120.0  # s
    seed: Whole = 0
    description: Text = ""

    def __post_init__(self) -> None:
        _validate(self)

    # -- derived quantities --------------------------------------------------
    @property
    def capacity(self) -> float:
        return self.link.capacity

    @property
    def buffer_bytes(self) -> float:
        """Bottleneck buffer in bytes (default: buffer_bdp x BDP of the DTN path)."""
        if self.link.buffer is not None:
            return self.link.buffer
        return self.link.buffer_bdp * self.link.capacity * self.dtn.rtt / 8.0

    @property
    def u_min(self) -> float:
        return self.shaper.min_rate

    @property
    def link_burst_bytes(self) -> float:
        """Tokens of the bottleneck's token bucket, bytes (``link.burst``; default ours: 1 ms of
        B_max and at least two frames, the smallest burst with which tc's TBF on the netns
        testbed holds its rate exactly; the fluid plant counts them as buffer for its packet noise)."""
        if self.link.burst is not None:
            return self.link.burst
        return max(LINK_MIN_BURST_FRAMES * FRAME_BYTES, self.link.capacity / 8.0 * LINK_BURST_TIME)

    @property
    def flow_count(self) -> int:
        """Flows one plant instance carries: the DTN's streams, the campus hosts' flows (one per host
        for Weibull and UDP traffic), the short-flow senders and every ``[[flows]]`` flow."""
        c = self.campus
        campus = c.streams if c.traffic == "long" else c.hosts
        return self.dtn.streams + campus + c.short_flow_senders + sum(g.count for g in self.flows)

    @property
    def u_max(self) -> float:
        return self.shaper.max_rate if self.shaper.max_rate is not None else self.link.capacity

    @property
    def steps(self) -> int:
        """Number of control periods in ``duration``."""
        return int(round(self.duration / self.period))

    def check_target(self, target: float) -> float:
        """Raise a one-line ValueError for a DTN target outside [0, B_max]."""
        if not target == target or target < 0:  # NaN or negative
            raise ValueError(f"target rate must be a non-negative number, got {target!r}")
        if target > self.link.capacity:
            raise ValueError(
                f"target rate {target / 1e6:.1f} Mbit/s is above the bottleneck capacity "
                f"B_max = {self.link.capacity / 1e6:.1f} Mbit/s of scenario '{self.name}'"
            )
        return float(target)

    def trivial_rate(self, target: float) -> float:
        """The paper's trivial TBF rate B_max - R*_DTN (section 3.7), clipped to the shaper range."""
        return min(max(self.link.capacity - target, self.u_min), self.u_max)

    # -- conversion ----------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """SI values, suitable for JSON metadata; ``Scenario.from_dict`` reads it back."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "scenario") -> Scenario:
        """Build from a TOML-like mapping; unknown keys or bad values raise one-line errors."""
        if not isinstance(data, dict):
            raise ValueError(f"{source}: 'scenario' must be a table")
        _check_raw(data, source)
        try:
            sc = cls(**data)
        except ValidationError as exc:
            raise ValueError(_error_line(exc, source)) from None
        try:
            _check_buffer_regime(sc)
        except ValueError as exc:
            raise ValueError(f"{source}: {exc}") from None
        return sc

    def replace(self, **changes: Any) -> Scenario:
        """Copy with top-level fields or sections replaced, e.g. ``replace(dtn={"cca": "bbr2"})``."""
        kwargs: dict[str, Any] = {}
        for key, val in changes.items():
            cur = getattr(self, key)
            if dataclasses.is_dataclass(cur) and isinstance(val, dict):
                sub = {k: v for k, v in val.items() if not isinstance(v, dict)}
                nested = {k: v for k, v in val.items() if isinstance(v, dict)}
                for nk, nv in nested.items():
                    sub[nk] = dataclasses.replace(getattr(cur, nk), **nv)
                kwargs[key] = dataclasses.replace(cur, **sub)
            else:
                kwargs[key] = val
        try:
            return dataclasses.replace(self, **kwargs)
        except ValidationError as exc:
            raise ValueError(_error_line(exc, f"scenario '{self.name}'")) from None

    def with_overrides(self, assignments: list[str]) -> Scenario:
        """Apply CLI-style overrides ``["dtn.cca=bbr2", "link.capacity=100M"]`` through the parser."""
        data = self.to_dict()
        for item in assignments:
            if "=" not in item:
                raise ValueError(f"override {item!r}: expected KEY=VALUE, e.g. dtn.cca=bbr2")
            key, value = item.split("=", 1)
            parts = key.strip().split(".")
            node = data
            for p in parts[:-1]:
                if not isinstance(node.get(p), dict):
                    raise ValueError(f"override {item!r}: unknown scenario section '{p}'")
                node = node[p]
            node[parts[-1]] = _coerce_literal(value.strip())
        return Scenario.from_dict(data, source="overrides")


# -- parsing -------------------------------------------------------------------

def parse_override(item: str) -> tuple[str, Any]:
    """``"KEY=VALUE"`` -> (KEY, VALUE as bool/None/int/float/str), as ``--set`` reads it."""
    if "=" not in item:
        raise ValueError(f"override {item!r}: expected KEY=VALUE, e.g. dtn.cca=bbr2")
    key, value = item.split("=", 1)
    if not key.strip():
        raise ValueError(f"override {item!r}: empty key")
    return key.strip(), _coerce_literal(value.strip())


def _coerce_literal(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null", ""):
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _to_nested(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (_to_nested(v) if isinstance(v, dict) else v) for k, v in d.items()}


_SECTIONS: dict[str, Any] = {}  # section key -> its class, filled below


def _error_line(exc: ValidationError, source: str) -> str:
    """The first error of ``exc`` as one line naming the scenario key (``flows[0].rtt``)."""
    err = exc.errors()[0]
    loc = ""
    for part in err["loc"]:
        loc += f"[{part}]" if isinstance(part, int) else (f".{part}" if loc else str(part))
    kind = err["type"]
    if kind == "unexpected_keyword_argument":
        sections = [p for p in err["loc"][:-1] if isinstance(p, str)]
        owner = _SECTIONS.get(sections[-1], Scenario) if sections else Scenario
        known = ", ".join(sorted(f.name for f in fields(owner)))
        msg = f"unknown scenario key '{loc}' (known: {known})"
    elif kind in ("dataclass_type", "dataclass_args_type"):
        msg = f"'{loc or 'scenario'}' must be a table"
    elif kind == "value_error":
        text = str(err["ctx"]["error"]) if "ctx" in err else err["msg"]
        if not loc or text.startswith("scenario '"):
            msg = text
        else:  # a schedule's own errors start with the pair's index: flows[0].schedule[1] ...
            msg = f"{loc}{text}" if text.startswith("[") else f"{loc}: {text}"
    else:
        msg = f"{loc}: {err['msg']}" if loc else err["msg"]
    return msg if msg.startswith(source) else f"{source}: {msg}"


MIN_PERIOD = 1e-3  # s: the control period; below it no plant or tc actuator keeps up
LINK_BURST_TIME = 0.001  # s of B_max in the bottleneck's default token burst
LINK_MIN_BURST_FRAMES = 2
# Ours: a buffer beyond 10 BDP of the DTN path is a mistake, not a regime anyone
# runs -- the deep variants are 1 BDP and the default is 0.05 BDP.
MAX_BUFFER_BDP = 10.0
MAX_STEPS = _limits.MAX_STEPS  # periods per episode (duration / period)
_FLOWS_MAX = int(_limits.BOUNDS["flows"].hi)  # flows in all [[flows]] tables


def LIMITS_MAX(s: Scenario) -> list[tuple[str, Any, float]]:  # noqa: N802 - a table, read like a constant
    """(key, value, upper limit) of every bounded scenario number (ours; the paper's values are far inside)."""
    return [
        ("link.capacity", s.link.capacity, 1e12),  # 1 Tbit/s
        ("link.buffer", s.link.buffer, 1e10),  # bytes
        ("link.buffer_bdp", s.link.buffer_bdp, 1e3),
        ("link.burst", s.link.burst, 1e10),  # bytes
        ("link.arrival_idc", s.link.arrival_idc, 100.0),
        ("dtn.streams", s.dtn.streams, 10_000),
        ("dtn.rtt", s.dtn.rtt, 10.0),
        ("dtn.transfer", s.dtn.transfer, 1e15),
        ("campus.hosts", s.campus.hosts, 100_000),
        ("campus.flows_per_host", s.campus.flows_per_host, 10_000),
        ("campus.hosts x campus.flows_per_host", s.campus.hosts * s.campus.flows_per_host, 100_000),
        ("campus.short_flow_senders", s.campus.short_flow_senders, 100_000),
        ("campus.rtt", s.campus.rtt, 10.0),
        ("campus.udp_rate", s.campus.udp_rate, 1e12),
        ("period", s.period, 3600.0),
        ("duration", s.duration, 1e8),
        ("duration / period", s.duration / s.period, MAX_STEPS),
        ("seed", s.seed, 2**63 - 1),
    ]


_SECTIONS.update(link=LinkConfig, dtn=DtnConfig, campus=CampusConfig, weibull=WeibullConfig,
                 shaper=ShaperConfig, flows=FlowGroup)


def _validate(s: Scenario) -> None:
    def need(cond: bool, key: str, what: str) -> None:
        if not cond:
            raise ValueError(f"scenario '{s.name}': {key} {what}")

    # Every number finite and within a range (limits are validation, not crashes or runs that
    # exhaust the machine). The ranges are ours, generous around the paper's values.
    def walk(obj: Any, pre: str) -> None:
        for f in fields(obj):
            v = getattr(obj, f.name)
            if dataclasses.is_dataclass(v):
                walk(v, f"{pre}{f.name}.")
            elif isinstance(v, float) and not math.isfinite(v):
                raise ValueError(f"scenario '{s.name}': {pre}{f.name} must be a finite number, got {v!r}")

    walk(s, "")
    for i, g in enumerate(s.flows):
        walk(g, f"flows[{i}].")
    need(s.period >= MIN_PERIOD, "period", f"must be at least {MIN_PERIOD * 1e3:g} ms (got {s.period:g} s)")
    for key, value, hi in LIMITS_MAX(s):
        if value is not None and value > hi:
            got = f"{value:g}" if isinstance(value, float) or abs(value) < 10**15 else f"a {len(str(value))}-digit number"
            need(False, key, f"must be at most {hi:g} (got {got})")
    need(s.link.capacity > 0, "link.capacity", "must be > 0")
    need(s.link.buffer is None or s.link.buffer > 0, "link.buffer", "must be > 0")
    need(s.link.buffer_bdp > 0, "link.buffer_bdp", "must be > 0")
    need(s.link.arrival_idc is None or s.link.arrival_idc >= 0, "link.arrival_idc", "must be >= 0")
    bkey = "link.buffer" if s.link.buffer is not None else "link.buffer_bdp"
    need(s.buffer_bytes >= MTU, bkey,
         f"gives a bottleneck buffer of {s.buffer_bytes:.0f} bytes, below one MTU ({MTU} bytes)")

    need(s.dtn.streams >= 0, "dtn.streams", "must be >= 0")
    need(s.dtn.rtt > 0, "dtn.rtt", "must be > 0")
    need(s.dtn.cca in CCAS, "dtn.cca", f"must be one of {', '.join(CCAS)} (got {s.dtn.cca!r})")
    need(s.dtn.transfer is None or s.dtn.transfer > 0, "dtn.transfer", "must be > 0")
    need(s.campus.hosts >= 0, "campus.hosts", "must be >= 0")
    need(s.campus.flows_per_host >= 1, "campus.flows_per_host", "must be >= 1")
    need(s.campus.rtt > 0, "campus.rtt", "must be > 0")
    need(s.campus.cca in CCAS, "campus.cca", f"must be one of {', '.join(CCAS)} (got {s.campus.cca!r})")
    need(
        s.campus.traffic in TRAFFIC_KINDS,
        "campus.traffic",
        f"must be one of {', '.join(TRAFFIC_KINDS)} (got {s.campus.traffic!r})",
    )
    need(s.campus.short_flow_senders >= 0, "campus.short_flow_senders", "must be >= 0")
    w = s.campus.weibull
    need(w.gap_shape > 0 and w.size_shape > 0, "campus.weibull", "shapes must be > 0")
    need(0 < w.gap_min <= w.gap_max, "campus.weibull.gap_min/gap_max", "must satisfy 0 < min <= max")
    need(0 < w.size_min <= w.size_max, "campus.weibull.size_min/size_max", "must satisfy 0 < min <= max")
    need(s.duration >= s.period, "duration", "must be at least one period")
    need(s.seed >= 0, "seed", "must be >= 0")
    need(sum(g.count for g in s.flows) <= _FLOWS_MAX, "flows", f"must hold at most {_FLOWS_MAX} flows in all")
    for i, g in enumerate(s.flows):
        key = f"flows[{i}] ('{g.name}')"
        need(g.count >= 1, key, "count must be >= 1")
        need(0 < g.rtt <= 10.0, key, "rtt must be > 0 and at most 10 s")
        need(g.cca in (*CCAS, "udp"), key, f"cca must be one of {', '.join((*CCAS, 'udp'))} (got {g.cca!r})")
        need(g.cca != "udp" or g.rate is not None, key, "a udp flow needs its sending rate (rate)")
        need(g.rate is None or 0 < g.rate <= 1e12, key, "rate must be > 0 and at most 1 Tbit/s")
        need(g.start >= 0, key, "start must be >= 0")
        need(g.stop is None or g.stop > g.start, key, "stop must be after start")
        need(g.size is None or 0 < g.size <= 1e15, key, "size must be > 0 bytes")
        need(all(0 < r <= 1e12 and t >= 0 for t, r in g.schedule), key,
             "schedule rates must be > 0 bit/s and times >= 0")
        need(all(a[0] < b[0] for a, b in zip(g.schedule, g.schedule[1:], strict=False)), key,
             "schedule times must increase")
    cap = s.link.capacity
    if s.shaper.rate is not None:
        need(s.shaper.rate <= cap, "shaper.rate", f"({s.shaper.rate:.0f} bit/s) is above B_max = {cap:.0f} bit/s")
    if s.shaper.max_rate is not None:
        need(s.shaper.max_rate <= cap, "shaper.max_rate", f"is above B_max = {cap:.0f} bit/s")
        need(s.shaper.max_rate > s.shaper.min_rate, "shaper.max_rate", "must be > shaper.min_rate")
    need(s.shaper.min_rate < cap, "shaper.min_rate", "must be below B_max")
    need(s.shaper.latency > 0, "shaper.latency", "must be > 0")


def _check_buffer_regime(s: Scenario) -> None:
    """The bound on what users load: at most ``MAX_BUFFER_BDP`` BDP of the DTN path (beyond it a
    buffer is a mistake, not a regime anyone runs; see ``MAX_BUFFER_BDP``).

    Checked on scenarios read from files, built-ins and ``--set`` (``from_dict``), not on
    every ``Scenario`` object: the bottleneck-discipline reproductions build the FFS paper's
    1000-packet Linux queue in code, 12 BDP at its 50 Mbit/s x 20 ms.
    """
    bdp = s.link.capacity * s.dtn.rtt / 8.0
    if s.buffer_bytes > MAX_BUFFER_BDP * bdp * (1 + 1e-9):
        key = "link.buffer" if s.link.buffer is not None else "link.buffer_bdp"
        raise ValueError(f"scenario '{s.name}': {key} gives {s.buffer_bytes / bdp:.3g} BDP of the DTN path "
                         f"({s.link.capacity / 1e6:g} Mbit/s x {s.dtn.rtt * 1e3:g} ms); at most {MAX_BUFFER_BDP:g} BDP")


# -- loading -------------------------------------------------------------------


def builtin_names() -> list[str]:
    """Names of the scenarios shipped in ``scidmz/scenarios``."""
    pkg = resources.files("scidmz") / "scenarios"
    return sorted(p.name[:-5] for p in pkg.iterdir() if p.name.endswith(".toml"))


def load_scenario(name_or_path: str | Path) -> Scenario:
    """A built-in name (``paper-cubic``) or a path to a TOML file."""
    text: str
    source: str
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        if not path.exists():
            raise FileNotFoundError(f"scenario file not found: {path}")
        from .fileio import read_text_input
        from .limits import MAX_SCENARIO_BYTES

        text, source = read_text_input(path, "scenario file", MAX_SCENARIO_BYTES), str(path)
        _prescan(text, source)
    else:
        # A name resolves only to a built-in: "../x" or "/abs/x" must not reach files outside them.
        known = builtin_names()
        res = resources.files("scidmz") / "scenarios" / f"{name_or_path}.toml"
        if str(name_or_path) not in known or not res.is_file():
            raise ValueError(
                f"unknown scenario '{name_or_path}' (built-ins: {', '.join(builtin_names())}; or give a .toml path)"
            )
        text, source = res.read_text(), f"built-in scenario '{name_or_path}'"
    from .fileio import parse_toml

    data = parse_toml(text, source)
    if not data:
        # An empty file is a mistake, not "all defaults".
        raise ValueError(f"{source}: empty scenario (no keys); start from `scidmz scenarios testbed`")
    data.setdefault("name", path.stem if path.suffix == ".toml" else str(name_or_path))
    return Scenario.from_dict(data, source=source)


def _prescan(text: str, source: str) -> None:
    """Count the ``[[flows]]`` table headers before the TOML parser builds them (a 64 MB file
    of tables ran a minute at gigabytes before its limit was checked)."""
    from .limits import BOUNDS

    hi = int(BOUNDS["flow_tables"].hi)
    n = sum(1 for line in text.splitlines() if line.lstrip().startswith("[["))
    if n > hi:
        raise ValueError(f"{source}: {n} [[...]] tables; a scenario holds at most {hi} [[flows]] tables")


def _check_raw(data: dict[str, Any], source: str) -> None:
    """Sizes of the raw tables, checked before pydantic builds a section per entry."""
    from .limits import check, check_depth

    check_depth(data, source)
    flows = data.get("flows")
    if isinstance(flows, list | tuple):
        check("flow_tables", len(flows), f"{source}: [[flows]] tables")
        for i, g in enumerate(flows):
            sched = g.get("schedule") if isinstance(g, dict) else None
            if isinstance(sched, list | tuple):
                check("schedule", len(sched), f"{source}: flows[{i}].schedule entries")


def resolve_scenario(
    scenario: str | Scenario,
    overrides: list[str] | None = None,
    duration: str | float | None = None,
    seed: int | None = None,
) -> Scenario:
    """A Scenario from a name/path/object, with CLI overrides, duration and seed applied."""
    sc = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    if overrides:
        sc = sc.with_overrides(list(overrides))
    changes: dict[str, Any] = {}
    if duration is not None:
        changes["duration"] = parse_time(duration, what="--duration")
    if seed is not None:
        changes["seed"] = int(seed)
    return sc.replace(**changes) if changes else sc
