"""scidmz.telemetry.ebpf: the telemetry algorithms as eBPF programs on a Linux router.

The third realisation of MLC Algorithms 2-8 and JENKS 3.1, next to the
software twin (``telemetry.twin.algorithms``) and the P4 programs
(``telemetry_p4/``), from the same constants. docs/telemetry_ebpf.md has the
whole story.

scidmz_telemetry.bpf.c   the programs: tc clsact on the LAN and WAN interfaces, and the
                         WAN transmit tracepoint (after the qdisc)
layout      the map layout shared by the C side and the reader (one spec)
gen_header  constants.py + layout -> scidmz_ebpf.h (written at build time)
build       clang -target bpf into a cache, on first use
libbpf      the libbpf calls, through ctypes (and why libbpf)
objects     EbpfObject: load with the configuration, verifier errors, map reads,
            BPF_PROG_TEST_RUN
attach      clsact filters and the tracepoint link, the record of what was made,
            cleanup (``down_stale``), one instance per interface
view        EbpfView (the collector's DataPlaneView over the maps), EbpfCollector
source      EbpfTelemetry: NetworkState every T and the flow table, live
replay      EbpfReplay: the programs on recorded frames (equivalence tests, benchmark)

Importing this package loads nothing into the kernel and imports only NumPy.
"""

from __future__ import annotations

from typing import Any

__all__ = ["EbpfTelemetry", "EGRESS_HOOKS"]


def __getattr__(name: str) -> Any:
    # lazy, so `python -m scidmz.telemetry.ebpf.gen_header` does not import the rest first
    if name in __all__:
        from . import source

        return getattr(source, name)
    raise AttributeError(name)
