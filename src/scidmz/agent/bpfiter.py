"""The agent's second mechanism, ``--mechanism bpf``: a BPF TCP iterator that discovers and paces.

``pace_iter.bpf.c`` (an ``iter/tcp`` program) walks every TCP socket once per
run. For each established one it writes a record (inode, family, addresses,
ports, ``sk_max_pacing_rate``, ``bytes_acked`` and the delivery-rate sample's
fields) to the iterator's output, and, when the socket's inode is in the
``rates`` map with a value other than its current one, calls
``bpf_setsockopt(SO_MAX_PACING_RATE)`` on it. So one walk replaces both the
sock_diag dump (which walks the kernel's established hash table once per
address family) and the pidfd path: ``dump()`` runs the walk; ``set()`` only
writes the map; ``flush()`` runs one more walk if anything was written since,
so a changed cap is applied within the same period.

What it needs (checked at start, one line naming the missing right): CAP_BPF
and CAP_PERFMON (loading a tracing program that follows kernel pointers), no
ptrace right over the transfer tools and no ``/proc/PID/fd`` scan (unless
``--process`` asks for process names). The program is built with clang at
first use into ``cache_dir`` (keyed by the source's hash) and loaded with
libbpf through ``telemetry.ebpf.libbpf``. Limits (ours, stated): the kernel's
``bpf_setsockopt`` takes an int-sized rate here, so a per-connection cap at or
above 2^32 bytes/s (34 Gbit/s) is set as "no maximum".
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import socket
import struct
import subprocess
import sysconfig
from pathlib import Path
from typing import Any

from .diag import UNLIMITED, TcpSocket
from .mechanism import RightsError, has_capability
from .owners import Owner

__all__ = ["BpfIterMechanism", "SOURCE", "RECORD"]

SOURCE = Path(__file__).with_name("pace_iter.bpf.c")
#: ``struct record`` of pace_iter.bpf.c.
RECORD = struct.Struct("=QQQIIIHHHH16s16s4x")  # 80 bytes: the C struct is padded to its u64 alignment
CAP_PERFMON, CAP_BPF = 38, 39
_INT_MAX_RATE = 0xFFFFFFFF


def _build(cache_dir: Path) -> Path:
    cc = shutil.which(os.environ.get("SCIDMZ_CLANG") or "clang")
    if not cc:
        raise RightsError("the bpf mechanism is built at first use and needs clang (apt-get install clang "
                          "libbpf-dev), or use --mechanism pidfd")
    src = SOURCE.read_bytes()
    out = cache_dir / f"pace_iter-{hashlib.sha256(src).hexdigest()[:16]}.o"
    if out.exists():
        return out
    cache_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    arch = sysconfig.get_config_var("MULTIARCH") or ""
    inc = [f"-I/usr/include/{arch}"] if arch else []
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    r = subprocess.run([cc, "-O2", "-g", "-target", "bpf", *inc, "-c", str(SOURCE), "-o", str(tmp)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        line = (r.stderr.strip().splitlines() or ["clang failed"])[0]
        raise RuntimeError(f"cannot build the agent's BPF program: {line}")
    os.replace(tmp, out)
    return out


def _parse(raw: bytes) -> list[TcpSocket]:
    out = []
    for off in range(0, len(raw) - RECORD.size + 1, RECORD.size):
        (ino, maxrate, acked, delivered, interval, mss, fam, lport, rport, _pad, laddr,
         raddr) = RECORD.unpack_from(raw, off)
        n = 4 if fam == socket.AF_INET else 16
        out.append(TcpSocket(
            inode=ino, family=fam, local=socket.inet_ntop(fam, laddr[:n]), lport=lport,
            peer=socket.inet_ntop(fam, raddr[:n]), rport=socket.ntohs(rport),
            max_pacing_rate=UNLIMITED if maxrate >= UNLIMITED else maxrate, bytes_acked=acked,
            # tcp_compute_delivery_rate: delivered segments x MSS over the sample's interval
            delivery_rate=(delivered * mss * 1_000_000 // interval) if interval else 0,
            app_limited=False, min_rtt=0.0))
    return out


class BpfIterMechanism:
    """Discover, measure and pace with one BPF TCP iterator walk (module docstring)."""

    name = "bpf"
    needs_owner = False

    def __init__(self, cache_dir: str | os.PathLike[str]) -> None:
        from ..telemetry.ebpf.libbpf import get_libbpf

        self._lib = get_libbpf()
        L = self._L = self._lib.lib
        L.bpf_link__fd.restype, L.bpf_link__fd.argtypes = ctypes.c_int, [ctypes.c_void_p]
        L.bpf_iter_create.restype, L.bpf_iter_create.argtypes = ctypes.c_int, [ctypes.c_int]
        L.bpf_map_delete_elem.restype, L.bpf_map_delete_elem.argtypes = ctypes.c_int, [ctypes.c_int, ctypes.c_void_p]
        path = _build(Path(cache_dir))
        self._obj = self._lib.ptr(L.bpf_object__open_file(str(path).encode(), None), "open the agent's BPF object")
        self._link = None
        try:
            if L.bpf_object__load(self._obj) != 0:
                msg = next((m for m in reversed(self._lib.messages) if m), "the verifier refused it")
                raise RuntimeError(f"cannot load the agent's BPF program: {msg}")
            prog = L.bpf_object__find_program_by_name(self._obj, b"pace")
            self._link = self._lib.ptr(L.bpf_program__attach(prog), "attach the agent's TCP iterator")
            self._link_fd = L.bpf_link__fd(self._link)
            self._rates = L.bpf_map__fd(L.bpf_object__find_map_by_name(self._obj, b"rates"))
        except BaseException:
            self.close()
            raise
        self._dirty = False
        self._mapped: set[int] = set()

    @staticmethod
    def check_rights() -> None:
        for bit, name in ((CAP_BPF, "CAP_BPF"), (CAP_PERFMON, "CAP_PERFMON")):
            if not has_capability(bit):
                raise RightsError(f"scidmz agent (bpf mechanism) needs {name} to load its TCP iterator: run it "
                                  "as root or grant CAP_BPF and CAP_PERFMON (or use --mechanism pidfd)")

    def _walk(self) -> bytes:
        fd = self._lib.check(self._L.bpf_iter_create(self._link_fd), "run the agent's TCP iterator")
        chunks = []
        try:
            while True:
                b = os.read(fd, 1 << 16)
                if not b:
                    break
                chunks.append(b)
        finally:
            os.close(fd)
        return b"".join(chunks)

    def dump(self) -> list[TcpSocket]:
        """Every established TCP socket (and any cap written since the last walk applied)."""
        socks = _parse(self._walk())
        self._dirty = False
        gone = self._mapped.difference(s.inode for s in socks)
        for ino in gone:  # closed sockets: their entries go (the kernel reuses no inode soon, but the map is finite)
            self._L.bpf_map_delete_elem(self._rates, ctypes.byref(ctypes.c_uint64(ino)))
        self._mapped -= gone
        return socks

    def set(self, owner: Owner, inode: int, value: int) -> bool:
        """Write the cap for socket ``inode`` (applied by the next walk: ``flush`` or ``dump``)."""
        v = UNLIMITED if value >= _INT_MAX_RATE else int(value)
        self._lib.check(self._L.bpf_map_update_elem(self._rates, ctypes.byref(ctypes.c_uint64(inode)),
                                                    ctypes.byref(ctypes.c_uint64(v)), 0), "write a pacing rate")
        self._mapped.add(inode)
        self._dirty = True
        return True

    def flush(self) -> None:
        """Apply the caps written since the last walk, now."""
        if self._dirty:
            self._walk()
            self._dirty = False

    def forget(self, live: Any) -> None:
        """(The pidfd mechanism's descriptor cache; nothing to do here.)"""

    def close(self) -> None:
        if self._link is not None:
            self._L.bpf_link__destroy(self._link)
            self._link = None
        if self._obj:
            self._L.bpf_object__close(self._obj)
            self._obj = None
