"""Open vSwitch as the actuator: QoS on a port of a running OVS.

The switch is someone else's (a campus switch, or the testbed's private
userspace OVS, ``plant.netns.ovsd.OvsUserspace``); this module only reads and
writes its database.

``OvsQosActuator`` sets a rate on one port in one of three ways:

* ``htb``: a ``linux-htb`` QoS row with ``max-rate`` and one Queue row
  (OVS installs a kernel HTB on the port's netdev; it shapes the port's
  egress, i.e. traffic the switch sends out of that port);
* ``policing``: ``ingress_policing_rate``/``ingress_policing_burst`` on the
  port's Interface (drops what the switch receives on that port above the
  rate);
* ``meter``: an OpenFlow meter (drop band) that every packet entering from
  the port passes before ``NORMAL`` forwarding; meters are implemented by the
  userspace datapath itself.

Which of these the userspace datapath really enforces on this kernel is
measured by ``tests/test_actuators.py`` (and reported in docs/operations.md).
The OVS database is driven through ovsdbapp (the ``testbed`` extra);
``current_rate`` always reads the value back from the database (htb/policing)
or from ``ovs-ofctl`` (meter).
"""

from __future__ import annotations

import logging
import math
import os
import re
import shutil
import socket
import subprocess
import threading
from typing import Any

from ..records import RecordError, proc_start_time, recorded_owner_runs
from .base import ActuatorError, ForeignConfigError, check_rate

__all__ = ["OvsQosActuator", "OVS_MODES", "EXT_ID", "which"]

log = logging.getLogger("scidmz.actuators")

OVS_MODES = ("htb", "policing", "meter")
EXT_ID = "scidmz-owner"  # external_ids key marking rows this module created
# Which process on which host made the rows, so a restart can tell a crashed run's leftover
# (reclaimed) from a live run's QoS (refused).
EXT_PID, EXT_HOST = "scidmz-pid", "scidmz-host"
#: The owner's start time (``/proc/PID/stat`` field 22), so a recycled pid is not taken for it.
EXT_START = "scidmz-start"
# The same for meter mode, on the Bridge row: an OpenFlow meter has no external_ids of its own
# (ours: the bridge that holds the meter is the one OVSDB row that outlives the process).
METER_PID, METER_HOST = "scidmz-meter-pid", "scidmz-meter-host"
METER_START = "scidmz-meter-start"


def which(name: str) -> str:
    path = shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}", f"/usr/local/sbin/{name}") if os.access(p, os.X_OK)),
        None,
    )
    if path is None:
        raise RuntimeError(f"'{name}' not found: install Open vSwitch (apt-get install openvswitch-switch)")
    return path


class _Ovsdb:
    """OVSDB access through ovsdbapp's IDL: one connection, transactions, no process per call.

    The only OVSDB client here (one backend, not an ovsdbapp and an
    ``ovs-vsctl`` copy of the same operations); OpenFlow meters still go
    through ``ovs-ofctl``, which speaks OpenFlow, not OVSDB.
    """

    def __init__(self, db: str) -> None:
        try:
            from ovsdbapp.backend.ovs_idl import connection
            from ovsdbapp.schema.open_vswitch import impl_idl
        except ImportError:
            raise RuntimeError("the OVS actuator needs ovsdbapp: pip install 'scidmz[testbed]'") from None
        self.db = db
        try:
            idl = connection.OvsdbIdl.from_server(db, "Open_vSwitch")
            self._conn = connection.Connection(idl=idl, timeout=10)
            # ovsdbapp keeps the connection in a class attribute (one OVSDB per process); a
            # fresh subclass per backend lets several databases (test instances) coexist.
            api_cls = type("_ScidmzOvsdbIdl", (impl_idl.OvsdbIdl,), {"_ovsdb_connection": None})
            self.api = api_cls(self._conn)
        except Exception as exc:
            raise RuntimeError(f"cannot connect to OVSDB at {db}: {exc}") from None

    def has_port(self, port: str) -> bool:
        return bool(self.api.db_find("Port", ("name", "=", port), columns=["name"]).execute(check_error=True))

    def set_interface(self, iface: str, **cols: int) -> None:
        self.api.db_set("Interface", iface, *cols.items()).execute(check_error=True)

    def get_interface(self, iface: str, col: str) -> int:
        v = self.api.db_get("Interface", iface, col).execute(check_error=True)
        # Optional integer columns (ofport) come back as a list: [] when unset.
        if isinstance(v, list):
            v = v[0] if v else -1
        return int(v)

    def _qos_uuid(self, port: str) -> Any | None:
        qos = self.api.db_get("Port", port, "qos").execute(check_error=True)
        return None if qos in ([], None) else _uuid(qos)

    def has_qos(self, port: str) -> bool:
        return self._qos_uuid(port) is not None

    def create_htb(self, port: str, rate: int) -> None:
        ext = {EXT_ID: "scidmz", **_mark(EXT_PID, EXT_HOST, EXT_START)}
        with self.api.transaction(check_error=True) as txn:
            q = txn.add(self.api.db_create("Queue", other_config={"max-rate": str(rate)}, external_ids=ext))
            qos = txn.add(self.api.db_create("QoS", type="linux-htb", other_config={"max-rate": str(rate)},
                                             queues={0: q}, external_ids=dict(ext)))
            txn.add(self.api.db_set("Port", port, ("qos", qos)))

    def set_htb(self, port: str, rate: int) -> None:
        qos = self._qos_uuid(port)
        if qos is None:
            raise RuntimeError(f"the QoS of OVS port '{port}' disappeared")
        queues = self.api.db_get("QoS", qos, "queues").execute(check_error=True)
        with self.api.transaction(check_error=True) as txn:
            txn.add(self.api.db_set("QoS", qos, ("other_config", {"max-rate": str(rate)})))
            for queue in queues.values():
                txn.add(self.api.db_set("Queue", _uuid(queue), ("other_config", {"max-rate": str(rate)})))

    def get_htb(self, port: str) -> int | None:
        qos = self._qos_uuid(port)
        if qos is None:
            return None
        return int(self.api.db_get("QoS", qos, "other_config").execute(check_error=True)["max-rate"])

    def htb_owner(self, port: str) -> dict[str, str]:
        """The external_ids of the port's QoS row ({} when it has none)."""
        qos = self._qos_uuid(port)
        return {} if qos is None else dict(self.api.db_get("QoS", qos, "external_ids").execute(check_error=True))

    def meter_owner(self, bridge: str) -> tuple[str, str | None, str | None]:
        """(pid, host, start time) recorded on the bridge for its scidmz meter; ("", None, None) when none is."""
        ext = self.api.db_get("Bridge", bridge, "external_ids").execute(check_error=True)
        return ext.get(METER_PID, ""), ext.get(METER_HOST), ext.get(METER_START)

    def set_meter_owner(self, bridge: str) -> None:
        owner = _mark(METER_PID, METER_HOST, METER_START)
        self.api.db_set("Bridge", bridge, ("external_ids", owner)).execute(check_error=True)

    def clear_meter_owner(self, bridge: str) -> None:
        self.api.db_remove("Bridge", bridge, "external_ids", METER_PID, METER_HOST, METER_START,
                           if_exists=True).execute(check_error=True)

    def drop_unused_mine(self) -> None:
        """Destroy this process's QoS rows (and their Queues) that no port uses any more: ``QoS`` and
        ``Queue`` are root tables, so OVSDB keeps them after an admin put their own QoS in ours' place."""
        rows = [r for r in self.api.db_list("QoS", columns=["_uuid", "queues", "external_ids"]).execute(
            check_error=True) if _is_mine(dict(r["external_ids"]), EXT_PID, EXT_HOST, EXT_START)]
        used = {_uuid(q) for q in self.api.db_list("Port", columns=["qos"]).execute(check_error=True)
                for q in ([q["qos"]] if not isinstance(q["qos"], list) else q["qos"])}
        with self.api.transaction(check_error=True) as txn:
            for row in rows:
                if row["_uuid"] in used:
                    continue
                txn.add(self.api.db_destroy("QoS", row["_uuid"]))
                for queue in row["queues"].values():
                    txn.add(self.api.db_destroy("Queue", _uuid(queue)))

    def clear_htb(self, port: str, mine: bool = False) -> None:
        """Remove the port's scidmz QoS (with ``mine``: only if this process made it)."""
        qos = self._qos_uuid(port)
        if qos is None:
            return
        ext = self.htb_owner(port)
        if ext.get(EXT_ID) != "scidmz" or (mine and not _is_mine(ext, EXT_PID, EXT_HOST, EXT_START)):
            return  # someone else's QoS: not ours to delete
        queues = self.api.db_get("QoS", qos, "queues").execute(check_error=True)
        with self.api.transaction(check_error=True) as txn:
            txn.add(self.api.db_clear("Port", port, "qos"))
            txn.add(self.api.db_destroy("QoS", qos))
            for queue in queues.values():
                txn.add(self.api.db_destroy("Queue", _uuid(queue)))

    def close(self) -> None:
        try:
            self._conn.stop()
        except Exception:
            pass


def _mark(pid: str, host: str, start: str) -> dict[str, str]:
    """The owner keys scidmz writes into ``external_ids``: this process, its host and start time."""
    return {pid: str(os.getpid()), host: socket.gethostname(), start: str(proc_start_time(os.getpid()))}


def _is_mine(ext: dict[str, str], pid: str, host: str, start: str) -> bool:
    """Whether ``external_ids`` carry this process's own mark (``_mark``)."""
    return all(ext.get(k) == v for k, v in _mark(pid, host, start).items())


def _uuid(ref: Any) -> Any:
    """The IDL returns referenced rows as Row objects; commands want their UUIDs."""
    return getattr(ref, "uuid", ref)


def kernel_has_police() -> bool:
    """Whether the kernel has the tc ``police`` action that OVS ingress policing on Linux netdevs uses."""
    from .tbf import kernel_config

    return kernel_config("CONFIG_NET_ACT_POLICE") in ("y", "m")


class OvsQosActuator:
    """Rate on one OVS port (``htb``, ``policing`` or ``meter``; see module doc), read back from OVS.

    ``db``: the OVSDB remote (``OvsUserspace.db_remote``, or the system's
    ``unix:/var/run/openvswitch/db.sock``). ``bridge`` is needed for
    ``meter`` (the OpenFlow target, ``ofctl_target`` if it is not the
    bridge name).

    Units: OVS takes ingress policing and meter rates in kbit/s and HTB
    max-rate in bit/s; rates are rounded to those units and a command of 0
    applies ``MIN_RATE``. ``close`` restores what was there: the previous
    policing values, or removes the QoS/Queue rows or meter/flows it created.
    A QoS (``htb``) or meter (``meter``) left by a scidmz process of this host
    that has since died (killed before ``close``) is removed at start; any other
    QoS on the port, or a meter with scidmz's id that a live or foreign process
    holds, is refused. A QoS, meter or policing values someone else puts in place
    of ours while it runs are left as they are: ``set_rate`` raises
    ``ForeignConfigError`` from then on and ``close`` does not touch them
    (``_foreign`` says how ours is told from theirs).
    """

    def __init__(
        self,
        db: str,
        port: str,
        mode: str = "policing",
        bridge: str | None = None,
        burst: float | None = None,
        ofctl_target: str | None = None,
        netns: str | None = None,
    ) -> None:
        if mode not in OVS_MODES:
            raise ValueError(f"unknown OVS QoS mode '{mode}' (choose from {', '.join(OVS_MODES)})")
        if mode == "meter" and not bridge:
            raise ValueError("OVS meter mode needs the bridge the port is on (bridge=...)")
        if burst is not None and not (math.isfinite(burst) and burst > 0):
            raise ValueError(f"OVS burst must be a positive number of bits, got {burst!r}")
        self.db, self.port, self.mode, self.bridge = db, port, mode, bridge
        self.burst = burst
        self.ofctl_target = ofctl_target or bridge
        self.netns = netns
        self._lock = threading.Lock()
        self._closed = False
        self._installed = False
        #: Why the port's configuration is no longer ours to change (None: it is); see ``_foreign``.
        self._displaced: str | None = None
        self._policing: tuple[int, int] = (0, 0)  # (kbit/s, burst kbit) last set in policing mode
        self._be = _Ovsdb(db)
        try:
            if not self._be.has_port(port):
                raise ValueError(f"no OVS port '{port}' in database {db}")
            self._prev_policing = (self._be.get_interface(port, "ingress_policing_rate"),
                                   self._be.get_interface(port, "ingress_policing_burst"))
            if mode == "policing" and not kernel_has_police():
                # OVS (netdev-linux, also under the userspace datapath) enforces ingress policing
                # with a kernel tc police action; without it OVS only logs a warning and the
                # traffic passes unshaped, so refuse instead of pretending.
                raise RuntimeError(
                    "OVS ingress policing needs the kernel's tc police action "
                    "(CONFIG_NET_ACT_POLICE), which this kernel lacks; use mode 'htb' or 'meter'"
                )
            if mode == "htb" and self._be.get_htb(port) is not None:
                self._reclaim_leftover(port)
            self._ofport: int | None = None
            if mode == "meter":
                self._ofport = self._be.get_interface(port, "ofport")
                if self._ofport < 0:
                    raise ValueError(f"OVS port '{port}' has no OpenFlow port number (ofport {self._ofport})")
                if self._meter_rate() is not None:
                    self._reclaim_meter()
        except BaseException:
            self._be.close()
            raise

    def _reclaim_leftover(self, port: str) -> None:
        """Remove a QoS that a scidmz process on this host left behind when it died (SIGKILL, power
        loss); refuse any other QoS: a live scidmz's, another host's, or one scidmz did not make."""
        ext = self._be.htb_owner(port)
        if ext.get(EXT_ID) != "scidmz":
            raise ValueError(f"OVS port '{port}' already has a QoS; refusing to replace it")
        who = _live_owner(ext.get(EXT_PID, ""), ext.get(EXT_HOST), ext.get(EXT_START))
        if who:
            raise ValueError(f"OVS port '{port}' already has a QoS made by {who}; refusing to replace it "
                             f"(remove it with: ovs-vsctl clear Port {port} qos, once that run is gone)")
        self._be.clear_htb(port)

    def _reclaim_meter(self) -> None:
        """The meter-mode twin of ``_reclaim_leftover``: the bridge already has a meter with our id."""
        pid, host, start = self._be.meter_owner(str(self.bridge))
        if not pid:
            raise ValueError(f"OVS bridge '{self.bridge}' already has meter {_METER_ID} and scidmz did not "
                             "record making it; refusing to replace it")
        who = _live_owner(pid, host, start)
        if who:
            raise ValueError(f"OVS bridge '{self.bridge}' already has a meter made by {who}; refusing to replace "
                             f"it (remove it with: ovs-ofctl del-meter {self.ofctl_target} meter={_METER_ID}, "
                             "once that run is gone)")
        self._remove_meter()

    # -- OpenFlow (meter mode) -------------------------------------------------------------------
    def _ofctl(self, *args: str) -> str:
        cmd = [which("ovs-ofctl"), "-O", "OpenFlow13", args[0], str(self.ofctl_target), *args[1:]]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise ActuatorError(f"ovs-ofctl {args[0]} failed: {r.stderr.strip()[-300:]}")
        return r.stdout

    def _meter_rate(self) -> int | None:
        """Our meter's rate in kbit/s, None when the bridge has no meter with our id."""
        m = re.search(r"rate=(\d+)", self._ofctl("dump-meters", f"meter={_METER_ID}"))
        return None if m is None else int(m.group(1))

    def _remove_meter(self) -> None:
        self._ofctl("del-flows", f"cookie={_COOKIE:#x}/-1")
        self._ofctl("del-meter", f"meter={_METER_ID}")
        self._be.clear_meter_owner(str(self.bridge))

    def _meter_spec(self, kbps: int) -> str:
        burst = self._burst_kbit(kbps)
        return f"meter={_METER_ID},kbps,burst,band=type=drop,rate={kbps},burst_size={burst}"

    # -- rate arithmetic ----------------------------------------------------------------------------
    def _burst_kbit(self, kbps: int) -> int:
        if self.burst is not None:
            return max(1, int(round(self.burst / 1000.0)))
        # Policers (meter, ingress policing) drop instead of queueing, and TCP then only gets
        # near the rate when the bucket holds a good fraction of a second of traffic
        # (userspace meter, one TCP flow: 0.05 s of burst gave 24% of 50 Mbit/s; 0.25-1 s
        # gave 92-107% from 5 to 100 Mbit/s, noisily).
        return max(int(math.ceil(kbps * 0.5)), int(math.ceil(2 * 1514 * 8 / 1000)))

    # -- RateActuator -------------------------------------------------------------------------------
    def set_rate(self, bps: float) -> None:
        """Apply ``bps`` (0 -> ``MIN_RATE``) on the port; ValueError on NaN/inf/negative."""
        rate = _check_rate(bps)
        kbps = max(1, int(round(rate / 1000.0)))
        with self._lock:
            if self._closed:
                raise RuntimeError(f"OvsQosActuator on '{self.port}' is closed")
            try:
                self._apply(rate, kbps)
            except (ActuatorError, ValueError):  # ForeignConfigError is an ActuatorError
                raise
            except Exception as exc:  # ovsdbapp raises its own exception types
                raise ActuatorError(f"OVS refused rate {rate:.0f} bit/s on '{self.port}': {exc}") from None
            self._installed = True

    def _foreign(self) -> str | None:
        """What on the port or bridge is no longer ours to change (None: nothing). Told by the mark
        scidmz put on what it made: the QoS row's and the bridge's ``external_ids`` naming this
        process, our meter id present; for policing, which has no row of its own, the values we last
        set (before the first, the ones found at start)."""
        where = f"OVS port '{self.port}'"
        if self.mode == "htb":
            ext = self._be.htb_owner(self.port) if self._be.has_qos(self.port) else None
            if not self._installed:
                return None if ext is None else f"{where} got a QoS that scidmz did not make"
            if ext is None:
                return f"the scidmz QoS on {where} was removed"
            if not _is_mine(ext, EXT_PID, EXT_HOST, EXT_START):
                return f"the scidmz QoS on {where} was replaced by a QoS that this scidmz did not make"
            return None
        if self.mode == "policing":
            now = (self._be.get_interface(self.port, "ingress_policing_rate"),
                   self._be.get_interface(self.port, "ingress_policing_burst"))
            want = self._policing if self._installed else self._prev_policing
            return None if now == want else (f"the ingress policing of {where} was set to {now[0]} kbit/s "
                                             f"(burst {now[1]} kbit) by someone else")
        pid, host, start = self._be.meter_owner(str(self.bridge))
        mine = _is_mine({METER_PID: pid, METER_HOST: host or "", METER_START: start or ""},
                        METER_PID, METER_HOST, METER_START)
        there = self._meter_rate() is not None
        if not self._installed:
            return None if not there else f"OVS bridge '{self.bridge}' got a meter {_METER_ID} that scidmz did not make"
        if not there or not mine:
            return f"the scidmz meter {_METER_ID} on OVS bridge '{self.bridge}' was removed or taken over"
        return None

    def _check_ours(self) -> None:
        """ForeignConfigError (sticky: nothing on the switch is changed again) if ``_foreign`` finds something."""
        if self._displaced is None:
            why = self._foreign()
            if why is not None:
                self._displaced = why + "; scidmz leaves it as it is and changes nothing there until restarted"
                log.warning("%s", self._displaced)
        if self._displaced is not None:
            raise ForeignConfigError(self._displaced)

    def _apply(self, rate: float, kbps: int) -> None:
        self._check_ours()
        if self.mode == "policing":
            self._policing = (kbps, self._burst_kbit(kbps))
            self._be.set_interface(self.port, ingress_policing_rate=kbps,
                                   ingress_policing_burst=self._policing[1])
        elif self.mode == "htb":
            if self._installed:
                self._be.set_htb(self.port, int(round(rate)))
            else:
                self._be.create_htb(self.port, int(round(rate)))
        else:
            if self._installed:
                self._ofctl("mod-meter", self._meter_spec(kbps))
            else:
                # The owner first: a kill between the two leaves a record without a meter
                # (harmless), never a meter nobody can tell is ours.
                self._be.set_meter_owner(str(self.bridge))
                self._ofctl("add-meter", self._meter_spec(kbps))
                self._ofctl("add-flow", f"cookie={_COOKIE:#x},priority=100,in_port={self._ofport},"
                                f"actions=meter:{_METER_ID},NORMAL")

    def current_rate(self) -> float:
        """The rate OVS holds for the port (bit/s), read from OVSDB or the switch's meter table."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"OvsQosActuator on '{self.port}' is closed")
            if self.mode == "policing":
                kbps = self._be.get_interface(self.port, "ingress_policing_rate")
                if kbps == 0:
                    raise RuntimeError(f"no ingress policing is set on OVS port '{self.port}'")
                return kbps * 1000.0
            if self.mode == "htb":
                rate = self._be.get_htb(self.port)
                if rate is None:
                    raise RuntimeError(f"no QoS is set on OVS port '{self.port}'")
                return float(rate)
            kbps = self._meter_rate()
            if kbps is None:
                raise RuntimeError(f"no scidmz meter on bridge '{self.bridge}'")
            return kbps * 1000.0

    def close(self) -> None:
        """Restore the port: previous policing values, or remove our QoS/Queue rows or meter and flow."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._installed and self._still_ours():
                    if self.mode == "policing":
                        rate, burst = self._prev_policing
                        self._be.set_interface(self.port, ingress_policing_rate=rate,
                                               ingress_policing_burst=burst)
                    elif self.mode == "htb":
                        self._be.clear_htb(self.port, mine=True)
                    else:
                        self._remove_meter()
                elif self._installed:
                    self._close_displaced()
            finally:
                self._be.close()

    def _close_displaced(self) -> None:
        """At close, once someone else's configuration stands in ours' place: remove only what is
        still ours and in nobody's way (our QoS and Queue rows no port uses any more, our flow by its
        cookie, the bridge's record if it names this process); the admin's QoS, meter or policing
        values stay as they are. A row someone uses (the database refuses to destroy it) stays too."""
        try:
            if self.mode == "htb":
                self._be.drop_unused_mine()
            elif self.mode == "meter":
                self._ofctl("del-flows", f"cookie={_COOKIE:#x}/-1")
                pid, host, start = self._be.meter_owner(str(self.bridge))
                if _is_mine({METER_PID: pid, METER_HOST: host or "", METER_START: start or ""},
                            METER_PID, METER_HOST, METER_START):
                    self._be.clear_meter_owner(str(self.bridge))
        except Exception as exc:  # ovsdbapp and ovs-ofctl raise several types; close must finish
            log.warning("left scidmz's own rows on OVS port '%s': %s: %s", self.port, type(exc).__name__, exc)

    def _still_ours(self) -> bool:
        """Whether close may undo what we made (someone else's configuration is left as it is)."""
        try:
            self._check_ours()
        except ForeignConfigError:
            return False
        return True

    def __enter__(self) -> OvsQosActuator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"OvsQosActuator(port={self.port!r}, mode={self.mode!r})"


_METER_ID = 0x5C1D
_COOKIE = 0x5C1D


def _live_owner(pid: str, host: str | None, start: str | None = None) -> str:
    """Who holds a scidmz row or meter, or "" when it is a leftover of a dead scidmz of this host
    (``records.recorded_owner_runs``, the one owner check: its pid is gone, or now names a process
    started at another time; rows made before the start time was recorded go by the pid alone)."""
    try:
        # A start that is not digits ("None": the maker could not read its own) goes by the pid alone;
        # a row without a host names no host we can check, so it counts as another host's.
        runs = recorded_owner_runs(int(pid) if pid.isdigit() else pid,
                                   int(start) if start is not None and start.isdigit() else None,
                                   "" if host is None else host)
    except RecordError:
        runs = True  # a row scidmz's own code did not write this way: never taken for a leftover
    if not runs:
        return ""
    return f"scidmz process {pid} on {host}" if pid.isdigit() else "an older scidmz"


def _check_rate(bps: float) -> float:
    return check_rate(bps, "OVS", 2**32 * 1000.0, "what OVS's kbit/s fields hold")
