"""Run ``disciplines_p4/abc.p4`` on BMv2 and compare its decisions with the numba core.

The packet sequence is replayed through ``simple_switch --use-files`` (pcap
in, pcap out); each packet carries its arrival time, aggregate, length and the
queue it found in the cross-check header (ethertype 0x88B5), so the switch and
:func:`scidmz.disciplines.abc.abc_run` see exactly the same inputs. The
switch's fixed-point activity (Q8) and verdict come back in the same header.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[3]
P4_DIR = REPO / "disciplines_p4"
ETYPE = 0x88B5
_HDR = struct.Struct("!6s6sHIBHHiB")


def toolchain_bin() -> Path:
    return Path(os.environ.get("SCIDMZ_P4TC_BIN", Path.home() / ".cache/scidmz/p4tc/bin"))


def compile_program(name: str, workdir: Path) -> Path:
    """p4c for bmv2/v1model on ``disciplines_p4/<name>.p4``; the JSON path (raises with p4c's message)."""
    p4c = toolchain_bin() / "p4c"
    out = subprocess.run([str(p4c), "--target", "bmv2", "--arch", "v1model", "-o", str(workdir),
                          str(P4_DIR / f"{name}.p4")], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"p4c failed: {out.stderr.strip().splitlines()[0] if out.stderr.strip() else out.returncode}")
    return workdir / f"{name}.json"


def compile_abc(workdir: Path) -> Path:
    """p4c for bmv2/v1model on abc.p4; returns the JSON path."""
    return compile_program("abc", workdir)


def compile_ffs(workdir: Path) -> Path:
    """p4c for bmv2/v1model on ffs.p4; returns the JSON path."""
    return compile_program("ffs", workdir)


FFS_ETYPE = 0x88B6
_FFS_HDR = struct.Struct("!6s6sHIBHiiHiiB")


def run_bmv2_ffs(json_path: Path, t_us: np.ndarray, ingress: np.ndarray, length: np.ndarray, r_log_q8: np.ndarray,
                 f_log_q8: np.ndarray, u16: np.ndarray, workdir: Path,
                 timeout_s: float = 300.0) -> dict[str, np.ndarray]:
    """Replay an FFS packet sequence through ffs.p4: per packet the verdict, log2 gamma, log2 tau
    and the new labels (log2 bit/s), all as floats (Q8 / 256)."""
    frames = [_FFS_HDR.pack(b"\x02" * 6, b"\x04" * 6, FFS_ETYPE, int(t), int(i), int(n), int(r), int(f), int(u),
                            0, 0, 0)
              for t, i, n, r, f, u in zip(t_us, ingress, length, r_log_q8, f_log_q8, u16, strict=True)]
    got = _replay(json_path, frames, FFS_ETYPE, workdir, timeout_s)
    cols = np.array([_FFS_HDR.unpack(fr[: _FFS_HDR.size])[6:] for fr in got], dtype=np.float64)
    return {"r_log": cols[:, 0] / 256, "f_log": cols[:, 1] / 256, "g_log": cols[:, 3] / 256,
            "tau_log": cols[:, 4] / 256, "verdict": cols[:, 5] == 1}


#: Pcap spacing of the replayed frames (us). BMv2 replays a pcap at its timestamps; 1 us apart
#: overflowed its 64-packet ingress->egress queue under CPU load (13 of 6511 frames lost in one CI
#: run). The decision uses the header's own clock (t_us), so the spacing changes no result.
_PCAP_SPACING_US = 100


def _write_pcap(path: Path, frames: list[bytes]) -> None:
    with open(path, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for k, fr in enumerate(frames):
            us = k * _PCAP_SPACING_US
            fh.write(struct.pack("<IIII", us // 1_000_000, us % 1_000_000, len(fr), len(fr)))
            fh.write(fr)


def _read_pcap(path: Path) -> list[bytes]:
    data = path.read_bytes() if path.exists() else b""
    frames, off = [], 24
    while off + 16 <= len(data):
        incl = struct.unpack_from("<I", data, off + 8)[0]
        if off + 16 + incl > len(data):
            break
        frames.append(data[off + 16: off + 16 + incl])
        off += 16 + incl
    return frames


def _replay(json_path: Path, frames: list[bytes], etype: int, workdir: Path, timeout_s: float) -> list[bytes]:
    """Send ``frames`` through simple_switch (pcap in on port 0, out on port 1); the frames of ``etype`` back."""
    tag = etype.to_bytes(2, "big")
    # Trailing plain frames push the last real ones through BMv2's buffered pcap writer.
    pad = [b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + b"\0" * 46] * 256
    _write_pcap(workdir / "p0_in.pcap", frames + pad)
    _write_pcap(workdir / "p1_in.pcap", [])
    sw = subprocess.Popen([str(toolchain_bin() / "simple_switch"), "--use-files", "0", "-i", f"0@{workdir}/p0",
                           "-i", f"1@{workdir}/p1", "--thrift-port", str(20000 + os.getpid() % 20000), str(json_path)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=workdir)
    try:
        deadline = time.monotonic() + timeout_s
        last, last_change = -1, time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.5)
            got = [g for g in _read_pcap(workdir / "p1_out.pcap") if g[12:14] == tag]
            if len(got) >= len(frames) or sw.poll() is not None:
                break
            if len(got) != last:
                last, last_change = len(got), time.monotonic()
            elif time.monotonic() - last_change > 20.0:
                break  # no progress for 20 s: report what came back
    finally:
        sw.terminate()
        try:
            sw.wait(10)
        except subprocess.TimeoutExpired:
            sw.kill()
            sw.wait()
    got = [g for g in _read_pcap(workdir / "p1_out.pcap") if g[12:14] == tag]
    if len(got) != len(frames):
        err = sw.stderr.read().strip().splitlines() if sw.stderr else []
        raise RuntimeError(f"BMv2 returned {len(got)} of {len(frames)} packets{': ' + err[-1] if err else ''}")
    return got


def run_bmv2(json_path: Path, t_us: np.ndarray, agg: np.ndarray, length: np.ndarray, q: np.ndarray,
             workdir: Path, timeout_s: float = 300.0) -> tuple[np.ndarray, np.ndarray]:
    """Replay the sequence through simple_switch; returns (activity Q8 as float, verdict bool) per packet."""
    frames = [_HDR.pack(b"\x02" * 6, b"\x04" * 6, ETYPE, int(t), int(a), int(n), int(qq), 0, 0)
              for t, a, n, qq in zip(t_us, agg, length, q, strict=True)]
    got = _replay(json_path, frames, ETYPE, workdir, timeout_s)
    act = np.empty(len(got))
    ver = np.empty(len(got), np.bool_)
    for k, fr in enumerate(got):
        f = _HDR.unpack(fr[: _HDR.size])
        act[k] = f[7] / 256.0
        ver[k] = f[8] == 1
    return act, ver


def available() -> bool:
    b = toolchain_bin()
    return (b / "p4c").exists() and (b / "simple_switch").exists() and shutil.which("true") is not None
