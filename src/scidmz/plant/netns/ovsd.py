"""A private userspace Open vSwitch for the testbed's S1 switch.

This kernel has no openvswitch module (see MACHINE.md), so OVS runs with the
userspace datapath only: ``OvsUserspace`` starts a private ``ovsdb-server``
and ``ovs-vswitchd`` (their own run/db/log directory under a temp dir, their
own pidfiles and unixctl sockets, optionally inside a network namespace so
that several instances never share the datapath's tap device) and creates
``datapath_type=netdev`` bridges. Veths attached to such a bridge need TX
checksum offload off on both ends (``ethtool -K DEV tx off``), otherwise the
userspace datapath forwards TCP segments with unfilled checksums and TCP
stalls.

Only the testbed starts switches; the actuator (``actuators.ovs.OvsQosActuator``)
drives an OVS that someone else runs, here or on a real campus switch.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from ...actuators.ovs import EXT_ID as _EXT_ID
from ...actuators.ovs import which as _which

__all__ = ["OvsUserspace", "disable_tx_offload", "ovs_available"]

_SCHEMA_CANDIDATES = (
    "/usr/share/openvswitch/vswitch.ovsschema",
    "/usr/local/share/openvswitch/vswitch.ovsschema",
)


def ovs_available() -> bool:
    """True when the OVS userspace programs and the vswitch schema are installed."""
    try:
        for prog in ("ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl", "ovs-appctl"):
            _which(prog)
    except RuntimeError:
        return False
    return any(Path(p).exists() for p in _SCHEMA_CANDIDATES)


def _ns_prefix(netns: str | None) -> list[str]:
    return ["ip", "netns", "exec", netns] if netns else []


def disable_tx_offload(dev: str, netns: str | None = None) -> None:
    """``ethtool -K DEV tx off`` (TX checksum offload), needed for every veth end on a netdev bridge."""
    cmd = [*_ns_prefix(netns), _which("ethtool"), "-K", dev, "tx", "off"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        where = f" in namespace '{netns}'" if netns else ""
        raise RuntimeError(f"ethtool -K {dev} tx off{where} failed: {r.stderr.strip() or r.stdout.strip()}")


class OvsUserspace:
    """A private ovsdb-server + ovs-vswitchd (userspace datapath) with bridges of ``datapath_type=netdev``.

    ``start()`` (or the context manager) creates a temp directory holding the
    database, sockets, pidfiles and logs, and starts both daemons as children
    of this process, inside ``netns`` when given. ``stop()`` deletes the
    bridges it made (``ovs-appctl exit --cleanup`` removes the datapath and
    its tap devices), terminates both daemons by pid and removes the
    directory; it runs on every exit path of the context manager.
    """

    def __init__(self, netns: str | None = None, workdir: str | os.PathLike[str] | None = None,
                 start_timeout: float = 20.0) -> None:
        self.netns = netns
        self._given_dir = Path(workdir) if workdir is not None else None
        self.dir: Path | None = None
        self.start_timeout = float(start_timeout)
        self._db: subprocess.Popen[bytes] | None = None
        self._vs: subprocess.Popen[bytes] | None = None
        self.bridges: list[str] = []
        self._veths: list[tuple[str, str | None]] = []

    # -- paths -----------------------------------------------------------------------------
    def _p(self, name: str) -> str:
        if self.dir is None:
            raise RuntimeError("OvsUserspace is not started")
        return str(self.dir / name)

    @property
    def db_sock(self) -> str:
        return self._p("db.sock")

    @property
    def db_remote(self) -> str:
        """The OVSDB connection string, e.g. for ovsdbapp or ``ovs-vsctl --db``."""
        return f"unix:{self.db_sock}"

    @property
    def vswitchd_ctl(self) -> str:
        return self._p("ovs-vswitchd.ctl")

    @property
    def log_file(self) -> str:
        return self._p("ovs-vswitchd.log")

    @property
    def running(self) -> bool:
        return self._vs is not None and self._vs.poll() is None and self._db is not None and self._db.poll() is None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> OvsUserspace:
        if self._db is not None:
            return self
        if not ovs_available():
            raise RuntimeError("Open vSwitch userspace tools not found: apt-get install openvswitch-switch")
        if self.netns is not None and not Path("/var/run/netns", self.netns).exists():
            raise ValueError(f"network namespace '{self.netns}' does not exist")
        schema = next(p for p in _SCHEMA_CANDIDATES if Path(p).exists())
        if self._given_dir is not None:
            self._given_dir.mkdir(parents=True, exist_ok=True)
            self.dir = Path(tempfile.mkdtemp(prefix="ovs-", dir=self._given_dir))
        else:
            self.dir = Path(tempfile.mkdtemp(prefix="scidmz-ovs-"))
        env = {**os.environ, "OVS_RUNDIR": str(self.dir), "OVS_DBDIR": str(self.dir),
               "OVS_LOGDIR": str(self.dir), "OVS_SYSCONFDIR": str(self.dir)}
        self._env = env
        try:
            self._run([_which("ovsdb-tool"), "create", self._p("conf.db"), schema], ns=False)
            self._db = subprocess.Popen(
                [*_ns_prefix(self.netns), _which("ovsdb-server"), self._p("conf.db"),
                 f"--remote=punix:{self.db_sock}", f"--pidfile={self._p('ovsdb-server.pid')}",
                 f"--unixctl={self._p('ovsdb-server.ctl')}", f"--log-file={self._p('ovsdb-server.log')}",
                 "--no-chdir", "-vconsole:off"],
                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                start_new_session=True,
            )
            self._wait_for(lambda: Path(self.db_sock).exists(), "ovsdb-server socket", self._db)
            self.vsctl("--no-wait", "init")
            self._vs = subprocess.Popen(
                [*_ns_prefix(self.netns), _which("ovs-vswitchd"), self.db_remote,
                 f"--pidfile={self._p('ovs-vswitchd.pid')}", f"--unixctl={self.vswitchd_ctl}",
                 f"--log-file={self.log_file}", "--no-chdir", "-vconsole:off"],
                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                start_new_session=True,
            )
            self._wait_for(lambda: Path(self.vswitchd_ctl).exists(), "ovs-vswitchd control socket", self._vs)
            # Without --no-wait, ovs-vsctl returns once vswitchd has applied the change,
            # i.e. once it really serves this database.
            self.vsctl(f"--timeout={int(self.start_timeout)}", "set", "Open_vSwitch", ".",
                       f"external-ids:{_EXT_ID}=scidmz")
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_for(self, cond: Any, what: str, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self.start_timeout
        while not cond():
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
                raise RuntimeError(f"{what} did not come up (exit {proc.returncode}): {err[-300:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out after {self.start_timeout:.0f} s waiting for {what}")
            time.sleep(0.02)

    def stop(self) -> None:
        """Delete our bridges, stop both daemons (by pid), remove the private directory."""
        if self._vs is not None:
            if self._vs.poll() is None:
                for br in list(self.bridges):
                    self.vsctl("--if-exists", "del-br", br, check=False, timeout=10)
                subprocess.run([_which("ovs-appctl"), "-t", self.vswitchd_ctl, "exit", "--cleanup"],
                               capture_output=True, timeout=15, env=self._env)
            _reap(self._vs)
            self._vs = None
        self.bridges.clear()
        if self._db is not None:
            _reap(self._db)
            self._db = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> OvsUserspace:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- commands ----------------------------------------------------------------------------
    def _run(self, cmd: list[str], ns: bool = False, check: bool = True, timeout: float = 30.0) -> str:
        full = [*_ns_prefix(self.netns), *cmd] if ns else cmd
        r = subprocess.run(full, capture_output=True, text=True, timeout=timeout, env=getattr(self, "_env", None))
        if check and r.returncode != 0:
            raise RuntimeError(f"{Path(cmd[0]).name} {' '.join(cmd[1:4])}... failed: {r.stderr.strip()[-300:]}")
        return r.stdout

    def vsctl(self, *args: str, check: bool = True, timeout: float = 30.0) -> str:
        """Run ``ovs-vsctl`` against this instance's database."""
        return self._run([_which("ovs-vsctl"), f"--db={self.db_remote}", *args], check=check, timeout=timeout)

    def ofctl(self, command: str, bridge: str, *args: str, check: bool = True) -> str:
        """Run ``ovs-ofctl -O OpenFlow13 COMMAND <bridge's mgmt socket> ARGS``."""
        return self._run([_which("ovs-ofctl"), "-O", "OpenFlow13", command, self.mgmt(bridge), *args],
                         check=check)

    def mgmt(self, bridge: str) -> str:
        """The OpenFlow management socket of ``bridge`` (ovs-ofctl target)."""
        return f"unix:{self._p(bridge + '.mgmt')}"

    def add_bridge(self, name: str) -> str:
        """Create ``name`` with ``datapath_type=netdev`` (userspace datapath) and OpenFlow 1.0-1.3."""
        if not name or len(name) > 15:
            raise ValueError(f"bridge name must be 1-15 characters, got {name!r}")
        self.vsctl("add-br", name, "--", "set", "Bridge", name, "datapath_type=netdev",
                   "protocols=OpenFlow10,OpenFlow13", "--", "br-set-external-id", name, _EXT_ID, "scidmz")
        self.bridges.append(name)
        return name

    def add_port(self, bridge: str, dev: str, peer: str | None = None, peer_netns: str | None = None) -> None:
        """Attach veth ``dev`` (in this instance's namespace) and turn TX offload off on it and its peer."""
        disable_tx_offload(dev, self.netns)
        if peer is not None:
            disable_tx_offload(peer, peer_netns)
        self.vsctl("add-port", bridge, dev)


def _reap(proc: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(grace)
    if proc.stderr is not None:
        proc.stderr.close()


# -- the actuator -------------------------------------------------------------------------------


