"""``p4/abc.p4`` on BMv2 against the numba core (``tests/test_abc_p4.py``).

Each packet carries its arrival time, aggregate, length and the queue it found
in the cross-check header (ethertype 0x88B5), so the switch and
:func:`scidmz.disciplines.abc.core.abc_run` see exactly the same inputs. The
switch's fixed-point activity (Q8) and verdict come back in the same header.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from ..p4check import compile_program, replay

P4_DIR = Path(__file__).resolve().parent / "p4"
ETYPE = 0x88B5
_HDR = struct.Struct("!6s6sHIBHHiB")


def compile_abc(workdir: Path) -> Path:
    """p4c for bmv2/v1model on abc.p4; returns the JSON path."""
    return compile_program(P4_DIR / "abc.p4", workdir)


def run_bmv2(json_path: Path, t_us: np.ndarray, agg: np.ndarray, length: np.ndarray, q: np.ndarray,
             workdir: Path, timeout_s: float = 300.0) -> tuple[np.ndarray, np.ndarray]:
    """Replay the sequence through simple_switch; returns (activity Q8 as float, verdict bool) per packet."""
    frames = [_HDR.pack(b"\x02" * 6, b"\x04" * 6, ETYPE, int(t), int(a), int(n), int(qq), 0, 0)
              for t, a, n, qq in zip(t_us, agg, length, q, strict=True)]
    got = replay(json_path, frames, ETYPE, workdir, timeout_s)
    act = np.empty(len(got))
    ver = np.empty(len(got), np.bool_)
    for k, fr in enumerate(got):
        f = _HDR.unpack(fr[: _HDR.size])
        act[k] = f[7] / 256.0
        ver[k] = f[8] == 1
    return act, ver
