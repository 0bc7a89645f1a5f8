"""The TNA telemetry program on a Tofino switch, over BF Runtime (the papers' hardware).

``BfrtView`` implements ``view.DataPlaneView`` with the Tofino SDE's gRPC
client, ``bfrt_grpc.client`` (shipped only with Intel's P4 Studio / the
open-p4studio SDE, never on PyPI). Without the SDE it raises a one-line
``ImportError`` and does nothing else: there is no fallback that pretends to
read a switch.

What it does with the SDE (program ``scidmz_telemetry`` built by bf-p4c from
``telemetry_p4/tna/scidmz_telemetry.p4`` and loaded by ``bf_switchd``):

* ``ClientInterface(grpc_addr, client_id, device_id)`` then
  ``bind_pipeline_config(program)``: this client owns the program's tables;
* ``install()``: ``tap_port``, ``class_lpm`` (per tap) and ``class_lpm_src``
  entries with ``entry_add`` (MLC Algorithm 2's rules);
* ``read_class_counters()``: ``SyncCounters`` on ``class_lpm``, then
  ``entry_get`` with ``from_hw`` and the ``$COUNTER_SPEC_BYTES`` /
  ``$COUNTER_SPEC_PKTS`` data of the egress-tap entries, summed per class;
* ``read_register()``: ``entry_get`` on the register table by
  ``$REGISTER_INDEX`` (``from_hw``); pair registers (``cell_t``: ``sig``,
  ``ts``) are returned as the twin's ``(sig << 32) | ts``; ``qd_sum`` is 32
  bits on Tofino (no 64-bit add in a stateful ALU) and is widened to a
  monotone 64-bit count by ``Widener``;
* ``drain_digests()``: ``digest_get`` until empty, each message matched to
  its learn object by ``info.id_get()`` and decoded with ``make_data_list``.

Registers are per pipe: ``entry_get`` returns one value per pipe and the
program's taps arrive on one pipe, so the values are summed over pipes
(cells of unused pipes stay 0).
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .. import constants as C
from ..view import digest_array, mapped, parse_prefixes

__all__ = ["BfrtView", "Widener", "import_bfrt_client", "SDE_MISSING"]

SDE_MISSING = (
    "BF Runtime needs the Tofino SDE's Python client 'bfrt_grpc' (not on PyPI): install Intel P4 "
    "Studio / open-p4studio and set SDE_INSTALL (or PYTHONPATH to "
    "$SDE_INSTALL/lib/python3*/site-packages/tofino); without a Tofino use the v1model program "
    "over P4Runtime (scidmz.telemetry.p4.p4runtime)"
)
PIPE = "pipe.ScidmzIngress"
DEPARSER = "pipe.ScidmzIngressDeparser"
PAIR_REGISTERS = (*C.REG_RTT_STAGE, C.REG_QD_TABLE)
WIDENED = (C.REG_QD_SUM, C.REG_CLASS_STRIP)  # 32-bit on Tofino, 64-bit in the twin


def import_bfrt_client() -> Any:
    """``bfrt_grpc.client`` from the SDE, or a one-line ImportError (``SDE_MISSING``)."""
    sde = os.environ.get("SDE_INSTALL")
    if sde:
        for cand in sorted(Path(sde).glob("lib/python3*/site-packages/tofino")):
            if str(cand) not in sys.path:
                sys.path.append(str(cand))
    try:
        return importlib.import_module("bfrt_grpc.client")
    except ImportError:
        raise ImportError(SDE_MISSING) from None


class Widener:
    """Turn wrapping W-bit counters into monotone 64-bit ones (deltas mod 2^W between reads)."""

    def __init__(self, bits: int) -> None:
        self.mod = 1 << bits
        self._raw: dict[str, np.ndarray] = {}
        self._acc: dict[str, np.ndarray] = {}

    def update(self, name: str, raw: np.ndarray) -> np.ndarray:
        raw = np.asarray(raw, dtype=np.uint64)
        if name not in self._raw or self._raw[name].shape != raw.shape:
            self._raw[name] = raw.copy()
            self._acc[name] = raw.copy()
            return raw.copy()
        delta = (raw.astype(np.int64) - self._raw[name].astype(np.int64)) % self.mod
        self._acc[name] = self._acc[name] + delta.astype(np.uint64)
        self._raw[name] = raw.copy()
        return self._acc[name].copy()


class BfrtView:
    """``DataPlaneView`` of the TNA telemetry program over BF Runtime (module docstring)."""

    tick_ns: int = C.TS_TICK_NS_TNA

    def __init__(self, address: str = "127.0.0.1:50052", *, program: str = "scidmz_telemetry",
                 client_id: int = 0, device_id: int = 0, clock: Callable[[], float] | None = None) -> None:
        gc = import_bfrt_client()  # first, so nothing else happens without the SDE
        self.gc = gc
        self.interface = gc.ClientInterface(address, client_id=client_id, device_id=device_id)
        try:
            self.interface.bind_pipeline_config(program)
            self.info = self.interface.bfrt_info_get(program)
        except Exception:
            self.interface.tear_down_stream()
            raise
        self.target = gc.Target(device_id=device_id, pipe_id=0xFFFF)
        self._clock = clock
        self._offset: float | None = None
        self._widen = Widener(32)
        self._learn = {
            "rtt": self.info.learn_get(f"{DEPARSER}.rtt_digest"),
            "flow": self.info.learn_get(f"{DEPARSER}.flow_digest"),
        }

    # -- setup ---------------------------------------------------------------------------
    def install(self, dtn_prefixes: Iterable[str] | str = (C.DEFAULT_DTN_PREFIX,),
                remote_prefixes: Iterable[str] | str = (C.DEFAULT_REMOTE_PREFIX,),
                tap_ports: Mapping[int, int] | None = None) -> None:
        gc = self.gc
        # parse_prefixes takes "A,B" text or a list alike: never list("A,B"), which is its characters
        entries = [(n, C.CLASS_DTN) for n in parse_prefixes(dtn_prefixes)]
        entries += [(n, C.CLASS_CAMPUS) for n in parse_prefixes(remote_prefixes)]
        if not entries:
            raise ValueError("install needs at least one DTN or remote prefix")
        t_port = self.info.table_get(f"{PIPE}.tap_port")
        for port, tap in (tap_ports or {}).items():
            if tap not in (C.TAP_INGRESS, C.TAP_EGRESS):
                raise ValueError(f"tap for port {port} must be {C.TAP_INGRESS} or {C.TAP_EGRESS}, got {tap}")
            t_port.entry_add(self.target, [t_port.make_key([gc.KeyTuple("ingress_port", int(port))])],
                             [t_port.make_data([gc.DataTuple("tap", int(tap))], "ScidmzIngress.set_tap")])
        t_cls = self.info.table_get(f"{PIPE}.class_lpm")
        t_src = self.info.table_get(f"{PIPE}.class_lpm_src")
        for net, cls in entries:
            addr, plen = mapped(net)  # the 128-bit key: IPv4 a/n is ::ffff:a/(96 + n)
            for tap in (C.TAP_INGRESS, C.TAP_EGRESS):
                key = t_cls.make_key([gc.KeyTuple("tap", tap),
                                      gc.KeyTuple("dst_addr", addr, prefix_len=plen)])
                t_cls.entry_add(self.target, [key], [t_cls.make_data(
                    [gc.DataTuple("class_id", cls)], "ScidmzIngress.set_class")])
            key = t_src.make_key([gc.KeyTuple("src_addr", addr, prefix_len=plen)])
            t_src.entry_add(self.target, [key], [t_src.make_data(
                [gc.DataTuple("class_id", cls)], "ScidmzIngress.set_class_src")])

    # -- DataPlaneView ---------------------------------------------------------------------
    def clock(self) -> float:
        if self._clock is not None:
            return float(self._clock())
        return time.monotonic() - (self._offset or 0.0)

    def read_class_counters(self) -> np.ndarray:
        t = self.info.table_get(f"{PIPE}.class_lpm")
        t.operations_execute(self.target, "SyncCounters")
        out = np.zeros((C.N_CLASSES, 2), dtype=np.uint64)
        for data, key in t.entry_get(self.target, None, {"from_hw": False}):
            k, d = key.to_dict(), data.to_dict()
            if int(k["tap"]["value"]) != C.TAP_EGRESS:
                continue
            cls = int(d["class_id"])
            if 0 <= cls < C.N_CLASSES:
                out[cls, 0] += np.uint64(d["$COUNTER_SPEC_BYTES"])
                out[cls, 1] += np.uint64(d["$COUNTER_SPEC_PKTS"])
        # the counters add whole packets; the measured frame of a tunnelled one is the inner one
        out[:, 0] -= self.read_register(C.REG_CLASS_STRIP)[: C.N_CLASSES]
        return out

    def read_register(self, name: str, index: np.ndarray | None = None) -> np.ndarray:
        gc = self.gc
        full = f"{PIPE}.{name}"
        t = self.info.table_get(full)
        if index is None:
            size = int(t.info.size_get())
            idx = list(range(size))
        else:
            idx = [int(i) for i in np.asarray(index, dtype=np.int64).reshape(-1)]
        keys = [t.make_key([gc.KeyTuple("$REGISTER_INDEX", i)]) for i in idx]
        vals = np.zeros(len(idx), dtype=np.uint64)
        got = t.entry_get(self.target, keys, {"from_hw": True}) if keys else []
        for j, (data, _key) in enumerate(got):
            d = data.to_dict()
            if name in PAIR_REGISTERS:
                sig = int(sum(d[f"{full[5:]}.sig"]))
                ts = int(sum(d[f"{full[5:]}.ts"]))
                vals[j] = np.uint64((sig << 32) | (ts & C.TS_MASK))
            else:
                vals[j] = np.uint64(sum(int(v) for v in d[f"{full[5:]}.f1"]))
        if name in WIDENED:
            if index is not None:
                raise ValueError(f"{name} is widened from 32 bits and must be read whole")
            vals = self._widen.update(name, vals)
        return vals

    def drain_digests(self) -> tuple[np.ndarray, np.ndarray]:
        rtt_rows: list[tuple[int, ...]] = []
        flow_rows: list[tuple[int, ...]] = []
        rtt_names = [n for n, _ in C.DIGEST_RTT_FIELDS]
        flow_names = [n for n, _ in C.DIGEST_FLOW_FIELDS]
        by_id = {learn.info.id_get(): kind for kind, learn in self._learn.items()}
        while True:
            try:
                msg = self.interface.digest_get(timeout=0.001)
            except Exception:  # bfrt_grpc signals "no digest queued" with a plain exception
                break
            host = time.monotonic()
            kind = by_id.get(msg.digest_id)
            if kind is None:
                continue  # a digest of another program sharing the device
            names = rtt_names if kind == "rtt" else flow_names
            rows = rtt_rows if kind == "rtt" else flow_rows
            for data in self._learn[kind].make_data_list(msg):
                d = data.to_dict()
                row = tuple(int(d[n]) for n in names)
                rows.append(row)
                off = host - row[names.index("ts")] * self.tick_ns * 1e-9
                if self._offset is None or off < self._offset:
                    self._offset = off
        return digest_array(rtt_rows, C.DIGEST_RTT_FIELDS), digest_array(flow_rows, C.DIGEST_FLOW_FIELDS)

    def close(self) -> None:
        self.interface.tear_down_stream()

    def __enter__(self) -> BfrtView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

