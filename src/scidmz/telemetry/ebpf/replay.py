"""The eBPF programs on recorded frames through BPF_PROG_TEST_RUN, next to the twin on the same frames.

``EbpfReplay`` loads the tc programs with the test clock (``clock_skb``: a
program's time is the frame's ``skb->tstamp``) and attaches nothing: each
frame runs through the program of its hook in the kernel (the JIT-compiled
code a router runs), then the maps are read like a live router's. It is the
harness of the equivalence tests against the twin and of the cost benchmark.

``twin_packets`` turns the same (hook, time, frame) sequence into the twin's
tap copies, by what each hook stands for (``layout.HOOKS``): ``lan_in`` is
the ingress tap, ``wan_out`` the egress tap, ``wan_in`` one copy on each tap
(ingress first, the twin's order on equal timestamps).

``split_tunnelled`` says plainly which frames the comparison leaves out: the
twin decapsulates GRE, ERSPAN, VXLAN and MPLS pseudowires and measures the
inner packet; the programs count such a frame as ``parse_tunnel`` and do
not measure it (docs/telemetry_ebpf.md "Known gaps").
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from .. import constants as C
from ..collector import DEFAULT_ALPHA
from ..twin.parse import PACKET_DTYPE, parse_frames
from .build import build
from .layout import HOOKS
from .objects import EbpfObject, cfg_bytes, class_entries
from .view import EbpfCollector, EbpfView

__all__ = ["EbpfReplay", "twin_packets", "split_tunnelled", "HOOK_PROGRAM", "HOOK_TAPS"]

HOOK_PROGRAM = {"lan_in": "scidmz_lan_in", "wan_in": "scidmz_wan_in", "wan_out": "scidmz_wan_out"}
HOOK_TAPS: dict[str, tuple[int, ...]] = {
    "lan_in": (C.TAP_INGRESS,), "wan_in": (C.TAP_INGRESS, C.TAP_EGRESS), "wan_out": (C.TAP_EGRESS,),
}


class EbpfReplay:
    """The three tc programs loaded with the test clock (see module docstring). Close it (or ``with``)."""

    def __init__(self, dtn_prefix: str | list[str] = C.DEFAULT_DTN_PREFIX,
                 remote_prefix: str | list[str] = C.DEFAULT_REMOTE_PREFIX, rtt_tap: int = C.TAP_INGRESS) -> None:
        cfg = cfg_bytes(class_entries(dtn_prefix, remote_prefix), rtt_tap, True, 0, 0)
        self.obj = EbpfObject(build(), cfg, tuple(HOOK_PROGRAM.values()))
        self._now = 0.0
        self.view = EbpfView(self.obj, clock=lambda: self._now)
        self.retvals: set[int] = set()

    def run(self, hook: str, frame: bytes, ts_ns: int, repeat: int = 1) -> int:
        """Run ``frame`` through ``hook``'s program at time ``ts_ns``; the kernel's ns per run."""
        if hook not in HOOK_PROGRAM:
            raise ValueError(f"hook must be one of {', '.join(HOOKS)}, got {hook!r}")
        ret, ns = self.obj.test_run(HOOK_PROGRAM[hook], frame, ts_ns, repeat)
        self.retvals.add(ret)
        self._now = max(self._now, ts_ns / 1e9)
        return ns

    def run_all(self, events: Iterable[tuple[str, int, bytes]]) -> None:
        for hook, ts, fr in events:
            self.run(hook, fr, ts)

    def advance_clock(self, t_s: float) -> None:
        """Move the collector's clock to ``t_s`` (never backwards): a period boundary."""
        self._now = max(self._now, float(t_s))

    def collector(self, alpha: float = DEFAULT_ALPHA, t0: float | None = None) -> EbpfCollector:
        return EbpfCollector(self.view, alpha, t0)

    def close(self) -> None:
        self.obj.close()

    def __enter__(self) -> EbpfReplay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def split_tunnelled(events: Iterable[tuple[str, int, bytes]],
                    ) -> tuple[list[tuple[str, int, bytes]], list[tuple[str, int, bytes]]]:
    """(events the programs measure as the twin does, events whose frame the twin decapsulates).

    The twin's frame length of an Ethernet frame is its wire length unless it went inside a
    tunnel (then the inner frame's): that is the test, from the twin's own parser.
    """
    ev = list(events)
    if not ev:
        return [], []
    pk = twin_packets([(("lan_in" if h == "wan_in" else h), t, f) for h, t, f in ev])
    inner = pk["frame_len"] != np.array([len(f) for _, _, f in ev])
    return [e for e, x in zip(ev, inner, strict=True) if not x], [e for e, x in zip(ev, inner, strict=True) if x]


def twin_packets(events: Iterable[tuple[str, int, bytes]]) -> np.ndarray:
    """The twin's parsed tap copies (``parse.PACKET_DTYPE``) of (hook, ts_ns, frame) events, in order."""
    frames: list[bytes] = []
    ts: list[int] = []
    taps: list[int] = []
    for hook, t, fr in events:
        for tap in HOOK_TAPS[hook]:
            frames.append(fr)
            ts.append(t)
            taps.append(tap)
    if not frames:
        return np.zeros(0, dtype=PACKET_DTYPE)
    lens = np.array([len(f) for f in frames], np.int64)
    off = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    buf = np.frombuffer(b"".join(frames), dtype=np.uint8)
    out = parse_frames(buf, off, lens, lens, 1, np.array(ts, np.int64))
    out["tap"] = taps
    return out
