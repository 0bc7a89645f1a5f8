"""The v1model telemetry program end to end on BMv2 (IPv6 and encapsulations too).

``telemetry_p4/run_bmv2.py`` compiles the program, starts
``simple_switch_grpc`` in a namespace of its own (taps on ports 1 and 2),
pushes pipeline and entries through ``P4RuntimeView``, replays pcaps with
known RTTs, queuing delays, rates and flow counts into the ports (~260
frames/s: BMv2 is slow and the machine shared), reads the switch back through
the adapter (registers over Thrift) and runs the twin on the frames as sent.

Tolerances (see telemetry_p4/README.md for the sizes measured): BMv2 against
the twin, only the few-hundred-microsecond gap between the host's send and
BMv2's ingress timestamp (2 % or 2 ms: ``flow_rtt`` holds one sample per
flow, so one late-stamped ACK shows); against the truth, also the host's late
sends.
Without the toolchain this skips with one line; under ``CI`` it fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scidmz.telemetry.constants import T_TH_US
from scidmz.telemetry.p4 import toolchain as p4tc

T_TH_S = T_TH_US / 1e6

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "telemetry_p4"))

import run_bmv2  # noqa: E402

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    if p4tc.toolchain_bin() is None:
        reason = "no P4 toolchain (p4c not on PATH, P4TC, ~/.cache/scidmz/p4tc): scripts/install_p4tc.sh"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} -- and CI is set, where this test must run")
        pytest.skip(reason)
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    # A replay that paused longer than T_TH between periods (BMv2's drain on a loaded machine)
    # let the flows idle out: the truth no longer holds, whatever the program does. Such a run
    # is repeated, at most twice, and a third is a failure (test_no_flow_idled_out).
    for _attempt in range(3):
        res = run_bmv2.run(periods=4, speed=1.0, prefix=f"p4t{os.getpid() % 10000}",
                           workdir=tmp_path_factory.mktemp("bmv2"))
        if res["max_flow_silence_s"] < T_TH_S:
            break
    return res


def _close(a: float, b: float, rel: float, abs_: float) -> bool:
    return abs(a - b) <= max(rel * abs(b), abs_)


def test_bmv2_matches_the_twin_per_period(result):
    assert result["periods_compared"] == 3
    assert result["digest_lists"] > 0
    for k, (bm, tw) in enumerate(zip(result["bmv2"], result["twin"], strict=True)):
        assert bm["active_flows"] == tw["active_flows"], k
        for f in ("rate_dtn", "rate_campus"):  # same bytes, same sampling instants
            assert _close(bm[f], tw[f], 0.01, 0.0), (k, f, bm[f], tw[f])
        for f in ("rtt_dtn", "rtt_campus", "qdelay_dtn", "qdelay_campus"):
            assert _close(bm[f], tw[f], 0.02, 0.002), (k, f, bm[f], tw[f], result)


def test_no_flow_idled_out_in_the_replay(result):
    """The harness's own condition for the truth below; 0.2-0.3 s is the replay's nominal
    silence across a period edge, the rest is the drain between periods."""
    assert 0.1 < result["max_flow_silence_s"] < T_TH_S, result["max_flow_silence_s"]


def test_bmv2_and_twin_match_the_known_truth(result):
    for name in ("bmv2", "twin"):
        for k, (got, want) in enumerate(zip(result[name], result["truth"], strict=True)):
            assert got["active_flows"] == want["active_flows"], (name, k)
            for f in ("rate_dtn", "rate_campus"):
                assert _close(got[f], want[f], 0.01, 0.0), (name, k, f)
            for f in ("rtt_dtn", "rtt_campus", "qdelay_dtn", "qdelay_campus"):
                assert _close(got[f], want[f], 0.10, 0.003), (name, k, f, got[f], want[f])
    # not vacuous: the FIN closed a flow, and both classes carried traffic
    assert [s["active_flows"] for s in result["truth"]] == [6, 5, 5]
    assert min(s["rate_campus"] for s in result["bmv2"]) > 100e3


def test_bmv2_counts_every_family_and_encapsulation_as_the_twin(result):
    """IPv4 and IPv6, plain, VLAN-tagged (up to 4 tags), MPLS (up to 4 labels), IPv6 extension
    headers, GRE/ERSPAN I-II-III/VXLAN/pseudowire (run_bmv2.probes and FLOWS): BMv2's
    egress-tap class counters equal the twin's to the byte and packet."""
    ctr = result["class_counters"]
    assert ctr["bmv2"] == ctr["twin"]
    assert all(ctr["twin"][c][1] > 0 for c in (1, 2))


def test_switch_leaves_nothing_behind(result):
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert f"p4t{os.getpid() % 10000}" not in names
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True, check=True).stdout
    assert f"p4t{os.getpid() % 10000}h" not in links


def test_bad_prefix_is_a_value_error():
    with pytest.raises(ValueError, match="at most 8"):
        p4tc.Bmv2Switch("much-too-long")
