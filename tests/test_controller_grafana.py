"""deploy/grafana/: the dashboard asks only for metrics the daemon exports.

Every PromQL expression is parsed with a real PromQL parser (promql-parser, the Rust
parser Prometheus-compatible tools use) and each metric selector is checked against the
families in the exposition of the daemon's own metrics objects, read with
prometheus_client's parser; label matchers must name labels those families carry.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

promql = pytest.importorskip("promql_parser")
prom_parser = pytest.importorskip("prometheus_client.parser")

DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "grafana"
# Labels Prometheus adds at scrape time, not the exporter.
TARGET_LABELS = {"instance", "job"}


def _exported() -> dict[str, set[str]]:
    from scidmz.controller.prometheus import DaemonMetrics

    m = DaemonMetrics()
    m.sample({"rate_dtn": 1.0, "rate_campus": 1.0, "rtt_dtn": 0.01, "rtt_campus": 0.02, "qdelay_dtn": 0.0,
              "qdelay_campus": 0.0, "active_flows": 3.0}, 0.0)
    m.period(1.0, 1.0, "actuator")
    m.fault("actuator")
    out: dict[str, set[str]] = {}
    for fam in prom_parser.text_string_to_metric_families(m.exposition().decode()):
        for s in fam.samples:
            out.setdefault(s.name, set()).update(s.labels)
    return out


def _exprs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["expr"]] if isinstance(node.get("expr"), str) else []
        return found + [e for v in node.values() for e in _exprs(v)]
    if isinstance(node, list):
        return [e for v in node for e in _exprs(v)]
    return []


def _selectors(expr: str) -> list[Any]:
    # Grafana's interval macros are not PromQL; give the parser a duration in their place.
    text = re.sub(r"\$__(rate_)?interval|\$__range", "1m", expr)
    found: list[Any] = []
    promql.walk(promql.parse(text), lambda n: found.append(n) if isinstance(n, promql.VectorSelector) else None)
    return found


def test_every_query_names_an_exported_metric_with_its_labels() -> None:
    dash = json.loads((DEPLOY / "dashboards" / "scidmz.json").read_text())
    exported = _exported()
    exprs = _exprs(dash["panels"])
    assert len(exprs) >= 15
    used: set[str] = set()
    for expr in exprs:
        sels = _selectors(expr)
        assert sels, expr
        for sel in sels:
            assert sel.name in exported, f"{sel.name} in {expr!r} is not exported by the daemon"
            for matcher in sel.matchers.matchers:
                assert matcher.name in exported[sel.name] | TARGET_LABELS, (sel.name, matcher.name)
            used.add(sel.name)
    # What the issue asks the dashboard to show.
    for name in ("scidmz_target_bits_per_second", "scidmz_dtn_rate_bits_per_second",
                 "scidmz_campus_rate_bits_per_second", "scidmz_campus_rate_limit_bits_per_second",
                 "scidmz_rtt_seconds", "scidmz_queue_delay_seconds", "scidmz_active_flows",
                 "scidmz_fallback_active", "scidmz_fallback_periods_total", "scidmz_shadow_rate_bits_per_second"):
        assert name in used, name
    # The template variable's query too.
    var = next(v for v in dash["templating"]["list"] if v["name"] == "instance")
    assert re.fullmatch(r"label_values\((\w+), instance\)", var["definition"]).group(1) in exported


def test_a_query_naming_an_unknown_metric_is_caught() -> None:
    exported = _exported()
    assert [s.name for s in _selectors("rate(scidmz_state{var='rate_dtn'}[$__rate_interval])")] == ["scidmz_state"]
    assert "scidmz_state" not in exported  # the old mixed-unit gauge is gone


def test_provisioning_files_point_at_the_dashboard() -> None:
    yaml = pytest.importorskip("yaml")
    prov = yaml.safe_load((DEPLOY / "provisioning" / "dashboards" / "scidmz.yaml").read_text())
    assert prov["apiVersion"] == 1 and prov["providers"][0]["type"] == "file"
    ds = yaml.safe_load((DEPLOY / "provisioning" / "datasources" / "prometheus.yaml").read_text())
    assert ds["datasources"][0]["type"] == "prometheus"
    scrape = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    assert scrape["scrape_configs"][0]["job_name"] == "scidmz"
    dash = json.loads((DEPLOY / "dashboards" / "scidmz.json").read_text())
    assert dash["uid"] and all(p["datasource"]["uid"] == "${datasource}" for p in dash["panels"])
