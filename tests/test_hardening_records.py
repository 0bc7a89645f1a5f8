"""What an admin runs on a live router (docs/safety.md, "Testbeds" and "Records"): one malformed record
in the run directory must not stop ``telemetry down`` or ``testbed down --all``. A generated family of
malformed records sits beside well-formed stale ones: each bad one is skipped, counted and named,
the good ones are still cleaned, and nothing a bad record names is touched."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

#: A pid no process has (above any pid_max) with no start time: its owner is gone.
GONE = 2**22 + 12345


def _ebpf_good(i: int) -> dict:
    return {"owner_pid": GONE + i, "owner_start": 1, "created": 0.0, "interfaces": [], "filters": [],
            "clsact": [], "links": []}


def _testbed_good(prefix: str) -> dict:
    return {"prefix": prefix, "owner_pid": GONE, "owner_start": 1, "created": 0.0, "namespaces": [],
            "root_links": [], "processes": [], "ovs": [], "info": {}}


def _bad_texts(good: dict, fields: dict[str, list]) -> dict[str, str]:
    """Malformed variants of ``good``: unreadable, not JSON, not an object, deep, and each field
    given each of its wrong values."""
    out = {"empty": "", "not JSON": "{", "binary": "\x00\x01", "a list": "[]", "a string": '"x"',
           "deep": "[" * 10_000 + "]" * 10_000}
    for key, values in fields.items():
        for j, v in enumerate(values):
            out[f"{key} {j}"] = json.dumps({**good, key: v})
    return out


_WRONG_PIDS = ["x", -1, True, 1.5, None, [1]]

EBPF_BAD = _bad_texts(_ebpf_good(0), {
    "owner_pid": _WRONG_PIDS,
    "owner_start": ["x", [1], -3],
    "filters": ["x", [1], [{"netns_path": 1}], [{"netns_path": "/x", "netns_ino": 1, "ifindex": 1,
                                                 "direction": "up", "prog_id": 1}]],
    "clsact": [{"a": 1}, [None], [{"netns_path": "/x", "netns_ino": "1", "ifindex": 1}]],
    "interfaces": [7],
})

TESTBED_BAD = _bad_texts(_testbed_good("okb"), {
    "prefix": ["", "../x", 5, "UPPER", "a" * 20],
    "owner_pid": _WRONG_PIDS,
    "namespaces": ["okb-x", ["../../etc"], ["/proc/1/ns/net"], ["other-dtn"], [5], ["okb-.."]],
    "root_links": ["x", ["a/b"], ["x" * 16], [None]],
    "processes": [{"pid": 1}, [{"pid": "1"}], [{"pid": 0}], [{"pid": 5, "start": "x"}], [7]],
    "ovs": [[{"bridge": "../x"}], [{}], ["br"]],
})


def _fill(d: Path, bad: dict[str, str], good: list[tuple[str, dict]]) -> dict[str, Path]:
    d.mkdir(parents=True, exist_ok=True)
    paths = {}
    for i, (case, text) in enumerate(bad.items()):
        p = d / f"bad{i}.json"
        p.write_text(text)
        paths[case] = p
    for name, rec in good:
        (d / f"{name}.json").write_text(json.dumps(rec))
    os.mkfifo(d / "fifo.json")  # a FIFO among the records must not hang the clean-up
    paths["a FIFO"] = d / "fifo.json"
    return paths


def test_telemetry_down_skips_counts_and_names_every_bad_record(tmp_path, monkeypatch) -> None:
    from scidmz.telemetry.ebpf import attach

    monkeypatch.setenv("SCIDMZ_RUN_DIR", str(tmp_path))
    goods = [(f"{GONE + i}", _ebpf_good(i)) for i in range(3)]
    bad = _fill(attach.run_dir(), EBPF_BAD, goods)
    res = attach.down_stale()
    assert res["records"] == len(goods)  # the good ones were cleaned
    for name, _ in goods:
        assert not (attach.run_dir() / f"{name}.json").exists()
    named = {b["file"] for b in res["bad_records"]}
    assert named == {str(p) for p in bad.values()}, set(map(str, bad.values())) ^ named
    for b in res["bad_records"]:
        assert b["file"] in b["why"] and "\n" not in b["why"]
    assert all(p.exists() for p in bad.values())  # a bad record is left for the admin to read


def test_testbed_down_all_skips_counts_and_names_every_bad_record(tmp_path, monkeypatch) -> None:
    from scidmz.plant.netns.manage import registry

    monkeypatch.setattr(registry, "RUN_DIR", tmp_path)
    goods = [(p, _testbed_good(p)) for p in ("okb", "okc")]
    bad = _fill(tmp_path, TESTBED_BAD, goods)
    found: list[dict[str, str]] = []
    removed = registry.down_all(found)
    assert set(removed) == {"okb", "okc"}
    assert not (tmp_path / "okb.json").exists() and not (tmp_path / "okc.json").exists()
    assert {b["file"] for b in found} == {str(p) for p in bad.values()}
    assert all(p.exists() for p in bad.values())


@pytest.mark.parametrize("case", [c for c in TESTBED_BAD if c.startswith(("namespaces", "prefix", "ovs"))])
def test_a_record_naming_something_not_its_own_is_refused_whole(case) -> None:
    from scidmz.plant.netns.manage.registry import check_record

    data = json.loads(TESTBED_BAD[case])
    with pytest.raises(ValueError):
        check_record(data)
