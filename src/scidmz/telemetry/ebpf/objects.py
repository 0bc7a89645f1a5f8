"""The loaded eBPF object: configuration, verifier errors, map reads, BPF_PROG_TEST_RUN.

``EbpfObject`` opens the built object (``build.py``), writes the
configuration into its frozen ``.rodata.cfg`` (class prefixes longest first,
the RTT tap, the WAN interface for the transmit hook, the test clock), loads
the programs it is asked for and gives the maps to the reader:

* ``counters()``: the per-CPU counter block summed over CPUs (one syscall);
* ``table(name)``: a NumPy view of an mmap'd table (``af_table``,
  ``rtt_table``, ``qd_table``; no syscall per read);
* ``array(name)``: any array map copied out with one batch lookup;
* ``drain_events()``: the flow digests waiting in the ring buffer;
* ``test_run(program, frame, ts_ns)``: BPF_PROG_TEST_RUN of a tc program on one
  frame with ``skb->tstamp`` = ``ts_ns`` (the programs' clock when loaded
  with ``clock_skb=True``), returning the kernel's measured run time.

Failures are one line: ``EbpfUnavailable`` (a ``RuntimeError``: exit 1) for
what this kernel or this user cannot do (no permission, no BTF for the
transmit hook, the verifier rejecting a program, with its last log line).
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
from pathlib import Path
from typing import Any

import numpy as np

from .. import constants as C
from ..view import lpm_entry, mapped, parse_prefixes
from .layout import AF_SLOT, CELL, CFG_HEAD, COUNTER_NAMES, FLOW_EVENT, PREFIX, dtype
from .libbpf import SAMPLE_FN, BatchOpts, LibbpfError, TestRunOpts, get_libbpf

__all__ = ["EbpfObject", "EbpfUnavailable", "PROGRAMS", "cfg_bytes", "class_entries", "ncpus"]

PROGRAMS: tuple[str, ...] = ("scidmz_lan_in", "scidmz_wan_in", "scidmz_wan_out", "scidmz_wan_xmit")
_TABLE_DTYPES = {"af_table": dtype(AF_SLOT, 32), "rtt_table": dtype(CELL), "qd_table": dtype(CELL)}
EVENT_DTYPE = dtype(FLOW_EVENT)
_SKB_TSTAMP_OFF = 152  # offsetof(struct __sk_buff, tstamp): UAPI, append-only
_SKB_CTX_SIZE = 192  # sizeof(struct __sk_buff) in kernels >= 5.16 (older take a shorter one)
_PERM_HINT = "run as root (or with CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON)"


class EbpfUnavailable(RuntimeError):
    """This kernel, user or program cannot do it (one line; the CLI answers exit 1)."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


def ncpus() -> int:
    """Possible CPUs (the per-CPU maps' width), from /sys/devices/system/cpu/possible."""
    text = Path("/sys/devices/system/cpu/possible").read_text().strip()
    n = 0
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        n = max(n, int(hi or lo) + 1)
    return n


def class_entries(dtn_prefixes: list[str] | str | None, remote_prefixes: list[str] | str | None,
                  ) -> list[tuple[int, int, int, int, int]]:
    """class_lpm as (net hi, net lo, mask hi, mask lo, class) on the 128-bit address (IPv4 as
    ::ffff:a/(96 + n), ``view.lpm_entry``), longest prefix first: the twin's order and rule."""
    nets = [(n, C.CLASS_DTN) for n in parse_prefixes(dtn_prefixes)]
    nets += [(n, C.CLASS_CAMPUS) for n in parse_prefixes(remote_prefixes)]
    if not nets:
        raise ValueError("class_lpm needs at least one prefix (--dtn-prefix / --remote-prefix)")
    if len(nets) > C.CLASS_LPM_SIZE:
        raise ValueError(f"class_lpm holds {C.CLASS_LPM_SIZE} entries, got {len(nets)}")
    nets.sort(key=lambda e: -mapped(e[0])[1])
    return [(*lpm_entry(n), c) for n, c in nets]


def cfg_bytes(entries: list[tuple[int, int, int, int, int]], rtt_tap: int, clock_skb: bool, wan_ifindex: int,
              wan_netns: int) -> bytes:
    """The ``struct scidmz_cfg`` image (layout.CFG_HEAD + CLASS_LPM_SIZE prefixes)."""
    head = np.zeros(1, dtype(CFG_HEAD))
    head["n_prefix"], head["rtt_tap"], head["clock_skb"] = len(entries), rtt_tap, int(clock_skb)
    head["wan_ifindex"], head["wan_netns"] = wan_ifindex, wan_netns
    pre = np.zeros(C.CLASS_LPM_SIZE, dtype(PREFIX))
    for i, (net_hi, net_lo, mask_hi, mask_lo, cls) in enumerate(entries):
        pre[i] = (net_hi, net_lo, mask_hi, mask_lo, cls, 0)
    return head.tobytes() + pre.tobytes()


class EbpfObject:
    """One loaded copy of ``scidmz_telemetry.bpf.o`` (see module docstring). Close it (or use ``with``)."""

    def __init__(self, path: str | os.PathLike[str], cfg: bytes, programs: tuple[str, ...]) -> None:
        unknown = set(programs) - set(PROGRAMS)
        if unknown:
            raise ValueError(f"unknown eBPF program(s): {', '.join(sorted(unknown))}")
        self.lib = get_libbpf()
        self._obj: int | None = None
        self._maps: dict[str, int] = {}
        self._mmaps: list[mmap.mmap] = []
        self._tables: dict[str, np.ndarray] = {}
        self._rb: int | None = None
        self._events: list[bytes] = []
        self._ncpu = ncpus()
        self._logs: dict[str, Any] = {}
        self.programs = tuple(programs)
        lib = self.lib
        self._obj = lib.ptr(lib.bpf_object__open_file(str(path).encode(), None), f"opening {path}")
        try:
            self._configure(cfg)
            self._load()
            self._open_ringbuf()
        except BaseException:
            self.close()
            raise

    # -- loading -------------------------------------------------------------------------------
    def _configure(self, cfg: bytes) -> None:
        lib = self.lib
        m = lib.bpf_object__next_map(self._obj, None)
        while m:
            name = lib.bpf_map__name(m).decode()
            self._maps[name] = m
            m = lib.bpf_object__next_map(self._obj, m)
        rod = next((p for n, p in self._maps.items() if n.endswith("rodata.cfg")), None)
        if rod is None:
            raise EbpfUnavailable("the eBPF object has no .rodata.cfg section (stale build?)")
        self._cfg = ctypes.create_string_buffer(cfg, len(cfg))
        lib.check(lib.bpf_map__set_initial_value(rod, self._cfg, len(cfg)), "setting the configuration")
        for name in PROGRAMS:
            prog = lib.ptr(lib.bpf_object__find_program_by_name(self._obj, name.encode()), f"program {name}")
            lib.check(lib.bpf_program__set_autoload(prog, name in self.programs), f"autoload {name}")
            if name in self.programs:
                buf = ctypes.create_string_buffer(1 << 20)
                self._logs[name] = buf
                lib.check(lib.bpf_program__set_log_buf(prog, buf, len(buf)), f"log buffer for {name}")

    def _load(self) -> None:
        lib = self.lib
        lib.messages.clear()
        ret = lib.bpf_object__load(self._obj)
        if ret >= 0:
            self._logs.clear()
            return
        err = -ret
        msgs = "\n".join(lib.messages)
        bad = next((n for n in self.programs if self._logs[n].value), None)
        if "vmlinux BTF" in msgs or "kernel BTF" in msgs or ("scidmz_wan_xmit" in self.programs
                                                             and not Path("/sys/kernel/btf/vmlinux").exists()):
            raise EbpfUnavailable("this kernel has no BTF (/sys/kernel/btf/vmlinux): the post-queue transmit "
                                  "hook needs it; use egress_hook='tc' (before WAN_IF's qdisc)", msgs)
        if bad is not None:
            log = self._logs[bad].value.decode(errors="replace")
            if "for !root" in log:  # what the verifier allows only to CAP_PERFMON (measured: reports/ebpf)
                raise EbpfUnavailable(f"no permission to load BPF programs: CAP_PERFMON is missing ({_PERM_HINT})",
                                      log)
            raise EbpfUnavailable(f"the kernel's verifier rejected {bad}: {_verifier_reason(log)}", log)
        if err in (errno.EPERM, errno.EACCES):
            raise EbpfUnavailable(f"no permission to load BPF programs: {_PERM_HINT}", msgs)
        last = next((m for m in reversed(lib.messages) if m), os.strerror(err))
        raise EbpfUnavailable(f"loading the eBPF programs failed: {last}", msgs)

    def _open_ringbuf(self) -> None:
        def on_event(_ctx: int, data: int, size: int) -> int:
            self._events.append(ctypes.string_at(data, size))
            return 0

        self._sample_cb = SAMPLE_FN(on_event)  # kept alive while the ring buffer exists
        self._rb = self.lib.ptr(self.lib.ring_buffer__new(self.map_fd("flow_events"), self._sample_cb, None, None),
                                "opening the flow-event ring buffer")

    # -- handles -------------------------------------------------------------------------------
    def prog_fd(self, name: str) -> int:
        lib = self.lib
        prog = lib.ptr(lib.bpf_object__find_program_by_name(self._obj, name.encode()), f"program {name}")
        return lib.check(lib.bpf_program__fd(prog), f"fd of {name}")

    def prog_ptr(self, name: str) -> int:
        return self.lib.ptr(self.lib.bpf_object__find_program_by_name(self._obj, name.encode()), f"program {name}")

    def _prog_info(self, name: str) -> bytes:
        info = (ctypes.c_uint8 * 256)()
        n = ctypes.c_uint32(256)
        self.lib.check(self.lib.bpf_obj_get_info_by_fd(self.prog_fd(name), info, ctypes.byref(n)), "program info")
        return bytes(info)

    def prog_id(self, name: str) -> int:
        return int.from_bytes(self._prog_info(name)[4:8], "little")  # struct bpf_prog_info: type, id, ...

    def prog_stats(self, name: str) -> tuple[int, int]:
        """(run_time_ns, run_cnt) of a program: counted while BPF_ENABLE_STATS is on (``enable_stats``)."""
        info = self._prog_info(name)
        return int.from_bytes(info[192:200], "little"), int.from_bytes(info[200:208], "little")

    def prog_misses(self, name: str) -> int:
        """How often the kernel skipped the program because it was already running on that CPU
        (``recursion_misses``: tracing programs only; counted whether or not stats are on)."""
        return int.from_bytes(self._prog_info(name)[208:216], "little")

    def enable_stats(self) -> int:
        """Turn the kernel's per-program run-time statistics on until the returned fd is closed."""
        return self.lib.check(self.lib.bpf_enable_stats(0), "BPF_ENABLE_STATS")  # BPF_STATS_RUN_TIME

    def map_fd(self, name: str) -> int:
        if name not in self._maps:
            raise KeyError(f"no map {name!r} in the eBPF object")
        return self.lib.check(self.lib.bpf_map__fd(self._maps[name]), f"fd of map {name}")

    # -- reads ---------------------------------------------------------------------------------
    def counters(self) -> np.ndarray:
        """The counter block summed over CPUs: uint64, ``layout.COUNTER_NAMES`` order."""
        n = len(COUNTER_NAMES)
        buf = np.zeros((self._ncpu, n), dtype=np.uint64)
        key = ctypes.c_uint32(0)
        self.lib.check(self.lib.bpf_map_lookup_elem(self.map_fd("counters"), ctypes.byref(key),
                                                    buf.ctypes.data), "reading the counters")
        return buf.sum(axis=0, dtype=np.uint64)

    def table(self, name: str) -> np.ndarray:
        """A read-only NumPy view of an mmap'd table (``af_table``, ``rtt_table``, ``qd_table``)."""
        if name not in self._tables:
            dt = _TABLE_DTYPES[name]
            entries = int(self.lib.bpf_map__max_entries(self._maps[name]))
            size = -(-entries * dt.itemsize // mmap.PAGESIZE) * mmap.PAGESIZE
            mm = mmap.mmap(self.map_fd(name), size, mmap.MAP_SHARED, mmap.PROT_READ)
            self._mmaps.append(mm)
            self._tables[name] = np.frombuffer(mm, dtype=dt, count=entries)
        return self._tables[name]

    def array(self, name: str, value_dtype: Any = np.uint32) -> np.ndarray:
        """A whole array map, copied with one batch lookup."""
        m = self._maps[name]
        n = int(self.lib.bpf_map__max_entries(m))
        keys = np.zeros(n, np.uint32)
        vals = np.zeros(n, dtype=value_dtype)
        count = ctypes.c_uint32(n)
        out_batch = ctypes.c_uint32(0)
        opts = BatchOpts(sz=ctypes.sizeof(BatchOpts))
        ret = self.lib.bpf_map_lookup_batch(self.map_fd(name), None, ctypes.byref(out_batch), keys.ctypes.data,
                                            vals.ctypes.data, ctypes.byref(count), ctypes.byref(opts))
        if ret < 0 and -ret != errno.ENOENT:  # ENOENT: the whole map fitted in this one batch
            self.lib.check(ret, f"reading map {name}")
        if count.value != n:
            raise EbpfUnavailable(f"reading map {name}: got {count.value} of {n} entries")
        return vals

    def drain_events(self) -> np.ndarray:
        """Flow digests since the last call (``DIGEST_FLOW_DTYPE``), oldest first."""
        if self._rb is not None:
            self.lib.check(self.lib.ring_buffer__consume(self._rb), "reading the flow events")
        raw, self._events = b"".join(self._events), []
        ev = np.frombuffer(raw, dtype=EVENT_DTYPE)
        out = np.zeros(ev.size, dtype=C.DIGEST_FLOW_DTYPE)
        for name, _ in C.DIGEST_FLOW_DTYPE:
            out[name] = ev[name]
        return out

    # -- BPF_PROG_TEST_RUN -----------------------------------------------------------------------
    def test_run(self, program: str, frame: bytes, ts_ns: int = 0, repeat: int = 1) -> tuple[int, int]:
        """Run a tc program on ``frame`` (``skb->tstamp = ts_ns``): (return value, ns per run)."""
        data = ctypes.create_string_buffer(frame, len(frame))
        ctx = (ctypes.c_uint8 * _SKB_CTX_SIZE)()
        ctypes.memmove(ctypes.addressof(ctx) + _SKB_TSTAMP_OFF, ctypes.byref(ctypes.c_uint64(ts_ns)), 8)
        opts = TestRunOpts(sz=ctypes.sizeof(TestRunOpts), data_in=ctypes.addressof(data), data_size_in=len(frame),
                           ctx_in=ctypes.addressof(ctx), ctx_size_in=_SKB_CTX_SIZE, repeat=repeat)
        self.lib.check(self.lib.bpf_prog_test_run_opts(self.prog_fd(program), ctypes.byref(opts)),
                       f"BPF_PROG_TEST_RUN of {program}")
        return int(ctypes.c_int32(opts.retval).value), int(opts.duration)

    # -- teardown --------------------------------------------------------------------------------
    def close(self) -> None:
        """Free the ring buffer, unmap the tables and close the object (its programs and maps go
        when nothing else holds them: an attached tc filter does)."""
        self._tables.clear()
        for mm in self._mmaps:
            try:
                mm.close()
            except BufferError:  # a caller still holds a view: the mapping goes with it
                pass
        self._mmaps.clear()
        if self._rb is not None:
            self.lib.ring_buffer__free(self._rb)
            self._rb = None
        if self._obj is not None:
            self.lib.bpf_object__close(self._obj)
            self._obj = None

    def __enter__(self) -> EbpfObject:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _verifier_reason(log: str) -> str:
    """The verifier's own complaint: the last log line that is not a statistics line."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    skip = ("processed ", "verification time", "stack depth", "-- END PROG LOAD LOG --", "mark_precise")
    for ln in reversed(lines):
        if not ln.startswith(skip):
            return ln[:200]
    return "no log"


def load_error_hint(exc: LibbpfError) -> str:
    """One line for a failed attach/run: permissions named, the rest as libbpf said."""
    if exc.errno in (errno.EPERM, errno.EACCES):
        return f"{exc.strerror}: {_PERM_HINT}"
    return str(exc.strerror or exc)
