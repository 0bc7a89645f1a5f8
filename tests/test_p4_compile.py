"""The telemetry programs meet the real compiler.

* v1model: ``p4c --target bmv2 --arch v1model --p4runtime-files`` compiles
  it without a warning; the P4Info it writes equals the committed one byte for
  byte and agrees with constants.py (the twin) on every table, key, size,
  register width and digest layout.
* TNA: ``p4test`` (front and mid end) with the toolchain's open-source Tofino
  headers and ``-D__TARGET_TOFINO__=1`` passes without a warning.

Without the toolchain these skip with one line, except when ``CI`` is set:
then they fail, so CI can never silently skip them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from scidmz.telemetry import constants as C
from scidmz.telemetry.p4 import toolchain as p4tc

ROOT = Path(__file__).resolve().parents[1]
P4 = ROOT / "telemetry_p4"
V1 = P4 / "v1model" / "scidmz_telemetry.p4"
TNA = P4 / "tna" / "scidmz_telemetry.p4"
P4INFO = P4 / "v1model" / "scidmz_telemetry.p4info.txtpb"
sys.path.insert(0, str(P4))

import gen_p4info  # noqa: E402


@pytest.fixture(scope="module")
def toolchain() -> Path:
    b = p4tc.toolchain_bin()
    if b is None:
        reason = "no P4 toolchain (p4c not on PATH, P4TC, ~/.cache/scidmz/p4tc): scripts/install_p4tc.sh"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} -- and CI is set, where these tests must run")
        pytest.skip(reason)
    return b


@pytest.fixture(scope="module")
def compiled(toolchain, tmp_path_factory) -> p4tc.Compiled:
    return p4tc.compile_bmv2(V1, tmp_path_factory.mktemp("p4c"))


def test_v1model_compiles_and_p4info_is_the_committed_one(compiled):
    assert compiled.json.stat().st_size > 10_000
    assert compiled.p4info.read_text() == P4INFO.read_text(), "run python telemetry_p4/gen_p4info.py"


def test_compiled_p4info_agrees_with_the_twin(compiled):
    from scidmz.telemetry.p4.p4info import P4InfoIndex

    idx = P4InfoIndex.from_file(compiled.p4info)
    want_regs = {n: (size, bw) for n, size, bw in gen_p4info.registers(C)}
    got_regs = {r.name.split(".")[-1]: (r.size, r.bitwidth) for r in idx.registers.values()}
    assert got_regs == want_regs
    for t in gen_p4info.tables(C):
        ti = idx.table(t["name"])
        assert ti.size == t["size"], t["name"]
        assert [(k, ti.match_fields[k][1]) for k in ti.match_fields] == [(k, bw) for k, bw, _ in t["keys"]]
        assert {a.split(".")[-1] for a in ti.actions} == set(t["actions"])
    assert idx.direct_counter(C.COUNTER_CLASS_BYTES).direct_table_id == idx.table("class_lpm").id
    for name, fields in zip(gen_p4info.DIGESTS, (C.DIGEST_RTT_FIELDS, C.DIGEST_FLOW_FIELDS), strict=True):
        assert list(idx.digest(name).members) == [(f, bw) for f, bw in fields], name


def test_compile_error_is_reported_with_the_compiler_output(toolchain, tmp_path):
    bad = tmp_path / "bad.p4"
    bad.write_text(V1.read_text().replace("#define V1MODEL_VERSION 20200408\n", ""))
    # the program includes ../include: keep the relative layout
    (tmp_path / "v1model").mkdir()
    moved = tmp_path / "v1model" / "bad.p4"
    bad.rename(moved)
    (tmp_path / "include").symlink_to(P4 / "include")
    with pytest.raises(p4tc.CompileError, match="p4c failed on bad.p4") as err:
        p4tc.compile_bmv2(moved, tmp_path / "out")
    assert "register" in err.value.output


def test_tna_passes_p4test_front_and_mid_end_without_warnings(toolchain):
    inc = p4tc.tofino_include()
    assert (inc / "tna.p4").is_file()
    p4test_s = p4tc.p4test(TNA, includes=(inc,), defines=("__TARGET_TOFINO__=1",))
    assert p4test_s > 0


def test_toolchain_lookup_order(toolchain, tmp_path, monkeypatch):
    fake = tmp_path / "p4tc" / "bin"
    fake.mkdir(parents=True)
    (fake / "p4c").write_text("#!/bin/sh\n")
    (fake / "p4c").chmod(0o755)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("P4TC", str(tmp_path / "p4tc"))
    assert p4tc.toolchain_bin() == fake.resolve()
    monkeypatch.setenv("PATH", f"{toolchain}:/usr/bin:/bin")
    assert p4tc.toolchain_bin() == toolchain
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.delenv("P4TC")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty"))
    assert p4tc.toolchain_bin() is None
    with pytest.raises(p4tc.ToolchainMissing, match="install_p4tc"):
        p4tc.require_toolchain()
