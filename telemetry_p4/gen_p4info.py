#!/usr/bin/env python3
"""Write telemetry_p4/v1model/scidmz_telemetry.p4info.txtpb from p4c's own output.

The committed P4Info is exactly what ``p4c --target bmv2 --arch v1model
--p4runtime-files`` writes for v1model/scidmz_telemetry.p4 (p4c picks the
ids, ``@defaultonly`` annotations, and lists every action the program
declares, also those only called from the control). Clients resolve every id
by name, so a P4Info from another p4c version works too.

``tables()`` / ``registers()`` / ``DIGESTS`` describe what the P4Info must
contain according to constants.py (the twin); tests/test_p4_compile.py checks
the compiler's P4Info against them.

    python telemetry_p4/gen_p4info.py           # compile and rewrite the file
    python telemetry_p4/gen_p4info.py --check   # exit 1 if it differs from p4c's
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE / "v1model" / "scidmz_telemetry.p4"
OUT = HERE / "v1model" / "scidmz_telemetry.p4info.txtpb"


def tables(c) -> list[dict]:
    """Tables: name, keys (name, bitwidth, match), actions, default-only actions, size."""
    return [
        {"name": "tap_port", "keys": [("ingress_port", 9, "EXACT")],
         "actions": ["set_tap", "unknown_port"], "defaultonly": [], "default": "unknown_port",
         "size": _gen_const("P4_TAP_PORT_SIZE")},
        {"name": "class_lpm", "keys": [("tap", 8, "EXACT"), ("dst_addr", c.ADDR_BITS, "LPM")],
         "actions": ["set_class", "class_miss"], "defaultonly": ["class_miss"],
         "default": "class_miss", "size": c.CLASS_LPM_SIZE, "counter": c.COUNTER_CLASS_BYTES},
        {"name": "class_lpm_src", "keys": [("src_addr", c.ADDR_BITS, "LPM")],
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
    regs += [(c.REG_CLASS_STRIP, c.N_CLASSES, c.CLASS_STRIP_BITS)]
    return regs


DIGESTS = ("scidmz_rtt_digest_t", "scidmz_flow_digest_t")


def _gen_const(name: str) -> int:
    sys.path.insert(0, str(HERE))
    from gen_constants import P4_ONLY

    return P4_ONLY[name[3:]] if name.startswith("P4_") else P4_ONLY[name]


def render() -> str:
    """The P4Info text p4c writes for the v1model program (needs the toolchain, scidmz.telemetry.p4.toolchain)."""
    sys.path.insert(0, str(HERE.parent / "src"))
    from scidmz.telemetry.p4 import toolchain as p4tc

    with tempfile.TemporaryDirectory(prefix="scidmz-p4info-") as tmp:
        return p4tc.compile_bmv2(SRC, tmp).p4info.read_text(encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    text = render()
    if a.check:
        ok = OUT.exists() and OUT.read_text(encoding="utf-8") == text
        if not ok:
            print(f"{OUT} differs from p4c's: run python telemetry_p4/gen_p4info.py", file=sys.stderr)
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
