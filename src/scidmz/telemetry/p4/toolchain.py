"""The P4 toolchain (p4c, p4test, BMv2 ``simple_switch_grpc``) for scidmz's P4 programs.

Shared by the telemetry programs (``telemetry_p4/``) and the queue disciplines'
programs (``src/scidmz/disciplines/<name>/p4/``):

* ``toolchain_bin()`` finds the toolchain: ``p4c`` on ``PATH`` first, then the
  ``P4TC`` environment variable (the unpacked ``p4tc`` folder or its ``bin``),
  then the cache folder ``scripts/install_p4tc.sh`` unpacks into
  (``$XDG_CACHE_HOME/scidmz/p4tc/bin``, default ``~/.cache/scidmz/p4tc/bin``).
* ``compile_bmv2()`` runs ``p4c --target bmv2 --arch v1model`` and returns the
  BMv2 JSON and P4Info paths; ``p4test()`` runs the front and mid end only
  (the Tofino path, with the open-source TNA headers) and treats any warning
  as a failure.
* ``Bmv2Switch`` starts ``simple_switch_grpc`` inside its own network
  namespace (BMv2's Thrift server always binds 0.0.0.0:9090, so two switches
  can only coexist in separate namespaces). Each switch port is one end of a
  veth pair whose other end stays in the host namespace, so a test writes
  frames into port *i* with an ``AF_PACKET`` socket on ``host_ifaces[i]``. A
  third veth pair carries the management addresses: P4Runtime (gRPC) and
  Thrift are reached at ``grpc_address`` / ``thrift_address`` from the host.
  Teardown (process, namespace, host-side veths) runs on every exit path of
  the ``with`` block and at interpreter exit.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import time
import zlib
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

__all__ = [
    "ToolchainMissing", "CompileError", "Compiled", "Bmv2Switch", "PcapReplayer",
    "toolchain_bin", "require_toolchain", "tofino_include", "compile_bmv2", "p4test",
]

GRPC_PORT = 9559  # simple_switch_grpc's default P4Runtime port
THRIFT_PORT = 9090  # BMv2's Thrift runtime port (not configurable)


class ToolchainMissing(RuntimeError):
    """No p4c/BMv2 toolchain was found (message: one line saying where we looked)."""


class CompileError(RuntimeError):
    """p4c or p4test failed or warned; ``output`` holds its full output."""

    def __init__(self, message: str, output: str) -> None:
        super().__init__(message)
        self.output = output


def _cache_bin() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "scidmz" / "p4tc" / "bin"


def toolchain_bin() -> Path | None:
    """The ``bin`` folder holding ``p4c``: PATH, then ``$P4TC``, then the cache folder; None if absent."""
    on_path = shutil.which("p4c")
    if on_path:
        return Path(on_path).resolve().parent
    env = os.environ.get("P4TC")
    candidates = []
    if env:
        candidates += [Path(env), Path(env) / "bin", Path(env) / "p4tc" / "bin"]
    candidates.append(_cache_bin())
    for c in candidates:
        if (c / "p4c").is_file() and os.access(c / "p4c", os.X_OK):
            return c.resolve()
    return None


def require_toolchain() -> Path:
    """``toolchain_bin()`` or ``ToolchainMissing`` with a one-line reason."""
    b = toolchain_bin()
    if b is None:
        raise ToolchainMissing(
            f"no P4 toolchain: p4c not on PATH, P4TC unset or wrong, nothing in {_cache_bin()} "
            "(run scripts/install_p4tc.sh)")
    return b


def tofino_include() -> Path:
    """The open-source TNA/T2NA architecture headers shipped with the toolchain (for ``p4test``)."""
    return require_toolchain().parent / "share" / "p4c" / "tofino-p4include"


def _env(bin_dir: Path) -> dict[str, str]:
    # the p4c driver calls p4c-bm2-ss / p4test by name
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


@dataclass(frozen=True)
class Compiled:
    """What ``compile_bmv2`` produced, and how long it took (wall seconds)."""

    json: Path
    p4info: Path
    seconds: float
    output: str


def compile_bmv2(source: str | os.PathLike[str], outdir: str | os.PathLike[str],
                 defines: tuple[str, ...] = ()) -> Compiled:
    """``p4c --target bmv2 --arch v1model --p4runtime-files`` into ``outdir``; warnings fail it too."""
    bin_dir = require_toolchain()
    src = Path(source).resolve()
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    p4info = out / f"{src.stem}.p4info.txtpb"
    cmd = [str(bin_dir / "p4c"), "--target", "bmv2", "--arch", "v1model",
           "--p4runtime-files", str(p4info), "-o", str(out), *(f"-D{d}" for d in defines), str(src)]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env(bin_dir), check=False)
    dt = time.perf_counter() - t0
    text = r.stdout + r.stderr
    if r.returncode != 0 or "warning" in text.lower() or "error" in text.lower():
        raise CompileError(f"p4c failed on {src.name} (exit {r.returncode}): "
                           f"{(text.strip().splitlines() or ['no output'])[0]}", text)
    return Compiled(json=out / f"{src.stem}.json", p4info=p4info, seconds=dt, output=text)


def p4test(source: str | os.PathLike[str], includes: tuple[str | os.PathLike[str], ...] = (),
           defines: tuple[str, ...] = ()) -> float:
    """Front and mid end only (``p4test``); returns the wall seconds. Any warning or error fails."""
    bin_dir = require_toolchain()
    src = Path(source).resolve()
    cmd = [str(bin_dir / "p4test"), *(f"-I{i}" for i in includes), *(f"-D{d}" for d in defines), str(src)]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env(bin_dir), check=False)
    dt = time.perf_counter() - t0
    text = r.stdout + r.stderr
    if r.returncode != 0 or text.strip():
        raise CompileError(f"p4test failed on {src.name} (exit {r.returncode}): "
                           f"{(text.strip().splitlines() or ['no output'])[0]}", text)
    return dt


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


class Bmv2Switch:
    """``simple_switch_grpc`` in a namespace of its own, ports on veth pairs (module docstring).

    ``prefix`` names everything created (namespace ``<prefix>``, interfaces
    ``<prefix>h<i>`` in the host and ``<prefix>s<i>`` in the namespace, the
    management pair ``<prefix>m0``/``<prefix>m1``); keep it <= 8 characters
    and unique per caller. Ports are numbered 1..n_ports.
    """

    def __init__(self, prefix: str, n_ports: int = 2, *, json: str | os.PathLike[str] | None = None,
                 log: str | os.PathLike[str] | None = None, device_id: int = 0) -> None:
        if not prefix.isalnum() or len(prefix) > 8:
            raise ValueError(f"prefix must be alphanumeric and at most 8 characters, got {prefix!r}")
        if not 1 <= n_ports <= 8:
            raise ValueError(f"n_ports must be 1..8, got {n_ports}")
        self.prefix = prefix
        self.n_ports = n_ports
        self.json = json
        self.log = log
        self.device_id = device_id
        self.ns = prefix
        self.host_ifaces = {i: f"{prefix}h{i}" for i in range(1, n_ports + 1)}
        self.sw_ifaces = {i: f"{prefix}s{i}" for i in range(1, n_ports + 1)}
        # a /30 for the management link chosen from the prefix (ours: 10.213.0.0/16 is
        # not used by the testbed), so concurrent switches get different addresses
        h = zlib.crc32(prefix.encode()) & 0x3FFF
        base = f"10.213.{h >> 6}.{(h & 0x3F) << 2}"
        a, b, c, d = (int(x) for x in base.split("."))
        self.host_addr = f"{a}.{b}.{c}.{d + 1}"
        self.ns_addr = f"{a}.{b}.{c}.{d + 2}"
        self.grpc_address = f"{self.ns_addr}:{GRPC_PORT}"
        self.thrift_address = f"{self.ns_addr}:{THRIFT_PORT}"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_fh = None

    # -- lifecycle ---------------------------------------------------------------------
    def start(self, timeout: float = 30.0) -> Bmv2Switch:
        bin_dir = require_toolchain()
        self.stop()  # a leftover of an interrupted run with the same prefix
        atexit.register(self.stop)
        try:
            _ip("netns", "add", self.ns)
            _ip("-n", self.ns, "link", "set", "lo", "up")
            for i in range(1, self.n_ports + 1):
                h, s = self.host_ifaces[i], self.sw_ifaces[i]
                _ip("link", "add", h, "type", "veth", "peer", "name", s, "netns", self.ns)
                for args in (("link", "set", h, "up"),):
                    _ip(*args)
                _ip("-n", self.ns, "link", "set", s, "up")
                # no IPv6 autoconfiguration chatter into the switch's ports
                for where, dev in ((None, h), (self.ns, s)):
                    cmd = ["sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1"]
                    if where:
                        cmd = ["ip", "netns", "exec", where, *cmd]
                    subprocess.run(cmd, capture_output=True, check=False)
            m0, m1 = f"{self.prefix}m0", f"{self.prefix}m1"
            _ip("link", "add", m0, "type", "veth", "peer", "name", m1, "netns", self.ns)
            _ip("addr", "add", f"{self.host_addr}/30", "dev", m0)
            _ip("link", "set", m0, "up")
            _ip("-n", self.ns, "addr", "add", f"{self.ns_addr}/30", "dev", m1)
            _ip("-n", self.ns, "link", "set", m1, "up")
            cmd = ["ip", "netns", "exec", self.ns, str(bin_dir / "simple_switch_grpc"),
                   "--device-id", str(self.device_id)]
            for i in range(1, self.n_ports + 1):
                cmd += ["-i", f"{i}@{self.sw_ifaces[i]}"]
            cmd += [str(self.json)] if self.json is not None else ["--no-p4"]
            cmd += ["--", "--grpc-server-addr", self.grpc_address]
            out = subprocess.DEVNULL
            if self.log is not None:
                self._log_fh = open(self.log, "wb")  # noqa: SIM115 (closed in stop())
                out = self._log_fh
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        host, port = self.ns_addr, GRPC_PORT
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"simple_switch_grpc exited with {self.proc.returncode} at start"
                                   + (f" (log: {self.log})" if self.log else ""))
            for p in (port, THRIFT_PORT):
                try:
                    socket.create_connection((host, p), timeout=0.5).close()
                except OSError:
                    break
            else:
                return
            time.sleep(0.1)
        raise RuntimeError(f"simple_switch_grpc did not listen on {host}:{port} within {timeout:g} s")

    def stop(self) -> None:
        """Kill the switch, delete the namespace and the host-side veths; safe to call twice."""
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGTERM)
                    self.proc.wait(timeout=5)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    try:
                        os.killpg(self.proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    self.proc.wait(timeout=5)
            self.proc = None
        if self._log_fh is not None:
            self._log_fh.close()
            self._log_fh = None
        for dev in [*self.host_ifaces.values(), f"{self.prefix}m0"]:
            _ip("link", "del", dev, check=False)
        _ip("netns", "del", self.ns, check=False)

    def __enter__(self) -> Bmv2Switch:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        atexit.unregister(self.stop)


class PcapReplayer:
    """Writes the frames of one pcap per switch port into the ports, paced as captured.

    ``play(lo_ns, hi_ns)`` sends the frames stamped in [lo_ns, hi_ns) of the
    pcaps' clock, starting now, with the captured spacing divided by ``speed``,
    and returns what it sent as (host ``time.monotonic_ns()`` just before the
    send, port, frame). Frames of different ports are interleaved by time;
    on equal stamps the lower port goes first. The real send times, not the
    captured ones, are what the switch saw: the caller feeds those to the
    software twin (a loaded host sends late, never early).
    """

    def __init__(self, port_pcaps: dict[int, str | os.PathLike[str]], host_ifaces: dict[int, str]) -> None:
        import dpkt

        rows: list[tuple[int, int, bytes]] = []
        for port, path in port_pcaps.items():
            if port not in host_ifaces:
                raise ValueError(f"no interface for port {port}")
            with open(path, "rb") as fh:
                for ts, buf in dpkt.pcap.Reader(fh):
                    # dpkt gives float seconds (a Decimal for nanosecond files): to ns exactly
                    rows.append((int(Decimal(str(ts)) * 1_000_000_000), port, bytes(buf)))
        rows.sort(key=lambda r: (r[0], r[1]))
        self.frames = rows
        self._socks: dict[int, socket.socket] = {}
        try:
            for port, dev in host_ifaces.items():
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
                s.bind((dev, 0))
                self._socks[port] = s
        except BaseException:
            self.close()
            raise

    def play(self, lo_ns: int, hi_ns: int, speed: float = 1.0) -> list[tuple[int, int, bytes]]:
        if speed <= 0:
            raise ValueError(f"speed must be > 0, got {speed}")
        sel = [r for r in self.frames if lo_ns <= r[0] < hi_ns]
        sent: list[tuple[int, int, bytes]] = []
        start = time.monotonic_ns()
        for ts, port, fr in sel:
            target = start + int((ts - lo_ns) / speed)
            d = target - time.monotonic_ns()
            if d > 0:
                time.sleep(d / 1e9)
            now = time.monotonic_ns()
            self._socks[port].send(fr)
            sent.append((now, port, fr))
        return sent

    def send(self, port: int, frame: bytes) -> int:
        """Send one extra frame now; returns its host send time (monotonic ns)."""
        now = time.monotonic_ns()
        self._socks[port].send(frame)
        return now

    def close(self) -> None:
        for s in self._socks.values():
            s.close()
        self._socks.clear()

    def __enter__(self) -> PcapReplayer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
