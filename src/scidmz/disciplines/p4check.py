"""Run a discipline's P4 program on BMv2 against its numba core: the shared part.

A discipline's ``p4check.py`` (``scidmz.disciplines.<name>.p4check``) packs its
packet sequence into its own cross-check header (one ethertype per
discipline) and reads the switch's decisions back from it; this module
compiles its ``p4/<name>.p4`` with p4c for bmv2/v1model and replays the frames
through ``simple_switch --use-files`` (pcap in, pcap out).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import time
from pathlib import Path


def toolchain_bin() -> Path:
    return Path(os.environ.get("SCIDMZ_P4TC_BIN", Path.home() / ".cache/scidmz/p4tc/bin"))


def compile_program(source: Path, workdir: Path) -> Path:
    """p4c for bmv2/v1model on ``source`` (a discipline's ``p4/<name>.p4``); the JSON path (raises with p4c's message)."""
    p4c = toolchain_bin() / "p4c"
    out = subprocess.run([str(p4c), "--target", "bmv2", "--arch", "v1model", "-o", str(workdir), str(source)],
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"p4c failed: {out.stderr.strip().splitlines()[0] if out.stderr.strip() else out.returncode}")
    return workdir / f"{source.stem}.json"


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


def replay(json_path: Path, frames: list[bytes], etype: int, workdir: Path, timeout_s: float) -> list[bytes]:
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


def available() -> bool:
    b = toolchain_bin()
    return (b / "p4c").exists() and (b / "simple_switch").exists() and shutil.which("true") is not None
