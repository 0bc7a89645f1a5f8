"""What ``scidmz telemetry replay`` and ``scidmz telemetry capture`` do (the CLI only parses).

Both return ``(result, human)``: ``result`` is the JSON object the CLI prints
last with ``--json``:

* ``series``: one dict per period with ``t``, the seven y fields and, beside
  the RTT means, the period's RTT percentiles per class (``rtt_dtn_p50``,
  ``_p90``, ``_p99``, same for campus; null without a sample);
* ``stale``: per period, the fields held from an earlier period;
* ``rtt_histogram``: every RTT sample of the run per class, in log-spaced bins;
* ``drops`` (per-reason counters: parser, capture file and, live, the kernel's
  PACKET_STATISTICS) with ``drop_bytes``, ``linktypes``, ``records``;
* ``stats`` (data-plane events), ``flows`` (the last period's per-flow
  records), ``warnings``.

Honest outcomes (``outcome``): if more than half of the records (or of the
bytes) were dropped for any one reason, or no packet at all matched the
prefixes, the run fails with one line naming the reason and the count, worded
by its trigger (packets, or bytes), offering ``--allow-drops`` only where
something is left to measure (``refusal``; ``TelemetryInputError``, exit 1),
unless ``allow_drops`` turns that into a warning. Below that, a reason (or a
note: no readable L4, an unsupported tunnel, a clock step) warns with its
packets and bytes. The prefix checks warn when the TCP data bytes going to
the DTN prefix are a sliver of those coming from it (the sender given instead
of the receiver) or when the remote prefix covers the campus side too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..state import STATE_FIELDS, NetworkState
from . import constants as C
from .sources.notes import UNSUPPORTED_TUNNELS

__all__ = ["replay", "capture", "format_state", "outcome", "TelemetryInputError", "HIST_EDGES_S"]


class TelemetryInputError(RuntimeError):
    """The input could not be measured (see ``outcome``): a runtime failure, exit 1."""


def format_state(y: NetworkState, pct: np.ndarray | None = None) -> str:
    """One human line per period; ``pct[c]`` = (p50, p90, p99) of class c's RTT samples (DTN, campus)."""

    def rtt(mean: float, c: int) -> str:
        if pct is None or not np.isfinite(pct[c, 0]):
            return f"{mean * 1e3:8.3f}ms"
        return f"{mean * 1e3:8.3f}ms (p50 {pct[c, 0] * 1e3:.3f} p99 {pct[c, 2] * 1e3:.3f})"

    return (f"t={y.t:8.2f}s  dtn={y.rate_dtn / 1e6:9.3f}Mb/s  campus={y.rate_campus / 1e6:9.3f}Mb/s  "
            f"rtt_dtn={rtt(y.rtt_dtn, 0)}  rtt_campus={rtt(y.rtt_campus, 1)}  "
            f"qd_dtn={y.qdelay_dtn * 1e3:7.3f}ms  qd_campus={y.qdelay_campus * 1e3:7.3f}ms  "
            f"flows={y.active_flows:.0f}")


#: RTT histogram bin edges (s): 1 us to 100 s, five bins a decade (ours: the 1-us tick to
#: far beyond any RTT timeout anyone would set); the first bin also holds samples below
#: 1 us (a 0-tick RTT), the last those above 100 s.
HIST_EDGES_S = np.logspace(-6, 2, 41)

#: Reasons that are not drops: L3-only packets still count in the class rates; the time
#: window and the outliers are what the user asked to leave out; fixed records were read.
#: Read, but with no TCP/UDP header this parser reads (``pcap.NO_L4`` sub-counts of fragment and
#: other_protocol), or read out of time order: counted in the class bytes, no RTT or flow; warned.
NOTES = {
    "fragment": "are IP fragments (not of a mirror tunnel): they count in the class rates, but give no RTT or flow",
    "ipsec_ah": "carry IPsec AH (protocol 51), whose TCP/UDP header is not read: they count in the class rates, "
                "but give no RTT or flow",
    "ipsec_esp": "carry IPsec ESP (protocol 50, encrypted): they count in the class rates, but give no RTT or flow",
    "ipv6_ext_chain": "have more than 16 IPv6 extension headers, beyond which the parser does not look: they count "
                      "in the class rates, but give no RTT or flow",
}
NOT_DROPS = frozenset({"fragment", "other_protocol", "unclassified", "outside_window", "outlier", "record_fixed",
                       "tunnel_fragment", *NOTES, *(f"tunnel_{k}" for k in UNSUPPORTED_TUNNELS)})
_TUNNEL_KEYS = frozenset(f"tunnel_{k}" for k in UNSUPPORTED_TUNNELS)
DROP_FRACTION = 0.5
#: Below DROP_FRACTION a reason still warns above this fraction of the records or bytes (ours: one
#: packet in a hundred can move a rate by a percent; rarer ones are noise such as ARP or LLDP);
#: ``ALWAYS_WARN`` reasons warn at any count, as what they lose is the measured traffic itself.
WARN_FRACTION = 0.01
ALWAYS_WARN = frozenset({"unknown_linktype", "fragment_lost"})
#: Counted, listed under drops, never warned (ours): ARP, LLDP, STP and the like are on every link
#: and carry nothing this measures.
QUIET = frozenset({"non_ip"})
_LINK_HINT = "it reads Ethernet, Linux SLL/SLL2, raw IP, BSD loopback and PPP"
_WHY = {
    "truncated": "were cut by the snap length inside a header that is needed (Ethernet + IPv4 + TCP needs "
                 "48 bytes, each VLAN tag or MPLS label 4 more, IPv6 20 more: capture with -s 128)",
    "non_ip": "are neither IPv4 nor IPv6 (ARP, LLDP, 802.3/LLC, ...)",
    "bad_ip_version": "have an IP version nibble that disagrees with their ethertype or link type",
    "bad_ihl": "have an IPv4 header length below 20 bytes",
    "bad_ip_length": "have an IP length below their header or beyond the frame on the wire",
    "bad_tcp_offset": "have a TCP data offset below 20 bytes or beyond the IP payload",
    "bad_udp_length": "have a UDP length below 8 or beyond the IP payload",
    "mpls_payload": "carry neither IP nor a pseudowire control word below their MPLS labels",
    "truncated_file": "are cut by the end of the file",
    "no_timestamp": "are pcapng simple packet blocks, which carry no timestamp",
    "fragment_lost": "are IP fragments of mirror tunnel packets (GRE, ERSPAN) whose other fragments are missing or "
                     "came too late: the frames inside them are lost",
}


def _drop_line(reason: str, count: int, nbytes: int, records: int, total_bytes: int,
               linktypes: dict[int, int], by_bytes: bool = False) -> str:
    """One line naming a reason, worded by what triggered it: packets, or bytes when the bytes did."""
    from .twin.parse import LINKTYPES

    if reason == "unknown_linktype":
        odd = sorted(((c, lt) for lt, c in linktypes.items() if lt not in LINKTYPES), reverse=True)
        lts = ", ".join(f"{lt}" for _, lt in odd) or "?"
        return (f"{_amount(count, nbytes, records, total_bytes, by_bytes)} have link type {lts}, which scidmz "
                f"telemetry does not read ({_LINK_HINT})")
    if reason == "corrupt_record":
        return (f"{nbytes} of {total_bytes} bytes of the capture lie in {count} corrupt stretch(es) of record "
                "headers that were skipped")
    why = _WHY.get(reason) or NOTES.get(reason) or f"were dropped ({reason})"
    return f"{_amount(count, nbytes, records, total_bytes, by_bytes)} {why}"


def _amount(count: int, nbytes: int, records: int, total_bytes: int, by_bytes: bool) -> str:
    if by_bytes:
        return f"{nbytes} of {total_bytes} bytes ({count} of {records} packets)"
    return f"{count} of {records} packets"


def drops_line(drops: dict[str, int]) -> str:
    """The human ``drops:`` line: only what was dropped, not what was read another way."""
    real = {k: v for k, v in drops.items() if k not in NOT_DROPS and k != "kernel_packets" and v}
    return ", ".join(f"{k}={v}" for k, v in real.items()) or "none"


def refusal(problems: list[str], classified: int) -> str:
    """The one line of a refused run; --allow-drops is offered only where it would measure something."""
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    tail = ("; --allow-drops measures the rest anyway" if classified else
            "; no other packet is left to measure")
    return problems[0] + more + tail


def outcome(src: Any, stats: dict[str, int], classified: int) -> tuple[list[str], list[str]]:
    """(problems, warnings) of a finished replay or capture (module docstring)."""
    records = int(src.records)
    drops, dbytes = dict(src.drops), dict(getattr(src, "drop_bytes", {}))
    total_bytes = int(src.wire_bytes) + int(dbytes.get("corrupt_record", 0))
    problems, warnings = _reason_lines(drops, dbytes, records, total_bytes, src.linktypes)
    tunnels = _tunnel_line(drops, dbytes, records, total_bytes)
    back = int(getattr(src, "clock_steps", 0))
    if back:
        warnings.append(f"the capture's clock stepped back {back} time(s), by up to "
                        f"{int(getattr(src, 'clock_back_ns', 0)) / 1e9:.6g} s (a record earlier than the one "
                        "before it): the packets are measured in time order, so periods around a step mix "
                        "traffic from both sides of it")
    if records == 0 and not problems:
        problems.append("the capture holds no packet")
    elif classified == 0 and not problems:
        if src.packets_in == 0:
            problems.append(f"none of {records} packets is left to measure (--start/--end or --skip-outliers "
                            "removed them all)")
        elif tunnels:
            problems.append(tunnels)
            tunnels = ""
        else:
            problems.append(f"none of {src.packets_in} packets matched --dtn-prefix or --remote-prefix "
                            "(neither as destination nor as source): nothing to measure; check the prefixes")
    if tunnels:
        warnings.append(tunnels)
    outgoing = int(src.dp.cls_ctr[C.TAP_EGRESS, 1:, 1].sum())
    if classified and not outgoing and not problems:
        problems.append(f"none of {classified} matching packets went to --dtn-prefix or --remote-prefix on the "
                        "egress tap, they all came from there: the capture holds only the return direction "
                        "(ACKs), or the prefixes name the senders; no rate or RTT can be measured")
    unc = int(stats.get("unclassified", 0)) - sum(int(drops.get(k, 0)) for k in _TUNNEL_KEYS)
    if classified and src.packets_in and unc / src.packets_in > UNCLASSIFIED_WARN:
        warnings += unclassified_warning(unc, src.packets_in)
    warnings += _prefix_warnings(src.dp, stats, classified)
    exp = int(stats.get("rtt_rejected_expired", 0))
    if exp and exp > 0.01 * (exp + int(stats.get("rtt_samples", 0))):
        warnings.append(f"{exp} ACKs matched data older than the RTT timeout ({src.dp.rtt_timeout:g} s) and gave "
                        "no sample: RTTs above it are missing (--rtt-timeout raises it)")
    return problems, warnings


def _reason_lines(drops: dict[str, int], dbytes: dict[str, int], records: int, total_bytes: int,
                  linktypes: dict[int, int]) -> tuple[list[str], list[str]]:
    """(problems, warnings) of the per-reason counts: a drop above DROP_FRACTION of the packets or
    bytes is a problem; a drop or note above WARN_FRACTION (any, for ALWAYS_WARN) a warning."""
    problems: list[str] = []
    warnings: list[str] = []
    for reason, count in sorted(drops.items(), key=lambda kv: -kv[1]):
        if reason.startswith("kernel_") or reason in _TUNNEL_KEYS:
            continue
        nbytes = int(dbytes.get(reason, 0))
        by_count = records > 0 and reason != "corrupt_record" and count > DROP_FRACTION * records
        by_bytes = total_bytes > 0 and nbytes > DROP_FRACTION * total_bytes
        if reason not in NOT_DROPS and (by_count or by_bytes):
            problems.append(_drop_line(reason, count, nbytes, records, total_bytes, linktypes,
                                       (by_bytes and not by_count) or reason == "fragment_lost"))
        elif (reason in NOTES or reason not in NOT_DROPS | QUIET) and count and (
                reason in ALWAYS_WARN or count > WARN_FRACTION * records or nbytes > WARN_FRACTION * total_bytes):
            warnings.append(_drop_line(reason, count, nbytes, records, total_bytes, linktypes, True))
    return problems, warnings


def _tunnel_line(drops: dict[str, int], dbytes: dict[str, int], records: int, total_bytes: int) -> str:
    """The tunnels seen that this parser does not open (``pcap.UNSUPPORTED_TUNNELS``), named."""
    seen = [(name, int(drops[f"tunnel_{key}"]), int(dbytes.get(f"tunnel_{key}", 0)))
            for key, name in UNSUPPORTED_TUNNELS.items() if drops.get(f"tunnel_{key}")]
    if not seen:
        return ""
    what = "; ".join(f"{n} packets ({b} bytes) are {name}" for name, n, b in seen)
    return (f"{what} (of {records} packets, {total_bytes} bytes): a tunnel scidmz telemetry does not open "
            "(it reads GRE, ERSPAN I/II/III, VXLAN and MPLS pseudowires), so the frames inside are not measured")


def _prefix_warnings(dp: Any, stats: dict[str, int], classified: int) -> list[str]:
    out: list[str] = []
    n_out, n_in = (int(stats.get(k, 0)) for k in ("dtn_out_tcp", "dtn_in_data"))
    b_out, b_in = (int(stats.get(k, 0)) for k in ("dtn_out_payload", "dtn_in_payload"))
    # Weighed in bytes (the rate is bytes): a sender's ACKs may carry a little data of their own, and
    # counting packets then hid it; SENDER_BYTES (ours) is where the data flows the other way.
    if n_out + n_in >= 20 and b_in > 0 and b_out <= SENDER_BYTES * b_in:
        out.append(f"--dtn-prefix: {n_out} TCP packets carrying {b_out} bytes of data went to it, while {n_in} "
                   f"carrying {b_in} bytes came from it: is it the DTN sender? Give the receiving DTN (DTN-r), the "
                   "host the data goes to; as given, its ACKs are measured as the DTN rate and the RTT is the "
                   "sender's")
    both = int(stats.get("both_classified", 0))
    wide = [str(n) for n, cls in dp.lpm if cls == C.CLASS_CAMPUS and n.prefixlen == 0]
    if wide or (classified and both > 0.5 * classified):
        what = f"--remote-prefix {', '.join(wide)} covers every address" if wide else \
            f"{both} of {classified} classified packets have both addresses inside the prefixes"
        out.append(f"{what}: a packet's direction comes from its destination, so ACKs going to the remote side "
                   "count as outgoing traffic and give no RTT; the remote prefix must not cover the campus")
    return out


#: The sender check: the DTN prefix looks like the sender when the TCP data bytes going to it are
#: at most this fraction of those coming from it (ours: a receiver's own traffic, say a control
#: channel, stays far below 1 % of a bulk transfer's bytes).
SENDER_BYTES = 0.01

#: Above this fraction of unclassified packets a replay's rates say more about the prefixes than the network.
UNCLASSIFIED_WARN = 0.5


def unclassified_warning(unclassified: int, packets: int) -> list[str]:
    """One warning when most packets matched neither prefix (class_lpm missed): rates would read ~0."""
    if packets <= 0 or unclassified / packets <= UNCLASSIFIED_WARN:
        return []
    return [f"{unclassified} of {packets} packets ({100 * unclassified / packets:.0f} %) matched neither "
            "--dtn-prefix nor --remote-prefix: the rates count only the rest; check the prefixes"]


def _finite(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


class _Rtt:
    """The replay's RTT outputs from the period batches: percentiles, histogram, samples."""

    def __init__(self, tick_s: float, keep_samples: bool) -> None:
        self.tick_s = tick_s
        self.hist = np.zeros((2, len(HIST_EDGES_S) - 1), np.int64)
        self.keep = keep_samples
        self.samples: list[np.ndarray] = []

    def add(self, batch: Any) -> np.ndarray:
        from .controlplane import QUANTILES, rtt_percentiles
        from .twin.layout import DR_CLS, DR_RTT

        r = batch.rtt
        cls = np.ascontiguousarray(r[:, DR_CLS])
        rtt_s = r[:, DR_RTT] * self.tick_s
        pct = np.full((batch.rows.shape[0], 2, len(QUANTILES)), np.nan)
        rtt_percentiles(cls, rtt_s, np.ascontiguousarray(batch.rtt_end), np.array(QUANTILES), pct)
        if r.shape[0]:  # HIST_EDGES_S are uniform in log10: the bin is arithmetic
            with np.errstate(divide="ignore"):
                b = np.floor((np.log10(rtt_s) + 6.0) * 5.0)
            b = np.clip(np.nan_to_num(b, neginf=0.0), 0, len(HIST_EDGES_S) - 2).astype(np.int64)
            for j, c in enumerate((C.CLASS_DTN, C.CLASS_CAMPUS)):
                self.hist[j] += np.bincount(b[cls == c], minlength=len(HIST_EDGES_S) - 1)
        if self.keep and r.shape[0]:
            self.samples.append(r)
        return pct

    def histogram(self) -> dict[str, Any]:
        return {"edges_s": [float(x) for x in HIST_EDGES_S], "dtn": self.hist[0].tolist(),
                "campus": self.hist[1].tolist()}


def write_samples(path: str, rows: list[np.ndarray], t0_ns: int, tick_s: float) -> int:
    """The RTT samples as Parquet (time, t, flow 5-tuple and family, class, RTT in s), atomically."""
    import pandas as pd

    from ..fileio import atomic_path
    from .twin.layout import DR_CLS, DR_DPORT, DR_PROTO, DR_RTT, DR_SPORT, DR_SRC_HI, DR_TS_NS
    from .twin.parse import addr_text

    r = np.concatenate(rows) if rows else np.zeros((0, 11), np.int64)
    words = r[:, DR_SRC_HI:DR_SRC_HI + 4].view(np.uint64)
    text = {}
    for cols in ((0, 1), (2, 3)):
        uniq, inv = np.unique(words[:, list(cols)], axis=0, return_inverse=True)
        names = np.array([addr_text(h, lo) for h, lo in uniq.tolist()], dtype=object)
        text[cols] = names[inv.reshape(-1)] if len(uniq) else np.zeros(0, object)
    ts_ns = r[:, DR_TS_NS]
    df = pd.DataFrame({
        "time": pd.to_datetime(ts_ns, unit="ns", utc=True),
        "t": (ts_ns - t0_ns) / 1e9,
        "src": text[(0, 1)], "dst": text[(2, 3)],
        "sport": r[:, DR_SPORT].astype(np.uint16), "dport": r[:, DR_DPORT].astype(np.uint16),
        "proto": r[:, DR_PROTO].astype(np.uint8),
        "family": np.where(words[:, 0] == 0, np.where((words[:, 1] >> np.uint64(32)) == 0xFFFF, 4, 6), 6).astype(np.uint8),
        "cls": pd.Categorical([C.CLASS_NAMES[c] for c in r[:, DR_CLS]], categories=list(C.CLASS_NAMES)),
        "rtt": r[:, DR_RTT] * tick_s,
    })
    with atomic_path(path, what="--samples") as tmp:
        df.to_parquet(tmp, index=False)
    return len(df)


def replay(egress: str, ingress: str | None = None, *, period: float = 1.0,
           dtn_prefix: list[str] | str = C.DEFAULT_DTN_PREFIX,
           remote_prefix: list[str] | str = C.DEFAULT_REMOTE_PREFIX, realtime: bool = False,
           rtt_tap: str = "egress", on_sample: Callable[[NetworkState], None] | None = None,
           rtt_timeout: float = C.RTT_TIMEOUT_US * 1e-6, window: tuple[int | None, int | None] = (None, None),
           skip_outliers: bool = False, samples: str | None = None, allow_drops: bool = False,
           ) -> tuple[dict[str, Any], str]:
    """Replay the bottleneck (egress) tap capture, plus optionally the ingress tap's."""
    import time

    from .collector import state_of_row
    from .controlplane import QUANTILES
    from .twin.source import TelemetrySource

    src = TelemetrySource.from_pcaps(egress, ingress, period=period, dtn_prefix=dtn_prefix,
                                     remote_prefix=remote_prefix, rtt_tap=_tap(rtt_tap), rtt_timeout=rtt_timeout,
                                     window=window, skip_outliers=skip_outliers)
    rtt = _Rtt(src.dp.tick_ns * 1e-9, samples is not None)
    rows, pcts = [], []
    wall0, k = time.monotonic(), 0
    for b in src.batches():
        rows.append(b.rows)
        pcts.append(rtt.add(b))
        if realtime or on_sample:
            for r in b.rows:
                k += 1
                if realtime:
                    time.sleep(max(0.0, wall0 + k * period - time.monotonic()))
                if on_sample:
                    on_sample(state_of_row(r)[0])
    rows_a = np.concatenate(rows) if rows else np.zeros((0, 15))
    pct = np.concatenate(pcts) if pcts else np.zeros((0, 2, len(QUANTILES)))
    stats = src.stats()
    classified = _classified(src, stats)
    problems, warnings = outcome(src, stats, classified)
    if problems and not allow_drops:
        raise TelemetryInputError(refusal(problems, classified))
    res = _result(src, rows_a, pct, stats)
    res["rtt_histogram"] = rtt.histogram()
    res["packets"] = src.packets_in
    res["records"] = src.records
    res["classified"] = classified
    res["warnings"] = problems + warnings
    if samples is not None:
        t0_ns = src.collector.t0_ns if src.collector is not None else 0
        res["samples"] = {"path": str(samples), "rows": write_samples(samples, rtt.samples, t0_ns, rtt.tick_s)}
    human = "\n".join([*(format_state(state_of_row(r)[0], p) for r, p in zip(rows_a, pct, strict=True)),
                       f"drops: {drops_line(res['drops'])}"])
    return res, human


def _classified(src: Any, stats: dict[str, int]) -> int:
    """Packets that hit class_lpm: those handed to the data plane, less the unusable and unclassified."""
    from .twin.parse import REASONS

    gone = sum(int(v) for kk, v in src.drops.items() if kk in REASONS and kk not in (
        "fragment", "other_protocol", "corrupt_record", "truncated_file", "no_timestamp", "outside_window",
        "outlier", "unclassified", "fragment_lost"))
    return max(0, int(src.packets_in) - gone - int(stats.get("unclassified", 0)))


def _result(src: Any, rows: np.ndarray, pct: np.ndarray, stats: dict[str, int]) -> dict[str, Any]:
    from .controlplane import QUANTILES

    col = src.collector
    series = []
    names = [f"rtt_{c}_p{round(q * 100)}" for c in ("dtn", "campus") for q in QUANTILES]
    for r, p in zip(rows.tolist(), pct.reshape(len(rows), -1).tolist(), strict=True):
        d = {"t": r[0], **dict(zip(STATE_FIELDS, r[1:8], strict=True))}
        d.update(zip(names, (_finite(v) for v in p), strict=True))
        series.append(d)
    stale = [[f for f, s in zip(STATE_FIELDS, r[8:15], strict=True) if s] for r in rows.tolist()]
    return {
        "fields": ["t", *STATE_FIELDS],
        "series": series,
        "stale": stale,
        "drops": dict(sorted(src.drops.items())),
        "drop_bytes": dict(sorted(getattr(src, "drop_bytes", {}).items())),
        "linktypes": {str(k): v for k, v in sorted(getattr(src, "linktypes", {}).items())},
        "stats": stats,
        "flows": [] if col is None else col.flow_records(),
    }


def capture(egress: str, ingress: str | None = None, *, period: float = 1.0, duration: float | None = None,
            dtn_prefix: list[str] | str = C.DEFAULT_DTN_PREFIX,
            remote_prefix: list[str] | str = C.DEFAULT_REMOTE_PREFIX, rtt_tap: str = "egress",
            stream: bool = True, rtt_timeout: float = C.RTT_TIMEOUT_US * 1e-6,
            allow_drops: bool = False) -> tuple[dict[str, Any], str]:
    """Capture live on the mirror interfaces, printing each y(t) as it is measured."""
    from .twin.source import TelemetrySource

    src = TelemetrySource.live(egress, ingress, period=period, duration=duration, dtn_prefix=dtn_prefix,
                               remote_prefix=remote_prefix, rtt_tap=_tap(rtt_tap), rtt_timeout=rtt_timeout)
    series, stale = [], []
    try:
        for y in src:
            series.append(y)
            col = src.collector
            stale.append(sorted(kk for kk, v in col.stale.items() if v) if col is not None else [])
            if stream:
                print(format_state(y), flush=True)
    except KeyboardInterrupt:
        pass  # Ctrl-C ends a capture without a duration; the rings are closed by the source
    stats = src.stats()
    classified = _classified(src, stats)
    problems, warnings = outcome(src, stats, classified) if src.records or series else ([], [])
    if problems and not allow_drops:
        raise TelemetryInputError(refusal(problems, classified))
    rows = np.array([[y.t, *y.as_vector(), *(f in s for f in STATE_FIELDS)] for y, s in zip(series, stale,
                                                                                           strict=True)])
    res = _result(src, rows.reshape(-1, 15), np.full((len(series), 2, 3), np.nan), stats)
    res["warnings"] = problems + warnings
    res["packets"] = src.packets_in
    return res, f"{len(series)} periods; drops: {drops_line(res['drops'])}"


def _tap(name: str) -> int:
    taps = {"egress": C.TAP_EGRESS, "ingress": C.TAP_INGRESS}
    if name not in taps:
        raise ValueError(f"--rtt-tap must be 'egress' or 'ingress', got {name!r}")
    return taps[name]
