"""The few libbpf calls scidmz needs, through ctypes (libbpf.so.1, Debian's ``libbpf1``).

Why libbpf through ctypes, rather than tc's own loader with pinned maps plus
the raw ``bpf()`` syscall (a choice, ours):

* one ``bpf_object`` holds all the programs and their maps, so the LAN-side
  and WAN-side programs share the queuing-delay and RTT tables without
  pinning anything in bpffs (nothing is left behind in /sys/fs/bpf);
* the configuration (class prefixes, RTT tap, the test clock) is read-only
  data set before the load (``bpf_map__set_initial_value``): the verifier
  sees it as constants and prunes what it switches off, which tc's loader
  cannot do;
* the post-queue transmit hook is a BTF tracepoint program, which tc cannot
  load at all, and the ring buffer of flow digests needs a consumer;
* the verifier's log comes back to us (``bpf_program__set_log_buf``), so a
  rejection is a clear one-line error, not tc's stderr;
* ``bpf_tc_hook_create`` / ``bpf_tc_attach`` / ``bpf_tc_detach`` make the same
  cls_bpf direct-action filters ``tc filter add ... bpf da`` makes, over
  netlink, and ``bpf_prog_test_run_opts`` is BPF_PROG_TEST_RUN;
* libbpf.so.1 is already on every Debian 12 router (iproute2 depends on it), and
  a ctypes binding needs no compiler at install time (the programs themselves
  are built with clang, ``build.py``).

Every call that fails raises ``LibbpfError`` with errno and the call's name;
``Libbpf.messages`` keeps libbpf's own log lines (the loader shows the
relevant one instead of printing them).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from typing import Any

__all__ = ["Libbpf", "LibbpfError", "TcHook", "TcOpts", "TestRunOpts", "get_libbpf",
           "BPF_TC_INGRESS", "BPF_TC_EGRESS"]

BPF_TC_INGRESS = 1
BPF_TC_EGRESS = 2
_LIBBPF_WARN, _LIBBPF_INFO, _LIBBPF_DEBUG = 0, 1, 2


class LibbpfError(OSError):
    """A libbpf call failed (``errno`` set)."""


class TcHook(ctypes.Structure):
    _fields_ = [("sz", ctypes.c_size_t), ("ifindex", ctypes.c_int), ("attach_point", ctypes.c_int),
                ("parent", ctypes.c_uint32)]


class TcOpts(ctypes.Structure):
    _fields_ = [("sz", ctypes.c_size_t), ("prog_fd", ctypes.c_int), ("flags", ctypes.c_uint32),
                ("prog_id", ctypes.c_uint32), ("handle", ctypes.c_uint32), ("priority", ctypes.c_uint32)]


class TestRunOpts(ctypes.Structure):
    _fields_ = [("sz", ctypes.c_size_t), ("data_in", ctypes.c_void_p), ("data_out", ctypes.c_void_p),
                ("data_size_in", ctypes.c_uint32), ("data_size_out", ctypes.c_uint32),
                ("ctx_in", ctypes.c_void_p), ("ctx_out", ctypes.c_void_p),
                ("ctx_size_in", ctypes.c_uint32), ("ctx_size_out", ctypes.c_uint32),
                ("retval", ctypes.c_uint32), ("repeat", ctypes.c_int), ("duration", ctypes.c_uint32),
                ("flags", ctypes.c_uint32), ("cpu", ctypes.c_uint32), ("batch_size", ctypes.c_uint32)]


class BatchOpts(ctypes.Structure):
    _fields_ = [("sz", ctypes.c_size_t), ("elem_flags", ctypes.c_uint64), ("flags", ctypes.c_uint64)]


_PRINT_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
SAMPLE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)

_P, _I, _U32, _SZ = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_size_t
# name: (restype, argtypes); restype _P for pointers (None = NULL), _I for int results (< 0 = -errno).
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "libbpf_set_print": (_P, [_PRINT_FN]),
    "bpf_object__open_file": (_P, [ctypes.c_char_p, _P]),
    "bpf_object__load": (_I, [_P]),
    "bpf_object__close": (None, [_P]),
    "bpf_object__find_program_by_name": (_P, [_P, ctypes.c_char_p]),
    "bpf_object__find_map_by_name": (_P, [_P, ctypes.c_char_p]),
    "bpf_object__next_map": (_P, [_P, _P]),
    "bpf_map__name": (ctypes.c_char_p, [_P]),
    "bpf_map__fd": (_I, [_P]),
    "bpf_map__value_size": (_U32, [_P]),
    "bpf_map__max_entries": (_U32, [_P]),
    "bpf_map__set_initial_value": (_I, [_P, _P, _SZ]),
    "bpf_program__fd": (_I, [_P]),
    "bpf_program__set_autoload": (_I, [_P, ctypes.c_bool]),
    "bpf_program__set_log_buf": (_I, [_P, _P, _SZ]),
    "bpf_program__set_log_level": (_I, [_P, _U32]),
    "bpf_program__attach": (_P, [_P]),
    "bpf_link__destroy": (_I, [_P]),
    "bpf_tc_hook_create": (_I, [ctypes.POINTER(TcHook)]),
    "bpf_tc_hook_destroy": (_I, [ctypes.POINTER(TcHook)]),
    "bpf_tc_attach": (_I, [ctypes.POINTER(TcHook), ctypes.POINTER(TcOpts)]),
    "bpf_tc_detach": (_I, [ctypes.POINTER(TcHook), ctypes.POINTER(TcOpts)]),
    "bpf_tc_query": (_I, [ctypes.POINTER(TcHook), ctypes.POINTER(TcOpts)]),
    "bpf_prog_test_run_opts": (_I, [_I, ctypes.POINTER(TestRunOpts)]),
    "bpf_map_lookup_elem": (_I, [_I, _P, _P]),
    "bpf_map_update_elem": (_I, [_I, _P, _P, ctypes.c_uint64]),
    "bpf_map_lookup_batch": (_I, [_I, _P, _P, _P, _P, ctypes.POINTER(_U32), ctypes.POINTER(BatchOpts)]),
    "bpf_obj_get_info_by_fd": (_I, [_I, _P, ctypes.POINTER(_U32)]),
    "bpf_prog_get_fd_by_id": (_I, [_U32]),
    "bpf_enable_stats": (_I, [_I]),
    "ring_buffer__new": (_P, [_I, SAMPLE_FN, _P, _P]),
    "ring_buffer__consume": (_I, [_P]),
    "ring_buffer__free": (None, [_P]),
}


class Libbpf:
    """libbpf.so.1 with argument types set, libbpf's log captured in ``messages``."""

    def __init__(self, path: str | None = None) -> None:
        name = path or ctypes.util.find_library("bpf") or "libbpf.so.1"
        try:
            self.lib = ctypes.CDLL(name, use_errno=True)
        except OSError:
            raise LibbpfError(errno.ENOENT, "libbpf.so.1 not found (install Debian's libbpf1 / libbpf-dev)") from None
        for fn, (res, args) in _SIGNATURES.items():
            f = getattr(self.lib, fn)
            f.restype, f.argtypes = res, args
        libc = ctypes.CDLL(None)
        self._vsnprintf = libc.vsnprintf
        self._vsnprintf.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_void_p]
        self.messages: list[str] = []
        self._print_cb = _PRINT_FN(self._on_print)  # kept alive: libbpf holds the pointer
        self.lib.libbpf_set_print(self._print_cb)

    def _on_print(self, level: int, fmt: bytes, va: int) -> int:
        # On x86-64 a va_list is passed as a pointer, which vsnprintf takes as is.
        buf = ctypes.create_string_buffer(1024)
        self._vsnprintf(buf, len(buf), fmt, va)
        if level <= _LIBBPF_INFO:
            self.messages.append(buf.value.decode(errors="replace").rstrip())
            del self.messages[:-200]
        return 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.lib, name)

    def check(self, ret: int, what: str) -> int:
        """Raise ``LibbpfError`` for a negative return (libbpf returns -errno) ; else return it."""
        if ret < 0:
            err = -ret if ret != -1 else (ctypes.get_errno() or errno.EINVAL)
            raise LibbpfError(err, f"{what}: {os.strerror(err)}")
        return ret

    def ptr(self, p: int | None, what: str) -> int:
        """Raise for a NULL pointer result (errno set by libbpf)."""
        if not p:
            err = ctypes.get_errno() or errno.EINVAL
            raise LibbpfError(err, f"{what}: {os.strerror(err)}")
        return p


_LIB: Libbpf | None = None


def get_libbpf() -> Libbpf:
    """The process-wide binding (libbpf's print callback is global)."""
    global _LIB
    if _LIB is None:
        _LIB = Libbpf()
    return _LIB
