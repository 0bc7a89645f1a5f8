"""Generate the eBPF programs' C header from ``constants.py`` (the P4 header's sibling).

``telemetry_p4/gen_constants.py`` turns ``constants.py`` into
``scidmz_constants.p4``; this module turns the same module into
``scidmz_ebpf.h`` for ``scidmz_telemetry.bpf.c``, so the twin, the P4
programs and the eBPF programs take every number from one place:

* every public integer constant as ``#define SCIDMZ_<NAME>`` (tuples of
  integers as ``SCIDMZ_<NAME>_<i>`` and ``_COUNT``), exactly the P4 header's
  names and values;
* the eBPF-only numbers (``layout.EBPF_ONLY``) as ``SCIDMZ_EBPF_<NAME>``, the
  twin's event counters and the parser's reasons as indices into the
  per-CPU counter block (``SCIDMZ_CTR_<NAME>``), the parser's packet kinds
  (``SCIDMZ_KIND_<NAME>``);
* the map value structs of ``layout.py`` (a 128-bit field as two host-order
  ``__u64`` words ``<name>_hi``/``_lo``: ``layout.words`` says why);
* the slicing-by-4 CRC-32 tables of the twin (``layout.CRC_TABLE``) and one
  straight-line function per hash field list (``scidmz_crc_flow``,
  ``scidmz_crc_rtt_stage0`` ...): the P4 header's ``SCIDMZ_FIELDS_*`` lists
  unrolled into table steps, in constants.py's field order, so the CRC input
  layout cannot drift from the twin's and the switch's.

The header is written at build time next to the object (``build.py``), never
committed, so it cannot go stale::

    python -m scidmz.telemetry.ebpf.gen_header [OUT]   # print or write it

Hash inputs: a field enters the reflected CRC as its big-endian bytes. The
programs keep every hash field as the raw network-order bytes loaded as a
little-endian word (``struct scidmz_hkey``), which is exactly the value the
twin's ``swap`` produces, so no byte swap is needed per hash.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .. import constants as C
from ..twin.layout import CRC_TABLE, STAT_NAMES
from ..twin.parse import KIND_DROP, KIND_L3, KIND_TCP, KIND_UDP
from .layout import (
    AF_SLOT,
    CELL,
    CFG_HEAD,
    COUNTER_NAMES,
    EBPF_ONLY,
    EBPF_REASONS,
    FLOW_EVENT,
    PARSE_REASONS,
    PREFIX,
)

__all__ = ["render", "int_constants", "HASHES", "KINDS"]

#: The twin parser's packet kinds, as the programs name them (SCIDMZ_KIND_<NAME>).
KINDS: dict[str, int] = {"DROP": KIND_DROP, "L3": KIND_L3, "TCP": KIND_TCP, "UDP": KIND_UDP}

_CTYPE = {8: "__u8", 16: "__u16", 32: "__u32", 64: "__u64"}

# The hash field lists the programs use: (function suffix, fields), as the P4 header's macros.
HASHES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("flow", C.FLOW_FIELDS),
    ("flow_sig", C.FLOW_SIG_FIELDS),
    *((f"rtt_stage{i}", f) for i, f in enumerate(C.RTT_STAGE_FIELDS)),
    ("rtt_sig", C.RTT_SIG_FIELDS),
    ("qd_index", C.QD_INDEX_FIELDS),
    ("qd_sig", C.QD_SIG_FIELDS),
    *((f"cms_row{r}", f) for r, f in enumerate(C.CMS_ROW_FIELDS)),
)


def int_constants() -> dict[str, int]:
    """Every public integer constant of constants.py (bools excluded), as gen_constants.py emits them."""
    out: dict[str, int] = {}
    for name in C.__all__:
        v = getattr(C, name)
        if isinstance(v, int) and not isinstance(v, bool):
            out[name] = int(v)
        elif isinstance(v, tuple) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            for i, x in enumerate(v):
                out[f"{name}_{i}"] = int(x)
            out[f"{name}_COUNT"] = len(v)
    return out


def _lit(v: int) -> str:
    if v < 0:
        return f"({v})"
    if v > 0xFFFFFFFF:
        return f"0x{v:X}ULL"
    if v > 0x7FFFFFFF:
        return f"0x{v:X}U"
    return f"0x{v:X}" if v > 0xFFFF else str(v)


def _struct(name: str, fields: tuple[tuple[str, int], ...], size: int | None = None) -> list[str]:
    lines = [f"struct {name} {{"]
    used = 0
    for f, bits in fields:
        lines.append(f"    {_CTYPE[bits]} {f};")
        used += bits // 8
    if size is not None and size > used:
        lines.append(f"    __u8 _pad[{size - used}];")
    lines.append("};")
    if size is not None:
        lines.append(f"_Static_assert(sizeof(struct {name}) == {size}, \"{name} layout\");")
    return lines


def _steps(fields: tuple[str, ...]) -> list[str]:
    return [f"    SCIDMZ_CRC_STEP{C.HASH_FIELD_BITS[f]}(c, k->{f});" for f in fields]


def _crc_function(suffix: str, fields: tuple[str, ...]) -> list[str]:
    """``scidmz_crc_<suffix>(k)``, and ``scidmz_crc_<suffix>_f(k, flow_raw)``: the same value, which
    starts from the 5-tuple's CRC state ``flow_raw`` when the list begins with FLOW_FIELDS (a CRC
    over a prefix is a state the rest continues from), so shared prefixes are hashed once."""
    lines = [f"static __always_inline __u32 scidmz_crc_{suffix}(const struct scidmz_hkey *k)", "{",
             "    __u32 c = 0xFFFFFFFFU;", *_steps(fields), "    return ~c;", "}"]
    n = len(C.FLOW_FIELDS)
    lines += [f"static __always_inline __u32 scidmz_crc_{suffix}_f(const struct scidmz_hkey *k, __u32 flow_raw)",
              "{"]
    if fields[:n] == C.FLOW_FIELDS:
        lines += ["    __u32 c = flow_raw;", *_steps(fields[n:]), "    return ~c;", "}"]
    else:
        lines += ["    (void)flow_raw;", f"    return scidmz_crc_{suffix}(k);", "}"]
    return lines


def render() -> str:
    """The whole header, as text."""
    out = [
        "/* GENERATED by scidmz.telemetry.ebpf.gen_header from src/scidmz/telemetry/constants.py",
        " * (and telemetry/ebpf/layout.py). Do not edit: it is rewritten at every build. */",
        "#ifndef SCIDMZ_EBPF_H_",
        "#define SCIDMZ_EBPF_H_",
        "",
        "/* ---- integer constants (constants.py NAME -> SCIDMZ_NAME, as the P4 header) ---- */",
    ]
    out += [f"#define SCIDMZ_{n} {_lit(v)}" for n, v in int_constants().items()]
    out += ["", "/* ---- eBPF-only constants (layout.EBPF_ONLY) ---- */"]
    out += [f"#define SCIDMZ_EBPF_{n} {_lit(v)}" for n, v in EBPF_ONLY.items()]
    out += ["", "/* ---- the twin's event counters (layout.STAT_NAMES order) ---- */"]
    out += [f"#define SCIDMZ_S_{s.upper()} {i}" for i, s in enumerate(STAT_NAMES)]
    out += ["", "/* ---- packet kinds (twin.parse KIND_*: what the parser lets a frame take part in) ---- */"]
    out += [f"#define SCIDMZ_KIND_{n} {v}" for n, v in KINDS.items()]
    out += ["", "/* ---- parser reasons (parse.REASONS codes) ---- */"]
    out += [f"#define SCIDMZ_R_{r.upper()} {i + 1}" for i, r in enumerate((*PARSE_REASONS, *EBPF_REASONS))]
    out += ["", "/* ---- the per-CPU counter block (layout.COUNTER_NAMES) ---- */"]
    out += [f"#define SCIDMZ_CTR_{n.upper()} {i}" for i, n in enumerate(COUNTER_NAMES)]
    out += [f"#define SCIDMZ_CTR_STAT0 {COUNTER_NAMES.index('stat_' + STAT_NAMES[0])}",
            f"#define SCIDMZ_CTR_PARSE_BASE {COUNTER_NAMES.index('parse_' + PARSE_REASONS[0]) - 1}  /* + reason code */",
            f"#define SCIDMZ_N_COUNTERS {len(COUNTER_NAMES)}"]
    out += ["", "/* ---- map values (layout.py) ---- */"]
    out += _struct("scidmz_cell", CELL)
    out += _struct("scidmz_af_slot", AF_SLOT, EBPF_ONLY["AF_SLOT_BYTES"])
    out += _struct("scidmz_flow_event", FLOW_EVENT)
    out += _struct("scidmz_prefix", PREFIX)
    out += [f"struct scidmz_counters {{ __u64 v[{len(COUNTER_NAMES)}]; }};", "struct scidmz_cfg {"]
    out += [f"    {_CTYPE[b]} {f};" for f, b in CFG_HEAD]
    out += [f"    struct scidmz_prefix prefix[{C.CLASS_LPM_SIZE}];", "};"]
    out += ["", "/* ---- hash inputs: each field's network-order bytes as a little-endian word ---- */",
            "struct scidmz_hkey {"]
    out += [f"    {_CTYPE[b]} {f};" for f, b in C.HASH_FIELD_BITS.items()]
    out += ["};", "", "/* ---- CRC-32 (reflected 0x04C11DB7, init/xorout 0xFFFFFFFF = zlib.crc32), slicing-by-4 ---- */",
            "static const __u32 scidmz_crc_tab[4][256] = {"]
    for k in range(4):
        row = [f"0x{int(x):08X}U" for x in CRC_TABLE[k]]
        body = ",\n        ".join(", ".join(row[i:i + 8]) for i in range(0, 256, 8))
        out.append(f"    {{\n        {body}\n    }},")
    out += [
        "};",
        "#define SCIDMZ_CRC_T(k, i) scidmz_crc_tab[k][(i) & 0xFF]",
        "#define SCIDMZ_CRC_STEP32(c, v) do { (c) ^= (__u32)(v); (c) = SCIDMZ_CRC_T(3, (c)) ^ SCIDMZ_CRC_T(2, (c) >> 8) \\",
        "        ^ SCIDMZ_CRC_T(1, (c) >> 16) ^ SCIDMZ_CRC_T(0, (c) >> 24); } while (0)",
        "#define SCIDMZ_CRC_STEP16(c, v) do { (c) ^= (__u32)(v); (c) = ((c) >> 16) ^ SCIDMZ_CRC_T(1, (c)) \\",
        "        ^ SCIDMZ_CRC_T(0, (c) >> 8); } while (0)",
        "#define SCIDMZ_CRC_STEP8(c, v) do { (c) = SCIDMZ_CRC_T(0, (c) ^ (__u32)(v)) ^ ((c) >> 8); } while (0)",
        "",
    ]
    out += ["/* the CRC state after the 5-tuple (FLOW_FIELDS), before the final inversion */",
            "static __always_inline __u32 scidmz_crcraw_flow(const struct scidmz_hkey *k)", "{",
            "    __u32 c = 0xFFFFFFFFU;", *_steps(C.FLOW_FIELDS), "    return c;", "}"]
    for suffix, fields in HASHES:
        out += _crc_function(suffix, fields)
    out += ["", "#endif /* SCIDMZ_EBPF_H_ */", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = render()
    if args:
        Path(args[0]).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
