"""The hardware plant's P4 switch options and owner records, without root (in-process P4Runtime server).

What tests/test_realgear_setup3.py runs on a real BMv2, down to its parts:
prefixes given as text reach the switch whole (IPv4 and IPv6), tap ports,
the pipeline folder and the Thrift port checked before the switch changes,
and the owner records that let a fresh start reclaim a dead controller's
entries and refuse a live or unrecorded owner's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scidmz.actuators import owner
from scidmz.records import proc_start_time
from scidmz.telemetry import constants as C
from scidmz.telemetry.p4.p4info import P4InfoIndex, decode_uint
from scidmz.telemetry.p4.p4runtime import DEFAULT_P4INFO, P4RuntimeView, pipeline_files
from scidmz.telemetry.twin.dataplane import SoftwareDataPlane

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_telemetry_adapters import TwinP4RuntimeServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


class Server(TwinP4RuntimeServer):
    """The adapters' test server, with DELETE (the entries a controller removes)."""

    def _write(self, req, context):
        delete = self.p.enum_value("p4.v1.Update.Type", "DELETE")
        dels = [u for u in req.updates if u.type == delete and u.entity.WhichOneof("entity") == "table_entry"]
        for u in dels:
            key = u.entity.table_entry.match
            rows = self.entries.get(u.entity.table_entry.table_id, [])
            self.entries[u.entity.table_entry.table_id] = [e for e in rows if e.match != key]
        rest = [u for u in req.updates if u not in dels]
        del req.updates[:]
        req.updates.extend(rest)
        return super()._write(req, context)


@pytest.fixture
def srv(tmp_path, monkeypatch):
    monkeypatch.setenv("SCIDMZ_RUN_DIR", str(tmp_path / "run"))
    s = Server(SoftwareDataPlane(), P4InfoIndex.from_file(DEFAULT_P4INFO))
    yield s
    s.stop()


def _lpm_keys(s: Server, table: str) -> list[tuple[int, int]]:
    t = s.info.table(table)
    fid = t.match_fields["dst_addr" if table == "class_lpm" else "src_addr"][0]
    return sorted((decode_uint(m.lpm.value), m.lpm.prefix_len) for e in s.entries.get(t.id, [])
                  for m in e.match if m.field_id == fid)


def test_prefix_text_reaches_the_switch_whole_ipv4_and_ipv6(srv):
    """``--plant-opt dtn_prefixes=A,B`` arrives as one string: the view used to iterate it as
    characters. Both the view's install and the plant's switch take text and lists alike."""
    from scidmz.plant.hardware_p4 import P4Switch

    sw = P4Switch(f"p4:{srv.address}", dtn_prefixes="10.0.3.2/32,2001:db8:3::2/128",
                  remote_prefixes="10.1.0.0/16", tap_ports="3,4")
    sw.open()
    try:
        want = sorted([(0xFFFF_0A00_0302, 128), (0x2001_0DB8_0003 << 80 | 2, 128), (0xFFFF_0A01_0000, 112)])
        assert _lpm_keys(srv, "class_lpm_src") == want
        assert _lpm_keys(srv, "class_lpm") == sorted(want * 2)  # one per tap
        taps = srv.info.table("tap_port")
        assert sorted(decode_uint(e.match[0].exact.value) for e in srv.entries[taps.id]) == [3, 4]
    finally:
        sw.close()
    assert all(not rows for rows in srv.entries.values())  # close removed what it installed
    view = P4RuntimeView(srv.address, p4info=srv.info, election_id=(0, 5))
    try:
        view.install("10.0.3.2/32,2001:db8:3::2/128", "10.1.0.0/16")  # text straight into the view
        assert _lpm_keys(srv, "class_lpm_src") == want
    finally:
        view.close()


def test_bad_options_are_one_line_before_anything_is_touched(srv, tmp_path):
    from scidmz.plant.hardware import build_hardware_plant
    from scidmz.scenario import load_scenario

    made = []

    def factory(target, netns=None):
        made.append(target)
        raise AssertionError("the actuator must not be built")

    empty, only_json, two = tmp_path / "empty", tmp_path / "json", tmp_path / "two"
    for d in (empty, only_json, two):
        d.mkdir()
    (only_json / "p.json").write_text("{}")
    for stem in ("a", "b"):
        (two / f"{stem}.json").write_text("{}")
        (two / f"{stem}x.p4info.txtpb").write_text("")
    sc = load_scenario("testbed")
    cases = {
        str(empty): "missing the BMv2 JSON",
        str(only_json): "missing the P4Info",
        str(two): "no single pair",
        str(tmp_path / "nowhere"): "not a directory",
    }
    for folder, msg in cases.items():
        with pytest.raises(ValueError, match=msg) as ei:
            build_hardware_plant(sc, dev="x", telemetry=f"p4:{srv.address}", p4_pipeline=folder, actuator=factory)
        assert "\n" not in str(ei.value)
    for kw, msg in (({"tap_ports": "1"}, "INGRESS_PORT,EGRESS_PORT"), ({"p4_thrift": "nope"}, "HOST:PORT"),
                    ({"dtn_prefixes": "10.0.0.0/33"}, "prefix"), ({"telemetry": "p4:host"}, "HOST:PORT")):
        with pytest.raises(ValueError, match=msg):
            build_hardware_plant(sc, dev="x", **{"telemetry": f"p4:{srv.address}", **kw}, actuator=factory)
    with pytest.raises(ValueError, match="P4 telemetry switch"):
        build_hardware_plant(sc, dev="x", telemetry="ebpf:a,b", p4_thrift="h:9090", actuator=factory)
    assert not made and srv.pipeline is None and not srv.entries


def test_a_folder_with_only_the_committed_p4info_is_not_a_pipeline():
    with pytest.raises(ValueError, match="missing the BMv2 JSON"):
        pipeline_files(ROOT / "telemetry_p4" / "v1model")


def test_a_port_that_is_not_bmv2s_thrift_is_refused_before_the_switch_changes(srv, tmp_path):
    """The P4Runtime (gRPC) port answers connections but not BMv2's Thrift ``standard`` service."""
    from scidmz.plant.hardware_p4 import P4Switch

    pipe = tmp_path / "pipe"
    pipe.mkdir()
    (pipe / "t.json").write_text("{}")
    (pipe / "t.p4info.txtpb").write_text(Path(DEFAULT_P4INFO).read_text())
    sw = P4Switch(f"p4:{srv.address}", pipeline=str(pipe), thrift=srv.address)
    with pytest.raises(ValueError, match="not BMv2's Thrift"):
        sw.open()
    assert srv.pipeline is None and not srv.entries
    closed = P4Switch("p4:127.0.0.1:1", options={"timeout": 0.5})
    with pytest.raises(ValueError, match="does not answer"):
        closed.open()


def _dead_pid() -> tuple[int, int]:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    start = proc_start_time(p.pid)
    p.wait()
    return p.pid, start if start is not None else 1


def test_owner_records_name_pid_and_start_time(tmp_path, monkeypatch):
    import json

    monkeypatch.setenv("SCIDMZ_RUN_DIR", str(tmp_path))
    first = owner.claim("tc-host-x-5c1d", "the TBF on x")
    assert first.reclaimed is None and first.path.exists()
    again = owner.claim("tc-host-x-5c1d", "the TBF on x")  # this process's own record
    assert again.reclaimed is None
    parent = os.getppid()
    for pid, start, live in ((parent, proc_start_time(parent), True),
                             (parent, (proc_start_time(parent) or 0) + 1, False),  # a recycled pid
                             (*_dead_pid(), False)):
        first.path.write_text(json.dumps({"owner_pid": pid, "owner_start": start}))
        if live:
            with pytest.raises(ValueError, match=f"held by a running scidmz \\(pid {pid}"):
                owner.claim("tc-host-x-5c1d", "the TBF on x")
        else:
            c = owner.claim("tc-host-x-5c1d", "the TBF on x")
            assert c.reclaimed is not None and c.reclaimed["owner_pid"] == pid
    c.release()
    assert not first.path.exists()


def test_switch_entries_of_a_dead_owner_are_reclaimed_others_refused(srv):
    import json

    from scidmz.plant.hardware_p4 import P4Switch

    sw = P4Switch(f"p4:{srv.address}")
    sw.open()
    n = sum(len(v) for v in srv.entries.values())
    sw._installed = False  # as if SIGKILLed: nothing removed, the record left behind
    record = sw._claim.path
    sw._claim = None
    sw.close()
    pid, start = _dead_pid()
    record.write_text(json.dumps({"owner_pid": pid, "owner_start": start}))
    srv.primary = None
    fresh = P4Switch(f"p4:{srv.address}")
    fresh.open()  # deletes the leftovers, installs its own
    assert sum(len(v) for v in srv.entries.values()) == n
    fresh._installed = False
    fresh.close()  # leaves the entries, gives the record up: now nobody accounts for them
    assert not record.exists()
    srv.primary = None
    with pytest.raises(ValueError, match="no live or dead scidmz record accounts for") as ei:
        P4Switch(f"p4:{srv.address}").open()
    assert "\n" not in str(ei.value) and not record.exists()


def test_control_run_p4_flags_need_the_hardware_plant():
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    r = subprocess.run([sys.executable, "-m", "scidmz.cli", "control", "run", "--plant", "fluid", "--target", "10M",
                        "--p4-taps", "1,2", "--no-api", "--duration", "1s"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and "for --plant hardware" in r.stderr, r.stderr
    assert C.TAP_INGRESS != C.TAP_EGRESS


def test_ovs_owner_with_a_recycled_pid_is_a_leftover():
    """OVS rows and meters record the owner's start time too: a pid now naming another process
    marks a dead scidmz's leftover; rows from before the start time was recorded go by pid alone."""
    import socket

    from scidmz.actuators.ovs import _live_owner

    host, parent = socket.gethostname(), os.getppid()
    start = proc_start_time(parent)
    assert start is not None
    assert _live_owner(str(parent), host, str(start)) == f"scidmz process {parent} on {host}"
    assert _live_owner(str(parent), host, str(start + 1)) == ""
    assert _live_owner(str(parent), host, None) != ""
    assert _live_owner(str(_dead_pid()[0]), host, None) == ""
