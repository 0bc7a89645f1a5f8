#!/usr/bin/env python3
"""Write telemetry_p4/v1model/scidmz_telemetry.p4info.txtpb without p4c.

No P4 compiler exists on this machine, so the P4Info of the v1model program
is written from this description of the program's control-plane objects
(names as p4c 1.2.4 qualifies them: ``<control instance>.<local name>``;
sizes and widths from constants.py). Object ids use the P4Runtime prefix byte
of each kind (P4Info spec, "P4Info ids") and a stable CRC-32 of the name in
the low 24 bits; p4c derives the low bits differently, which is harmless:
the clients resolve every id by name from whichever P4Info they are given,
so the file p4c writes can replace this one unchanged.

tests/test_telemetry_p4.py checks this file against the .p4 source.

    python telemetry_p4/gen_p4info.py           # rewrite the file
    python telemetry_p4/gen_p4info.py --check   # exit 1 if it is stale
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "v1model" / "scidmz_telemetry.p4info.txtpb"
INGRESS = "ScidmzIngress"

# P4Runtime id prefixes (p4runtime/proto/p4/config/v1/p4info.proto, P4Ids.Prefix)
PFX_ACTION, PFX_TABLE, PFX_DIRECT_COUNTER, PFX_REGISTER, PFX_DIGEST = 0x01, 0x02, 0x13, 0x16, 0x17

# (local name, [(param, bitwidth)])
ACTIONS = [
    ("set_tap", [("tap", 8)]),
    ("unknown_port", []),
    ("set_class", [("class_id", 8)]),
    ("class_miss", []),
    ("set_class_src", [("class_id", 8)]),
]


def _c():
    try:
        from scidmz.telemetry import constants
    except ImportError:
        sys.path.insert(0, str(HERE.parent / "src"))
        from scidmz.telemetry import constants
    return constants


def _id(prefix: int, name: str) -> int:
    return (prefix << 24) | (zlib.crc32(name.encode()) & 0xFFFFFF)


def tables(c) -> list[dict]:
    """Tables: name, keys (name, bitwidth, match), actions, default-only actions, size."""
    return [
        {"name": "tap_port", "keys": [("ingress_port", 9, "EXACT")],
         "actions": ["set_tap", "unknown_port"], "defaultonly": [], "default": "unknown_port",
         "size": _gen_const("P4_TAP_PORT_SIZE")},
        {"name": "class_lpm", "keys": [("tap", 8, "EXACT"), ("dst_addr", 32, "LPM")],
         "actions": ["set_class", "class_miss"], "defaultonly": ["class_miss"],
         "default": "class_miss", "size": c.CLASS_LPM_SIZE, "counter": c.COUNTER_CLASS_BYTES},
        {"name": "class_lpm_src", "keys": [("src_addr", 32, "LPM")],
         "actions": ["set_class_src", "class_miss"], "defaultonly": ["class_miss"],
         "default": "class_miss", "size": c.CLASS_LPM_SIZE},
    ]


def registers(c) -> list[tuple[str, int, int]]:
    """(local name, size, bitwidth) of every register, in program order."""
    regs = [(n, c.RTT_STAGE_SIZE, 64) for n in c.REG_RTT_STAGE]
    regs += [
        (c.REG_AF_SIG, c.AF_TABLE_SIZE, 32),
        (c.REG_AF_TS, c.AF_TABLE_SIZE, c.TS_BITS),
        (c.REG_AF_COUNT, c.AF_TABLE_SIZE, c.AF_COUNT_BITS),
        (c.REG_AF_ACTIVE, c.AF_TABLE_SIZE, 8),
        (c.REG_AF_BYTES, c.AF_TABLE_SIZE, c.AF_BYTES_BITS),
        (c.REG_FLOW_RTT, c.AF_TABLE_SIZE, 32),
        (c.REG_AF_MAX_EACK, c.AF_TABLE_SIZE, 32),
        (c.REG_AF_RECOVER, c.AF_TABLE_SIZE, 32),
        (c.REG_AF_RECOVER_FLAG, c.AF_TABLE_SIZE, 8),
        (c.REG_QD_TABLE, c.QD_TABLE_SIZE, 64),
        (c.REG_QD_LAST, c.N_CLASSES, 32),
        (c.REG_QD_SUM, c.N_CLASSES, c.QD_SUM_BITS),
        (c.REG_QD_CNT, c.N_CLASSES, c.QD_CNT_BITS),
    ]
    regs += [(n, c.CMS_COLS, c.CMS_COUNTER_BITS) for n in c.REG_CMS]
    return regs


DIGESTS = ("scidmz_rtt_digest_t", "scidmz_flow_digest_t")


def _gen_const(name: str) -> int:
    sys.path.insert(0, str(HERE))
    from gen_constants import P4_ONLY

    return P4_ONLY[name[3:]] if name.startswith("P4_") else P4_ONLY[name]


def build():
    sys.path.insert(0, str(HERE.parent / "src"))
    from scidmz.telemetry.p4info import protos

    c = _c()
    p = protos()
    info = p.msg("p4.config.v1.P4Info")()
    info.pkg_info.arch = "v1model"
    action_ids = {}
    for name, params in ACTIONS:
        full = f"{INGRESS}.{name}"
        a = info.actions.add()
        a.preamble.id = action_ids[name] = _id(PFX_ACTION, full)
        a.preamble.name = full
        a.preamble.alias = name
        for i, (pn, bw) in enumerate(params, start=1):
            prm = a.params.add()
            prm.id, prm.name, prm.bitwidth = i, pn, bw
    for t in tables(c):
        full = f"{INGRESS}.{t['name']}"
        tb = info.tables.add()
        tb.preamble.id = _id(PFX_TABLE, full)
        tb.preamble.name = full
        tb.preamble.alias = t["name"]
        for i, (kn, bw, mt) in enumerate(t["keys"], start=1):
            mf = tb.match_fields.add()
            mf.id, mf.name, mf.bitwidth = i, kn, bw
            mf.match_type = p.enum_value("p4.config.v1.MatchField.MatchType", mt)
        for an in t["actions"]:
            ref = tb.action_refs.add()
            ref.id = action_ids[an]
            if an in t["defaultonly"]:
                ref.scope = p.enum_value("p4.config.v1.ActionRef.Scope", "DEFAULT_ONLY")
        tb.const_default_action_id = 0
        tb.size = t["size"]
        if "counter" in t:
            cfull = f"{INGRESS}.{t['counter']}"
            cid = _id(PFX_DIRECT_COUNTER, cfull)
            tb.direct_resource_ids.append(cid)
            dc = info.direct_counters.add()
            dc.preamble.id = cid
            dc.preamble.name = cfull
            dc.preamble.alias = t["counter"]
            dc.spec.unit = p.enum_value("p4.config.v1.CounterSpec.Unit", "BOTH")
            dc.direct_table_id = tb.preamble.id
    for name, size, bw in registers(c):
        full = f"{INGRESS}.{name}"
        r = info.registers.add()
        r.preamble.id = _id(PFX_REGISTER, full)
        r.preamble.name = full
        r.preamble.alias = name
        r.type_spec.bitstring.bit.bitwidth = bw
        r.size = size
    for sname, fields in zip(DIGESTS, (c.DIGEST_RTT_FIELDS, c.DIGEST_FLOW_FIELDS), strict=True):
        d = info.digests.add()
        d.preamble.id = _id(PFX_DIGEST, sname)
        d.preamble.name = sname
        d.preamble.alias = sname
        d.type_spec.struct.name = sname
        st = info.type_info.structs[sname]
        for fname, bw in fields:
            m = st.members.add()
            m.name = fname
            m.type_spec.bitstring.bit.bitwidth = bw
    return info


def render() -> str:
    from google.protobuf import text_format

    head = ("# GENERATED by telemetry_p4/gen_p4info.py (no p4c here); names and sizes as p4c\n"
            "# 1.2.4 would emit for v1model/scidmz_telemetry.p4, ids stable but not p4c's.\n")
    return head + text_format.MessageToString(build())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    text = render()
    if a.check:
        ok = OUT.exists() and OUT.read_text(encoding="utf-8") == text
        if not ok:
            print(f"{OUT} is stale: run python telemetry_p4/gen_p4info.py", file=sys.stderr)
        return 0 if ok else 1
    fd, tmp = tempfile.mkstemp(prefix=OUT.name + ".", suffix=".tmp", dir=OUT.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, OUT)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    print(OUT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
