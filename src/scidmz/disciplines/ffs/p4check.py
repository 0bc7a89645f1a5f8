"""``p4/ffs.p4`` on BMv2 against the numba core (``tests/test_ffs_p4.py``).

Each packet carries its arrival time, ingress, length, its labels r and f
(log2 bit/s, Q8) and a 16-bit random number in the cross-check header
(ethertype 0x88B6); the switch writes back the new labels, log2 gamma, log2
tau and its verdict.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from ..p4check import compile_program, replay

P4_DIR = Path(__file__).resolve().parent / "p4"
FFS_ETYPE = 0x88B6
_FFS_HDR = struct.Struct("!6s6sHIBHiiHiiB")


def compile_ffs(workdir: Path) -> Path:
    """p4c for bmv2/v1model on ffs.p4; returns the JSON path."""
    return compile_program(P4_DIR / "ffs.p4", workdir)


def run_bmv2_ffs(json_path: Path, t_us: np.ndarray, ingress: np.ndarray, length: np.ndarray, r_log_q8: np.ndarray,
                 f_log_q8: np.ndarray, u16: np.ndarray, workdir: Path,
                 timeout_s: float = 300.0) -> dict[str, np.ndarray]:
    """Replay an FFS packet sequence through ffs.p4: per packet the verdict, log2 gamma, log2 tau
    and the new labels (log2 bit/s), all as floats (Q8 / 256)."""
    frames = [_FFS_HDR.pack(b"\x02" * 6, b"\x04" * 6, FFS_ETYPE, int(t), int(i), int(n), int(r), int(f), int(u),
                            0, 0, 0)
              for t, i, n, r, f, u in zip(t_us, ingress, length, r_log_q8, f_log_q8, u16, strict=True)]
    got = replay(json_path, frames, FFS_ETYPE, workdir, timeout_s)
    cols = np.array([_FFS_HDR.unpack(fr[: _FFS_HDR.size])[6:] for fr in got], dtype=np.float64)
    return {"r_log": cols[:, 0] / 256, "f_log": cols[:, 1] / 256, "g_log": cols[:, 3] / 256,
            "tau_log": cols[:, 4] / 256, "verdict": cols[:, 5] == 1}
