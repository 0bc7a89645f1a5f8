"""The agent's Prometheus metrics, read from its status at scrape time (nothing per period).

Names follow the Prometheus conventions (base units, ``_total`` for counters).
``prometheus-client`` is imported here only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

__all__ = ["AgentMetrics"]


class AgentMetrics:
    """A private registry with one collector over ``status()``."""

    def __init__(self, status: Callable[[], dict[str, Any]]) -> None:
        from prometheus_client import CollectorRegistry

        self._status = status
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def collect(self) -> Any:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        st = self._status()

        def gauge(name: str, doc: str, value: float | None) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, value=math.nan if value is None else float(value))

        yield gauge("scidmz_agent_rate_bits_per_second", "Aggregate rate the controller set (NaN: none held)",
                    st["rate"])
        yield gauge("scidmz_agent_connections", "Matching TCP connections", len(st["connections"]))
        yield gauge("scidmz_agent_paced_connections", "Connections the agent paces now", st["paced"])
        yield gauge("scidmz_agent_delivered_bits_per_second", "Frame rate the matching connections delivered "
                                                              "in the last period", st["delivered"])
        yield gauge("scidmz_agent_lease_remaining_seconds", "Time left on the rate lease (NaN: none held)",
                    st["lease_remaining"])
        yield gauge("scidmz_agent_shadow_mode", "1 in shadow mode (nothing is paced)", st["mode"] == "shadow")
        yield gauge("scidmz_agent_host_cap_binding", "1 while a host qdisc cap is below what the agent grants",
                    bool(st["binding"]))
        yield gauge("scidmz_agent_period_cpu_seconds", "CPU time of the last period's work", st["period_cpu"])
        per = GaugeMetricFamily("scidmz_agent_connection_pacing_bits_per_second",
                                "Each matching connection's pacing rate (NaN: unpaced)", labels=["peer", "port", "pid"])
        for c in st["connections"]:
            v = c["pacing_rate"]
            per.add_metric([c["peer"], str(c["rport"]), str(c["pid"])], math.nan if v is None else v)
        yield per
        for key, doc in (("lease_expiries", "Leases that ran out (pacing lifted, fail-open)"),
                         ("sets", "SO_MAX_PACING_RATE settings made"),
                         ("set_failures", "SO_MAX_PACING_RATE settings that failed")):
            yield CounterMetricFamily(f"scidmz_agent_{key}", doc, value=st["counts"][key])

    def text(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)
