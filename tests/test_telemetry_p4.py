"""The P4 programs stay in lockstep with constants.py, the twin and the P4Info.

Source-level checks that need no compiler (tests/test_p4_compile.py runs p4c
and p4test, tests/test_p4_bmv2.py runs the program on BMv2). They catch what a
drifting twin would: stale generated constants, hash field
lists or digest layouts that differ from constants.py, register/table names
or sizes that differ between the two programs and the P4Info, unbalanced
braces, undefined SCIDMZ_ macros, tables declared but never applied, actions
listed but never declared, TNA Registers with more than four RegisterActions
or RegisterActions never executed, and digest types the TNA deparser does not
pack.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scidmz.telemetry import constants as C

ROOT = Path(__file__).resolve().parents[1]
P4 = ROOT / "telemetry_p4"
HEADER = P4 / "include" / "scidmz_constants.p4"
HEADERS = P4 / "include" / "scidmz_headers.p4"
V1 = P4 / "v1model" / "scidmz_telemetry.p4"
TNA = P4 / "tna" / "scidmz_telemetry.p4"
P4INFO = P4 / "v1model" / "scidmz_telemetry.p4info.txtpb"
sys.path.insert(0, str(P4))

import gen_constants  # noqa: E402
import gen_p4info  # noqa: E402


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _defines(text: str) -> dict[str, str]:
    return dict(re.findall(r"^#define[ \t]+(SCIDMZ_\w+)(?:\(k\))?[ \t]+(\S.*)$", text, flags=re.M))


def _expand_stage_macro(text: str) -> str:
    """Expand the TNA's SCIDMZ_RTT_STAGE_ACTIONS(N) the way cpp would (## pasting)."""
    m = re.search(r"#define SCIDMZ_RTT_STAGE_ACTIONS\(N\)(.*?)\n\s*\n", text, flags=re.S)
    if not m:
        return text
    body = m.group(1).replace("\\\n", "\n")
    text = text[: m.start()] + text[m.end():]
    for n in range(C.RTT_STAGES):
        text = text.replace(f"SCIDMZ_RTT_STAGE_ACTIONS({n})", body.replace("##N", str(n)))
    return text


# -- constants header ------------------------------------------------------------------
def test_generated_header_is_current():
    assert HEADER.read_text() == gen_constants.render(), "run python telemetry_p4/gen_constants.py"


def test_header_values_equal_constants_both_directions():
    defs = _defines(HEADER.read_text())
    ints = gen_constants.int_constants(C)
    # constants.py -> header
    for name, v in ints.items():
        assert f"SCIDMZ_{name}" in defs, f"{name} missing from scidmz_constants.p4"
        assert int(defs[f"SCIDMZ_{name}"], 0) == v, name
    # header -> constants.py (P4-only values are the documented SCIDMZ_P4_ ones)
    for macro, text in defs.items():
        if macro.startswith("SCIDMZ_FIELDS_") or macro.startswith("SCIDMZ_P4_"):
            continue
        name = macro[len("SCIDMZ_"):]
        assert name in ints, f"{macro} has no counterpart in constants.py"
        assert int(text, 0) == ints[name]
    # TNA timeouts are the same microseconds in 1024 ns ticks
    assert int(defs["SCIDMZ_P4_TNA_RTT_TIMEOUT_TICKS"], 0) == C.RTT_TIMEOUT_US * 1000 // C.TS_TICK_NS_TNA
    assert int(defs["SCIDMZ_P4_TNA_T_TH_TICKS"], 0) == C.T_TH_US * 1000 // C.TS_TICK_NS_TNA


def test_hash_field_lists_and_digests_match_constants():
    text = HEADER.read_text()
    defs = _defines(text)

    def fields(macro: str) -> tuple[str, ...]:
        return tuple(x.strip()[2:] for x in defs[macro].strip("{} ").split(","))

    assert fields("SCIDMZ_FIELDS_FLOW") == C.FLOW_FIELDS
    assert fields("SCIDMZ_FIELDS_FLOW_SIG") == C.FLOW_SIG_FIELDS
    assert fields("SCIDMZ_FIELDS_RTT_SIG") == C.RTT_SIG_FIELDS
    assert fields("SCIDMZ_FIELDS_QD_INDEX") == C.QD_INDEX_FIELDS
    assert fields("SCIDMZ_FIELDS_QD_SIG") == C.QD_SIG_FIELDS
    for i, f in enumerate(C.RTT_STAGE_FIELDS):
        assert fields(f"SCIDMZ_FIELDS_RTT_STAGE{i}") == f
    for r, f in enumerate(C.CMS_ROW_FIELDS):
        assert fields(f"SCIDMZ_FIELDS_CMS_ROW{r}") == f
    key = re.search(r"struct scidmz_hash_key_t \{(.*?)\}", text, flags=re.S).group(1)
    assert dict((n, int(b)) for b, n in re.findall(r"bit<(\d+)>\s+(\w+);", key)) == C.HASH_FIELD_BITS
    for sname, spec in (("scidmz_rtt_digest_t", C.DIGEST_RTT_FIELDS),
                        ("scidmz_flow_digest_t", C.DIGEST_FLOW_FIELDS)):
        body = re.search(rf"struct {sname} \{{(.*?)\}}", text, flags=re.S).group(1)
        got = tuple((n, int(b)) for b, n in re.findall(r"bit<(\d+)>\s+(\w+);", body))
        assert got == spec, sname


def test_every_scidmz_macro_used_is_defined():
    # the generated constants, and the parser/selection macros of the shared header
    macros = set(re.findall(r"^#define[ \t]+(SCIDMZ_\w+)\(", HEADERS.read_text(), flags=re.M))
    defined = set(_defines(HEADER.read_text())) | macros | {"SCIDMZ_RTT_STAGE_ACTIONS"}
    guards = {"SCIDMZ_CONSTANTS_P4_", "SCIDMZ_HEADERS_P4_"}
    for f in (V1, TNA, HEADERS):
        used = set(re.findall(r"\bSCIDMZ_\w+", _strip_comments(f.read_text())))
        assert used - defined - guards == set(), f"{f.name}: undefined {sorted(used - defined - guards)}"


def test_cpp_expands_both_programs(tmp_path):
    """With stub architecture includes, cpp must expand every macro (no SCIDMZ_ left)."""
    cpp = shutil.which("cpp")
    if cpp is None:
        pytest.skip("no C preprocessor on this machine (the macro test above still ran)")
    for stub in ("core.p4", "v1model.p4", "tna.p4"):
        (tmp_path / stub).write_text("")
    for prog in (V1, TNA):
        out = subprocess.run([cpp, "-P", "-undef", "-nostdinc", "-I", str(tmp_path), str(prog)],
                             capture_output=True, text=True, check=False)
        assert out.returncode == 0, out.stderr
        left = set(re.findall(r"\bSCIDMZ_\w+", out.stdout))
        assert left == set(), f"{prog}: unexpanded {sorted(left)}"
        assert out.stdout.count("{") == out.stdout.count("}")
        assert out.stdout.count("(") == out.stdout.count(")")


# -- program structure ------------------------------------------------------------------------
def _program(path: Path) -> str:
    return _expand_stage_macro(_strip_comments(path.read_text()))


@pytest.mark.parametrize("path", [V1, TNA, HEADERS])
def test_balanced_delimiters(path):
    text = _program(path)
    for o, c in ("{}", "()", "[]"):
        depth = 0
        for ch in text:
            depth += (ch == o) - (ch == c)
            assert depth >= 0, f"{path.name}: '{c}' without '{o}'"
        assert depth == 0, f"{path.name}: unbalanced {o}{c}"


def _registers(text: str, tna: bool) -> dict[str, str]:
    """register name -> size expression."""
    pat = r"\bRegister<[^;]*?>\((\w+)\)\s+(\w+);" if tna else r"\bregister<[^;]*?>\((\w+)\)\s+(\w+);"
    return {name: size for size, name in re.findall(pat, text)}


def _tables(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in
            re.finditer(r"\btable\s+(\w+)\s*\{(.*?)\n    \}", text, flags=re.S)}


def _expected_registers() -> set[str]:
    names: set[str] = set()
    for n in C.__all__:
        if n.startswith("REG_"):
            v = getattr(C, n)
            names.update(v if isinstance(v, tuple) else (v,))
    return names


@pytest.mark.parametrize("path,tna", [(V1, False), (TNA, True)])
def test_registers_are_constants_registers_with_constant_sizes(path, tna):
    regs = _registers(_program(path), tna)
    assert set(regs) == _expected_registers()
    defs = _defines(HEADER.read_text())
    size_of = {name: size for name, size, _ in gen_p4info.registers(C)}
    for name, expr in regs.items():
        assert int(defs[expr], 0) == size_of[name], f"{path.name}: {name} sized {expr}"


@pytest.mark.parametrize("path", [V1, TNA])
def test_tables_applied_and_actions_declared(path):
    text = _program(path)
    tables = _tables(text)
    assert set(tables) == {"tap_port", "class_lpm", "class_lpm_src"}
    declared = set(re.findall(r"\baction\s+(\w+)\s*\(", text))
    for name, body in tables.items():
        assert re.search(rf"\b{name}\.apply\(\)", text), f"{path.name}: table {name} never applied"
        acts = re.search(r"actions\s*=\s*\{(.*?)\}", body, flags=re.S).group(1)
        for a in re.findall(r"(\w+)\s*;", acts):
            assert a in declared, f"{path.name}: {name} lists undeclared action {a}"
    assert f"counters = {C.COUNTER_CLASS_BYTES};" in tables["class_lpm"]


def test_v1model_registers_are_all_used_and_digests_sent():
    text = _program(V1)
    for name in _registers(text, False):
        assert re.search(rf"\b{name}\.(read|write)\(", text), f"register {name} never used"
    for sname in ("scidmz_rtt_digest_t", "scidmz_flow_digest_t"):
        assert f"digest<{sname}>(" in text


def test_tna_register_actions_and_digests():
    text = _program(TNA)
    regs = _registers(text, True)
    ra = re.findall(r"RegisterAction<[^>]*(?:<[^>]*>[^>]*)*>\((\w+)\)\s+(\w+)\s*=", text)
    per_reg: dict[str, int] = {}
    for reg, action in ra:
        assert reg in regs, f"RegisterAction {action} on undeclared register {reg}"
        per_reg[reg] = per_reg.get(reg, 0) + 1
        assert re.search(rf"\b{action}\.execute\(", text), f"RegisterAction {action} never executed"
    assert set(per_reg) == set(regs), f"registers without RegisterAction: {set(regs) - set(per_reg)}"
    assert max(per_reg.values()) <= 4, "Tofino allows at most 4 RegisterActions per Register"
    # no v1model-style direct register access on Tofino
    assert not re.search(r"\.(read|write)\(", text)
    # every digest_type the ingress sets has a Digest in the deparser that packs it
    dep = text[text.index("control ScidmzIngressDeparser"):]
    for macro in re.findall(r"digest_type\s*=\s*(SCIDMZ_\w+)", text):
        inst = re.search(rf"Digest<(\w+)>\({macro}\)\s+(\w+);", dep)
        assert inst, f"digest_type {macro} has no Digest in the deparser"
        assert f"{inst.group(2)}.pack(" in dep
    assert "Switch(pipe) main;" in text


# -- P4Info ---------------------------------------------------------------------------------------
def test_p4info_is_current_and_matches_program():
    from scidmz.telemetry.p4.p4info import P4InfoIndex

    idx = P4InfoIndex.from_file(P4INFO)
    text = _program(V1)
    short = {k: {n.split(".")[-1] for n in v} for k, v in idx.names().items()}
    assert short["registers"] == set(_registers(text, False))
    assert short["tables"] == set(_tables(text))
    assert short["direct_counters"] == {C.COUNTER_CLASS_BYTES}
    assert short["digests"] == {"scidmz_rtt_digest_t", "scidmz_flow_digest_t"}
    defs = _defines(HEADER.read_text())
    widths = {n: int(defs.get(w, w), 0) for w, n in
              re.findall(r"register<bit<(\w+)>,\s*\w+>\(\w+\)\s+(\w+);", text)}
    for name, reg in idx.registers.items():
        assert reg.bitwidth == widths[reg.name.split(".")[-1]], name
    for tname, t in idx.tables.items():
        body = _tables(text)[tname.split(".")[-1]]
        for key in t.match_fields:
            assert f'@name("{key}")' in body, f"{tname}: key {key} not in the program"
        assert {a.split(".")[-1] for a in t.actions} == set(
            re.findall(r"(\w+)\s*;", re.search(r"actions\s*=\s*\{(.*?)\}", body, flags=re.S).group(1)))
    # the TNA program declares the same tables and registers
    tna = _program(TNA)
    assert set(_tables(tna)) == short["tables"]
    assert set(_registers(tna, True)) == short["registers"]


def test_p4info_index_resolves_short_and_full_names():
    from scidmz.telemetry.p4.p4info import P4InfoIndex

    idx = P4InfoIndex.from_file(P4INFO)
    assert idx.table("class_lpm") is idx.table("ScidmzIngress.class_lpm")
    assert idx.register(C.REG_QD_SUM).bitwidth == C.QD_SUM_BITS
    assert idx.direct_counter(C.COUNTER_CLASS_BYTES).direct_table_id == idx.table("class_lpm").id
    with pytest.raises(ValueError, match="no table named"):
        idx.table("nope")
    with pytest.raises(ValueError, match="does not parse"):
        P4InfoIndex.from_text("tables { this is not protobuf text")


@pytest.mark.parametrize("backend", ["upb", "python"])
def test_p4runtime_protobufs_load_under_both_protobuf_backends(backend):
    """The P4Runtime classes come from the wheel's embedded descriptors, so they work whether
    protobuf runs on upb or pure Python (the wheel's own modules fail under one or the other)."""
    import os

    code = (
        "from scidmz.telemetry.p4.p4info import protos, P4InfoIndex\n"
        f"i = P4InfoIndex.from_file({str(P4INFO)!r})\n"
        "assert i.digest('scidmz_flow_digest_t').members[0] == ('kind', 8)\n"
        "p = protos(); w = p.WriteRequest(device_id=3); w.updates.add().type = 1\n"
        "assert p.WriteRequest.FromString(w.SerializeToString()) == w\n"
    )
    env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=backend)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=False, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
