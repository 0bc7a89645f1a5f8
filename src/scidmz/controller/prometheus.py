"""Prometheus metrics of the daemon, one metric per quantity with its unit in the name.

Names follow the Prometheus conventions (base units, ``_total`` for
counters): the seven NetworkState variables of the last sample, the applied
campus rate limit u (in shadow mode the rate it would apply instead, as
``scidmz_shadow_rate_bits_per_second``), the policy's own u, the target, and counters of periods,
fallback periods by cause, faults by cause, actuator errors, telemetry gaps, and the packets the
telemetry passed on unmeasured by reason (``reason`` label; plants with ``unmeasured()``, the eBPF ones).
Fallback causes (the ``cause`` label): ``telemetry_timeout`` (no sample for
2T), ``telemetry_invalid`` (a non-finite sample), ``actuator``, ``plant``,
``policy`` (it raised), ``policy_nonfinite`` (it returned NaN/inf, or the MLC
replaced its model's non-finite output by the trivial rate), ``host_agent`` (a DTN's
``scidmz agent`` did not answer or refused the pacing rate: the host place failed), ``foreign`` (the
actuator found an admin's qdisc, QoS or meter where its own was, and leaves it alone). HTTP client errors
(the ``kind`` label, ``CLIENT_ERRORS``): ``partial_body`` (a body shorter than
its Content-Length, 408), ``bad_request`` (malformed HTTP, e.g. a bad chunked
encoding), ``bad_body`` (not the JSON asked for), ``unauthorized`` (missing or
wrong token), ``disconnect`` (the client left, or the daemon stopped, mid-request),
``overload`` (over the connection limit), ``app_error`` (our bug: an exception
in a handler).

``METRIC_NAMES`` lists every exported family (the Grafana test checks the
dashboard against it). ``prometheus-client`` is imported here only.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DaemonMetrics", "METRIC_NAMES", "CAUSES", "CLASSES", "CLIENT_ERRORS"]

CAUSES: tuple[str, ...] = ("telemetry_timeout", "telemetry_invalid", "actuator", "plant", "policy",
                           "policy_nonfinite", "host_agent", "foreign")
CLASSES: tuple[str, ...] = ("dtn", "campus")
# The eBPF programs' reasons for passing a packet on unmeasured that the twin would measure
# (telemetry/ebpf/layout.py EBPF_REASONS); exported at 0 from the start, other reasons as they come.
UNMEASURED: tuple[str, ...] = ("tunnel", "too_deep")
CLIENT_ERRORS: tuple[str, ...] = ("partial_body", "bad_request", "bad_body", "unauthorized", "disconnect",
                                  "overload", "app_error")

# name -> (kind, help); counters are listed without the _total suffix prometheus-client adds.
_SPEC: dict[str, tuple[str, str]] = {
    "scidmz_dtn_rate_bits_per_second": ("gauge", "DTN throughput R_DTN in the last period"),
    "scidmz_campus_rate_bits_per_second": ("gauge", "Campus throughput R_campus in the last period"),
    "scidmz_rtt_seconds": ("gauge", "Mean RTT of the class's flows in the last period"),
    "scidmz_queue_delay_seconds": ("gauge", "Mean bottleneck queuing delay of the class in the last period"),
    "scidmz_active_flows": ("gauge", "Active flows at the bottleneck in the last period"),
    "scidmz_campus_rate_limit_bits_per_second": ("gauge", "Campus shaper rate u applied this period "
                                                          "(NaN in shadow mode: nothing is applied)"),
    "scidmz_shadow_rate_bits_per_second": ("gauge", "Shadow mode: the rate u the loop would apply this period "
                                                    "(NaN when live)"),
    "scidmz_shadow_mode": ("gauge", "1 in shadow mode (the loop applies nothing), 0 live"),
    "scidmz_policy_rate_bits_per_second": ("gauge", "Rate u the policy asked for (NaN when it failed)"),
    "scidmz_target_bits_per_second": ("gauge", "DTN target rate R*_DTN"),
    "scidmz_trivial_rate_bits_per_second": ("gauge", "Fallback rate B_max - target"),
    "scidmz_capacity_bits_per_second": ("gauge", "Bottleneck capacity B_max of the scenario"),
    "scidmz_period_seconds": ("gauge", "Control period T"),
    "scidmz_fallback_active": ("gauge", "1 while the trivial fallback rate is applied"),
    "scidmz_last_sample_timestamp_seconds": ("gauge", "Unix time of the last telemetry sample"),
    "scidmz_periods": ("counter", "Control periods completed"),
    "scidmz_fallback_periods": ("counter", "Periods run on the fallback rate, by cause"),
    "scidmz_faults": ("counter", "Faults that put the loop on the fallback rate, by cause"),
    "scidmz_actuator_errors": ("counter", "Failed actuator calls"),
    "scidmz_telemetry_gaps": ("counter", "Telemetry losses (no sample for 2T) and invalid samples"),
    "scidmz_target_changes": ("counter", "Target changes accepted"),
    "scidmz_http_client_errors": ("counter", "HTTP requests the API refused or lost, by kind"),
    "scidmz_telemetry_unmeasured_packets": ("counter", "Packets the telemetry passed on without measuring "
                                                       "them, by reason (eBPF: tunnel, too_deep, parse failures, "
                                                       "flow_events_lost)"),
}
METRIC_NAMES: frozenset[str] = frozenset(
    n + ("_total" if kind == "counter" else "") for n, (kind, _) in _SPEC.items()
)


class DaemonMetrics:
    """The daemon's metrics in their own registry; updated by the loop thread, read by scrapes."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge

        self.registry = CollectorRegistry()
        r = self.registry
        g: dict[str, Any] = {}
        for name, (kind, help_) in _SPEC.items():
            labels: list[str] = []
            if name in ("scidmz_rtt_seconds", "scidmz_queue_delay_seconds"):
                labels = ["class"]
            elif name in ("scidmz_fallback_periods", "scidmz_faults"):
                labels = ["cause"]
            elif name == "scidmz_http_client_errors":
                labels = ["kind"]
            elif name == "scidmz_telemetry_unmeasured_packets":
                labels = ["reason"]
            cls = Counter if kind == "counter" else Gauge
            g[name] = cls(name, help_, labels, registry=r)
        self._m = g
        # Every label value exists from the start, so a dashboard shows 0 rather than "no data".
        for c in CLASSES:
            g["scidmz_rtt_seconds"].labels(c).set(float("nan"))
            g["scidmz_queue_delay_seconds"].labels(c).set(float("nan"))
        for c in CAUSES:
            g["scidmz_fallback_periods"].labels(c)
            g["scidmz_faults"].labels(c)
        for k in CLIENT_ERRORS:
            g["scidmz_http_client_errors"].labels(k)
        for reason in UNMEASURED:
            g["scidmz_telemetry_unmeasured_packets"].labels(reason)
        for name in ("scidmz_dtn_rate_bits_per_second", "scidmz_campus_rate_bits_per_second",
                     "scidmz_active_flows", "scidmz_campus_rate_limit_bits_per_second",
                     "scidmz_policy_rate_bits_per_second", "scidmz_last_sample_timestamp_seconds",
                     "scidmz_shadow_rate_bits_per_second"):
            g[name].set(float("nan"))
        self._shadow = False
        self._unmeasured: dict[str, int] = {}

    def static(self, *, period: float, capacity: float, shadow: bool = False) -> None:
        self._m["scidmz_period_seconds"].set(period)
        self._m["scidmz_capacity_bits_per_second"].set(capacity)
        self._shadow = bool(shadow)
        self._m["scidmz_shadow_mode"].set(1.0 if shadow else 0.0)

    def target(self, target: float, trivial: float, changed: bool = False) -> None:
        self._m["scidmz_target_bits_per_second"].set(target)
        self._m["scidmz_trivial_rate_bits_per_second"].set(trivial)
        if changed:
            self._m["scidmz_target_changes"].inc()

    def sample(self, y: dict[str, float], wall: float) -> None:
        m = self._m
        m["scidmz_dtn_rate_bits_per_second"].set(y["rate_dtn"])
        m["scidmz_campus_rate_bits_per_second"].set(y["rate_campus"])
        m["scidmz_rtt_seconds"].labels("dtn").set(y["rtt_dtn"])
        m["scidmz_rtt_seconds"].labels("campus").set(y["rtt_campus"])
        m["scidmz_queue_delay_seconds"].labels("dtn").set(y["qdelay_dtn"])
        m["scidmz_queue_delay_seconds"].labels("campus").set(y["qdelay_campus"])
        m["scidmz_active_flows"].set(y["active_flows"])
        m["scidmz_last_sample_timestamp_seconds"].set(wall)

    def period(self, u: float, u_policy: float | None, cause: str | None) -> None:
        m = self._m
        m["scidmz_periods"].inc()
        m["scidmz_shadow_rate_bits_per_second" if self._shadow else "scidmz_campus_rate_limit_bits_per_second"].set(u)
        m["scidmz_policy_rate_bits_per_second"].set(float("nan") if u_policy is None else u_policy)
        m["scidmz_fallback_active"].set(0.0 if cause is None else 1.0)
        if cause is not None:
            m["scidmz_fallback_periods"].labels(cause).inc()

    def fault(self, cause: str) -> None:
        m = self._m
        m["scidmz_faults"].labels(cause).inc()
        if cause == "actuator":
            m["scidmz_actuator_errors"].inc()
        elif cause.startswith("telemetry"):
            m["scidmz_telemetry_gaps"].inc()

    def unmeasured(self, counts: dict[str, int]) -> None:
        """The telemetry's cumulative unmeasured-packet counts by reason; the counters advance by what
        each grew (a count that went down, e.g. programs re-attached, starts that reason over)."""
        for reason, n in counts.items():
            prev = self._unmeasured.get(reason, 0)
            self._m["scidmz_telemetry_unmeasured_packets"].labels(reason).inc(n - prev if n >= prev else n)
            self._unmeasured[reason] = n

    def client_error(self, kind: str) -> None:
        self._m["scidmz_http_client_errors"].labels(kind if kind in CLIENT_ERRORS else "app_error").inc()

    def exposition(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)
