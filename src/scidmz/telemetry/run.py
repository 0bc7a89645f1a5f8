"""What ``scidmz telemetry replay`` and ``scidmz telemetry capture`` do (the CLI only parses).

Both return ``(result, human)``: ``result`` is the JSON object the CLI prints
last with ``--json`` (``series``: one dict per period with ``t`` and the seven
y fields; ``drops``: per-reason drop counters; ``stats``: data-plane event
counters; ``flows``: the last period's per-flow records).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..state import STATE_FIELDS, NetworkState
from . import constants as C

__all__ = ["replay", "capture", "format_state"]


def format_state(y: NetworkState) -> str:
    return (f"t={y.t:8.2f}s  dtn={y.rate_dtn / 1e6:9.3f}Mb/s  campus={y.rate_campus / 1e6:9.3f}Mb/s  "
            f"rtt_dtn={y.rtt_dtn * 1e3:8.3f}ms  rtt_campus={y.rtt_campus * 1e3:8.3f}ms  "
            f"qd_dtn={y.qdelay_dtn * 1e3:7.3f}ms  qd_campus={y.qdelay_campus * 1e3:7.3f}ms  "
            f"flows={y.active_flows:.0f}")


def _result(series: list[NetworkState], src: Any) -> dict[str, Any]:
    flows = src.flows
    return {
        "fields": ["t", *STATE_FIELDS],
        "series": [y.as_dict() for y in series],
        "drops": dict(sorted(src.drops.items())),
        "stats": src.stats(),
        "flows": [] if flows is None else flows.to_dict(orient="records"),
    }


def replay(egress: str, ingress: str | None = None, *, period: float = 1.0,
           dtn_prefix: list[str] | str = C.DEFAULT_DTN_PREFIX,
           remote_prefix: list[str] | str = C.DEFAULT_REMOTE_PREFIX, realtime: bool = False,
           rtt_tap: str = "egress", on_sample: Callable[[NetworkState], None] | None = None,
           ) -> tuple[dict[str, Any], str]:
    """Replay the bottleneck (egress) tap capture, plus optionally the ingress tap's."""
    from .source import TelemetrySource

    src = TelemetrySource.from_pcaps(egress, ingress, period=period, dtn_prefix=dtn_prefix,
                                     remote_prefix=remote_prefix, realtime=realtime,
                                     rtt_tap=_tap(rtt_tap))
    series, stale = [], []
    for y in src:
        series.append(y)
        col = src.collector
        stale.append(sorted(k for k, v in col.stale.items() if v) if col is not None else [])
        if on_sample:
            on_sample(y)
    res = _result(series, src)
    # the variables each period held from an earlier one (no fresh sample), per ARCHITECTURE.md
    res["stale"] = stale
    res["packets"] = src.packets_in
    res["warnings"] = unclassified_warning(res["stats"].get("unclassified", 0), src.packets_in)
    drops = ", ".join(f"{k}={v}" for k, v in res["drops"].items()) or "none"
    human = "\n".join([*(format_state(y) for y in series), f"drops: {drops}"])
    return res, human


#: Above this fraction of unclassified packets a replay's rates say more about the prefixes than the network.
UNCLASSIFIED_WARN = 0.5


def unclassified_warning(unclassified: int, packets: int) -> list[str]:
    """One warning when most packets matched neither prefix (class_lpm missed): rates would read ~0."""
    if packets <= 0 or unclassified / packets <= UNCLASSIFIED_WARN:
        return []
    return [f"{unclassified} of {packets} packets ({100 * unclassified / packets:.0f} %) matched neither "
            "--dtn-prefix nor --remote-prefix: the rates count only the rest; check the prefixes"]


def capture(egress: str, ingress: str | None = None, *, period: float = 1.0, duration: float | None = None,
            dtn_prefix: list[str] | str = C.DEFAULT_DTN_PREFIX,
            remote_prefix: list[str] | str = C.DEFAULT_REMOTE_PREFIX, rtt_tap: str = "egress",
            stream: bool = True) -> tuple[dict[str, Any], str]:
    """Capture live on the mirror interfaces, printing each y(t) as it is measured."""
    from .source import TelemetrySource

    src = TelemetrySource.live(egress, ingress, period=period, duration=duration, dtn_prefix=dtn_prefix,
                               remote_prefix=remote_prefix, rtt_tap=_tap(rtt_tap))
    series = []
    try:
        for y in src:
            series.append(y)
            if stream:
                print(format_state(y), flush=True)
    except KeyboardInterrupt:
        pass  # Ctrl-C ends a capture without a duration; the rings are closed by the source
    res = _result(series, src)
    drops = ", ".join(f"{k}={v}" for k, v in res["drops"].items()) or "none"
    return res, f"{len(series)} periods; drops: {drops}"


def _tap(name: str) -> int:
    taps = {"egress": C.TAP_EGRESS, "ingress": C.TAP_INGRESS}
    if name not in taps:
        raise ValueError(f"--rtt-tap must be 'egress' or 'ingress', got {name!r}")
    return taps[name]
