"""Owner records, the class: every record that names a process is judged by the one owner check.

A generated family of owners -- a live process, a dead one, a recycled pid
(the pid of a live process with another start time), a foreign owner
(another host's process, which this host cannot see), a record from before
start times were written (the pid alone), and malformed values -- is written
into every kind of record that names a process: the actuators' owner
records (``actuators.owner.claim``: a root qdisc, a switch's entries), the
OVS rows' and meters' ``external_ids``, the testbed's and the eBPF
telemetry's records (read by ``testbed down --all`` and ``telemetry down``)
and the controller's token file. For each, a dead owner's leftover is
reclaimed and nothing else is: a live or foreign owner keeps its place, a
malformed record is skipped and named (never taken as accounting for a
leftover). Each kind's verdict must equal ``records.recorded_owner_runs``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scidmz import records
from scidmz.records import RecordError, recorded_owner_runs


@pytest.fixture(scope="module")
def people() -> dict[str, tuple[int, int]]:
    """(pid, start) of a live process that is not this one, and of one that has exited."""
    p = subprocess.Popen(["true"])
    dead = (p.pid, records.proc_start_time(p.pid))  # a zombie until waited for: its stat is readable
    p.wait()
    parent = os.getppid()
    live = (parent, records.proc_start_time(parent))
    assert dead[1] is not None and live[1] is not None
    return {"live": live, "dead": dead}  # type: ignore[dict-item]


#: (pid, start, host) of each kind of owner, from a live and a dead process; and whether it may still run
#: (True: its place is kept), or None for a malformed record (skipped, named, never reclaimed).
def _owner(kind: str, people: dict[str, tuple[int, int]]) -> tuple[Any, Any, Any, bool | None]:
    (lp, ls), (dp, ds) = people["live"], people["dead"]
    here = socket.gethostname()
    return {
        "live": (lp, ls, here, True),
        "dead": (dp, ds, here, False),
        "recycled": (lp, ls + 1, here, False),
        "foreign_host_live": (lp, ls, "elsewhere.example", True),
        "foreign_host_dead": (dp, ds, "elsewhere.example", True),
        "no_start_live": (lp, None, here, True),
        "no_start_dead": (dp, None, here, False),
        "pid_string": (str(lp), ls, here, None),
        "pid_negative": (-1, ls, here, None),
        "pid_bool": (True, ls, here, None),
        "pid_huge": (1 << 40, ls, here, None),
        "start_float": (lp, float(ls), here, None),
        "start_string": (lp, str(ls), here, None),
        "start_negative": (dp, -5, here, None),
        "host_number": (dp, ds, 7, None),
    }[kind]


KINDS = ["live", "dead", "recycled", "foreign_host_live", "foreign_host_dead", "no_start_live", "no_start_dead",
         "pid_string", "pid_negative", "pid_bool", "pid_huge", "start_float", "start_string", "start_negative",
         "host_number"]


def test_the_one_check_over_the_family(people) -> None:
    for kind in KINDS:
        pid, start, host, runs = _owner(kind, people)
        if runs is None:
            with pytest.raises(RecordError):
                recorded_owner_runs(pid, start, host)
        else:
            assert recorded_owner_runs(pid, start, host) is runs, kind


_SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(kind=st.sampled_from(KINDS), key=st.sampled_from(["tc-host-x-5c1d", "tc-ns1-wan0-5c1e", "p4-127.0.0.1:9559"]))
def test_actuator_owner_records_reclaim_only_a_dead_owners_place(people, kind, key, tmp_path_factory,
                                                                 monkeypatch) -> None:
    from scidmz.actuators import owner

    monkeypatch.setenv("SCIDMZ_RUN_DIR", str(tmp_path_factory.mktemp("run")))
    pid, start, host, runs = _owner(kind, people)
    path = owner.owners_dir() / f"{key.replace(':', '_')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": key, "owner_pid": pid, "owner_start": start, "host": host}))
    if runs:
        with pytest.raises(ValueError, match=f"held by a running scidmz \\(pid {pid}") as ei:
            owner.claim(key, "the place")
        assert "\n" not in str(ei.value)
        assert json.loads(path.read_text())["owner_pid"] == pid  # the live owner's record is kept
        return
    c = owner.claim(key, "the place")
    if runs is None:  # skipped and named; accounts for nothing, so no leftover is reclaimed on its word
        assert c.reclaimed is None and c.skipped, kind
    else:
        assert c.reclaimed is not None and c.reclaimed["owner_pid"] == pid and c.skipped is None
    assert json.loads(path.read_text())["owner_pid"] == os.getpid()
    c.release()
    assert not path.exists()


@pytest.mark.parametrize("kind", KINDS)
def test_ovs_rows_and_meters_use_the_same_check(people, kind) -> None:
    """OVS ``external_ids`` hold strings, so the family arrives as text: a value that does not read as a
    pid or a host is never taken for a leftover; a start time that does not read as one leaves the pid
    to judge (a dead pid is dead whatever its start time said)."""
    from scidmz.actuators.ovs import _live_owner

    pid, start, host, _ = _owner(kind, people)
    who = _live_owner(str(pid), str(host), None if start is None else str(start))
    leftover = kind in ("dead", "recycled", "no_start_dead", "start_negative")
    assert (who == "") is leftover, (kind, who)


#: Testbed, eBPF and token records are this host's own files: they name no host.
HOSTLESS = [k for k in KINDS if not k.startswith("foreign_host") and k != "host_number"]


@pytest.mark.parametrize("kind", HOSTLESS)
def test_testbed_ebpf_and_token_records_use_the_same_check(people, kind, tmp_path) -> None:
    from scidmz.controller.tokenfile import _owner_runs
    from scidmz.plant.netns.manage.registry import Record
    from scidmz.telemetry.ebpf.attach import EbpfRecord

    pid, start, _, runs = _owner(kind, people)
    testbed = {"prefix": "ow", "owner_pid": pid, "owner_start": start, "created": 1.0, "namespaces": ["ow-x"],
               "root_links": [], "processes": [], "ovs": [], "info": {}}
    ebpf = {"owner_pid": pid, "owner_start": start, "created": 1.0, "interfaces": [], "filters": [], "clsact": [],
            "links": []}
    for load, data, name in ((Record.load, testbed, "ow.json"), (EbpfRecord.load, ebpf, "1.json")):
        p = tmp_path / name
        p.write_text(json.dumps(data))
        try:
            alive = load(p).owner_alive()
        except RecordError:  # read_record's types, then the owner check: skipped and named by the cleanups
            alive = None
        # Files scidmz writes always hold a start time: one without is refused, not judged by its pid.
        assert alive == (None if start is None else runs), kind
    assert _owner_runs(pid, start) is bool(runs), kind  # a malformed token file is no daemon's


def test_ovs_policing_values_someone_else_set_are_left_alone() -> None:
    """Ingress policing has no row of its own to mark, so ours is the values we set last. This kernel
    has no tc police action (the actuator refuses policing at start here), so the OVS database is a
    stand-in holding the two Interface columns; the decisions are the actuator's own code."""
    from scidmz.actuators.base import ForeignConfigError
    from scidmz.actuators.ovs import OvsQosActuator

    class Columns:
        def __init__(self) -> None:
            self.cols = {"ingress_policing_rate": 0, "ingress_policing_burst": 0}
            self.writes = 0

        def get_interface(self, _port: str, col: str) -> int:
            return self.cols[col]

        def set_interface(self, _port: str, **cols: int) -> None:
            self.cols.update(cols)
            self.writes += 1

        def close(self) -> None:
            pass

    import threading

    act = OvsQosActuator.__new__(OvsQosActuator)
    db = Columns()
    act.port, act.mode, act.burst, act.bridge = "p1", "policing", None, None
    act._lock, act._closed, act._installed, act._displaced = threading.Lock(), False, False, None
    act._policing, act._prev_policing, act._be = (0, 0), (0, 0), db
    act.set_rate(20e6)
    act.set_rate(30e6)  # ours: changed in place
    assert db.cols["ingress_policing_rate"] == 30_000
    db.cols.update(ingress_policing_rate=5_000, ingress_policing_burst=500)  # the admin's
    for rate in (40e6, 10e6):
        with pytest.raises(ForeignConfigError, match="set to 5000 kbit/s .* by someone else"):
            act.set_rate(rate)
    writes = db.writes
    act.close()
    assert db.writes == writes and db.cols["ingress_policing_rate"] == 5_000  # not restored over theirs

    act2 = OvsQosActuator.__new__(OvsQosActuator)
    db2 = Columns()
    act2.port, act2.mode, act2.burst, act2.bridge = "p1", "policing", None, None
    act2._lock, act2._closed, act2._installed, act2._displaced = threading.Lock(), False, False, None
    act2._policing, act2._prev_policing, act2._be = (0, 0), (0, 0), db2
    act2.set_rate(20e6)
    act2.close()  # still ours: the values found at start come back
    assert db2.cols == {"ingress_policing_rate": 0, "ingress_policing_burst": 0}
