"""Run records: one bad record is skipped, counted and named, and the rest is cleaned; owners by start time.

A property test generates run directories holding records of dead owners (to be cleaned) among
malformed ones (truncated, wrong types, a list, deep, huge, symlinks, a FIFO, a directory) and
checks, for the testbed's ``down_all`` and the eBPF telemetry's ``down_stale`` (``telemetry down``,
the systemd unit's ExecStartPre): every good record is cleaned, every bad one is left untouched and
named once, and nothing outside the run directory is read through a link or changed.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scidmz import records
from scidmz.records import RecordError, owner_alive, process_alive, read_record


@pytest.fixture(scope="module")
def dead_owner() -> tuple[int, int]:
    """(pid, start) of a process that has exited: a leftover's owner."""
    p = subprocess.Popen(["true"])
    start = records.proc_start_time(p.pid)  # a zombie until waited for: its stat is readable
    p.wait()
    assert start is not None
    return p.pid, start


def test_owner_is_told_from_a_recycled_pid_by_start_time(dead_owner) -> None:
    me, start = os.getpid(), records.proc_start_time(os.getpid())
    assert owner_alive({"owner_pid": me, "owner_start": start})
    assert not owner_alive({"owner_pid": me, "owner_start": start - 1})  # same pid, another process
    assert not owner_alive({"owner_pid": dead_owner[0], "owner_start": dead_owner[1]})
    for pid, st_ in [(None, start), (me, None), ("1", start), (True, start), (-1, start), (1 << 40, start),
                     (me, "0"), (me, 1.5), (me, -3)]:
        with pytest.raises(RecordError):
            process_alive(pid, st_)


def _testbed(prefix: str, owner: tuple[int, int], **extra) -> dict:
    return {"prefix": prefix, "owner_pid": owner[0], "owner_start": owner[1], "created": 1.0,
            "namespaces": [f"{prefix}-x"], "root_links": [], "processes": [], "ovs": [], "info": {}, **extra}


def _ebpf(owner: tuple[int, int], **extra) -> dict:
    return {"owner_pid": owner[0], "owner_start": owner[1], "created": 1.0, "interfaces": [], "filters": [],
            "clsact": [], "links": [], **extra}


#: Ways a record can be bad: (name, how to make it at ``path`` from a good record ``good``).
def _bad(kind: str, path: Path, good: dict, outside: Path, draw_key: str) -> None:
    text = json.dumps(good)
    if kind == "truncated":
        path.write_text(text[: len(text) // 2])
    elif kind == "wrong_type":
        path.write_text(json.dumps({**good, draw_key: "x" if not isinstance(good[draw_key], str) else 7}))
    elif kind == "missing":
        path.write_text(json.dumps({k: v for k, v in good.items() if k != draw_key}))
    elif kind == "list":
        path.write_text(json.dumps([good]))
    elif kind == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "huge":
        path.write_text(json.dumps({**good, "pad": "x" * (records.MAX_RECORD_BYTES + 10)}))
    elif kind == "binary":
        path.write_bytes(b"\xff\xfe\x00" * 50)
    elif kind == "symlink":
        path.symlink_to(outside)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:  # pragma: no cover - the strategy lists the kinds above
        raise AssertionError(kind)


BAD_KINDS = ["truncated", "wrong_type", "missing", "list", "deep", "huge", "binary", "symlink", "fifo", "directory"]


def _run_dir_case(data: st.DataObject, make_good, names: list[str], fields: list[str], owner, outside: Path,
                  d: Path) -> tuple[set[str], set[str]]:
    """Fill ``d``: good records (some with extra keys) and bad ones; returns (good names, bad names)."""
    n_good = data.draw(st.integers(0, 3))
    kinds = data.draw(st.lists(st.sampled_from(BAD_KINDS), min_size=1, max_size=4))
    good, bad = set(), set()
    for i in range(n_good):
        name = names[i]
        extra = data.draw(st.dictionaries(st.sampled_from(["future", "note", "v"]), st.integers(), max_size=2))
        (d / f"{name}.json").write_text(json.dumps(make_good(name, owner, **extra)))
        good.add(name)
    for j, kind in enumerate(kinds):
        name = names[3 + j]
        _bad(kind, d / f"{name}.json", make_good(name, owner), outside, data.draw(st.sampled_from(fields)))
        bad.add(name)
    return good, bad


_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(data=st.data())
def test_testbed_down_all_skips_and_names_bad_records_and_cleans_the_rest(data, dead_owner, monkeypatch) -> None:
    from scidmz.plant.netns.manage import registry

    with tempfile.TemporaryDirectory() as td:
        d, outside = Path(td) / "run", Path(td) / "secret.json"
        d.mkdir()
        outside.write_text(json.dumps(_testbed("zz", dead_owner)))  # a valid record, but not in the run dir
        monkeypatch.setattr(registry, "RUN_DIR", d)
        names = [f"p{i}" for i in range(8)]
        good, bad = _run_dir_case(data, _testbed, names, ["prefix", "owner_pid", "owner_start", "namespaces",
                                                          "processes", "ovs"], dead_owner, outside, d)
        res = registry.down_all()
        assert set(res["removed"]) == good
        skipped = res["skipped_records"]
        assert len(skipped) == len(bad)
        for name in bad:
            assert sum(f"/{name}.json:" in line for line in skipped) == 1, skipped
            assert os.path.lexists(d / f"{name}.json")  # left as it was, for the admin
        for name in good:
            assert not (d / f"{name}.json").exists()
        assert json.loads(outside.read_text())["prefix"] == "zz"


def test_a_testbed_record_naming_a_namespace_not_its_own_is_refused(tmp_path, dead_owner) -> None:
    from scidmz.plant.netns.manage.registry import Record

    p = tmp_path / "ab.json"
    p.write_text(json.dumps(_testbed("ab", dead_owner, namespaces=["production"])))
    with pytest.raises(RecordError, match="not one of testbed ab's"):
        Record.load(p)
    p.write_text(json.dumps(_testbed("cd", dead_owner)))  # another testbed's record under this name
    with pytest.raises(RecordError, match="not the record's own"):
        Record.load(p)


def _libbpf_or_skip() -> None:
    from scidmz.telemetry.ebpf.libbpf import get_libbpf

    try:
        get_libbpf()
    except (OSError, RuntimeError) as exc:
        if os.environ.get("CI"):  # CI installs libbpf-dev (scripts/test.sh): there the test must run
            pytest.fail(f"no libbpf here: {exc}")
        pytest.skip(f"no libbpf here: {exc}")


@_SETTINGS
@given(data=st.data())
def test_telemetry_down_skips_and_names_bad_records_and_cleans_the_rest(data, dead_owner, monkeypatch) -> None:
    from scidmz.telemetry.ebpf.attach import down_stale

    _libbpf_or_skip()
    with tempfile.TemporaryDirectory() as td:
        root, outside = Path(td), Path(td) / "secret.json"
        d = root / "ebpf"
        d.mkdir()
        outside.write_text(json.dumps(_ebpf(dead_owner)))
        monkeypatch.setenv("SCIDMZ_RUN_DIR", str(root))
        names = [str(100 + i) for i in range(8)]
        good, bad = _run_dir_case(data, lambda _n, owner, **kw: _ebpf(owner, **kw), names,
                                  ["owner_pid", "owner_start", "filters", "clsact"], dead_owner, outside, d)
        res = down_stale()
        assert res["records"] == len(good)
        assert len(res["skipped_records"]) == len(bad)
        for name in bad:
            assert os.path.lexists(d / f"{name}.json")
        for name in good:
            assert not (d / f"{name}.json").exists()
        assert json.loads(outside.read_text())["owner_pid"] == dead_owner[0]


def test_telemetry_down_names_each_skipped_record_in_one_line(tmp_path, dead_owner) -> None:
    import sys

    _libbpf_or_skip()
    d = tmp_path / "ebpf"
    d.mkdir()
    (d / "1.json").write_text("{")
    (d / "2.json").write_text(json.dumps(_ebpf(dead_owner)))
    env = {**os.environ, "SCIDMZ_RUN_DIR": str(tmp_path),
           "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    r = subprocess.run([sys.executable, "-m", "scidmz.cli", "telemetry", "down", "--json"], env=env,
                       capture_output=True, text=True, timeout=60)
    if r.returncode == 2 and "root" in r.stderr:
        pytest.skip("telemetry down needs root here")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) >= 1 and any("1.json" in line and "not JSON" in line for line in lines), r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["records"] == 1 and len(res["skipped_records"]) == 1
    assert (d / "1.json").exists() and not (d / "2.json").exists()


def test_read_record_never_follows_a_link_and_bounds_the_size(tmp_path) -> None:
    target = tmp_path / "t.json"
    target.write_text('{"a": 1}')
    link = tmp_path / "l.json"
    link.symlink_to(target)
    with pytest.raises(RecordError, match="symlink"):
        read_record(link, {"a": int})
    assert read_record(target, {"a": int}) == {"a": 1}
    with pytest.raises(RecordError, match="'a' is a bool"):
        read_record(tmp_path / "b.json", {"a": int}) if (tmp_path / "b.json").write_text('{"a": true}') else None


def test_the_token_file_tells_a_live_daemon_from_a_recycled_pid(tmp_path) -> None:
    from scidmz.controller.tokenfile import TokenFile

    other = subprocess.Popen(["sleep", "30"])
    try:
        start = records.proc_start_time(other.pid)
        path = tmp_path / "control.token"
        for recorded, owned in [(start, True), (start - 1, False), ("x", False), (None, True)]:
            path.write_text(json.dumps({"token": "t", "api": None, "pid": other.pid, "start": recorded}))
            if owned:  # the daemon that wrote it runs (or, without a start time, its pid does)
                with pytest.raises(RuntimeError, match=f"pid {other.pid}"):
                    TokenFile(path, "new").claim()
            else:  # same pid, another process: the file is a dead daemon's, and may be taken
                TokenFile(path, "new").claim()
        TokenFile(path, "new").write(None)
        assert json.loads(path.read_text())["start"] == records.proc_start_time(os.getpid())
    finally:
        other.kill()
        other.wait()
