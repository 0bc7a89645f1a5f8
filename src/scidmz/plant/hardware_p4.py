"""``P4Switch``: the MLC paper's telemetry switch on optical taps, set up from command-line options.

The hardware plant's P4 side (set-up 3 of docs/deployment.md): the
telemetry program (``telemetry_p4/v1model``) on a P4Runtime switch, read by
``telemetry.p4.p4runtime.P4RuntimeView``. Built in two steps so that bad
input never changes the switch:

* ``P4Switch(...)`` checks every option and touches nothing: the address
  (``p4:HOST:PORT``, or bare ``HOST:PORT``), the pipeline folder (p4c's BMv2
  JSON and P4Info), BMv2's Thrift address, the tap ports and the prefixes
  (IPv4 and IPv6, comma-separated text or a list).
* ``open()`` connects (a switch that does not answer, or a Thrift port that
  is not BMv2's, is one ``ValueError`` line before anything changes), takes
  the switch's owner record (``actuators.owner``: entries a dead scidmz left
  are removed, entries a live scidmz or nobody recorded are refused), loads
  the pipeline if asked, and installs the ``tap_port`` entries and the class
  entries.

``close()`` removes the entries it installed and gives the record up. Stop
the switch (or load a pipeline) to drop a program; a scidmz never unloads one.
"""

from __future__ import annotations

from typing import Any

__all__ = ["P4Switch", "parse_tap_ports"]


def _host_port(text: str, what: str, example: str) -> str:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{what} {text!r}: expected HOST:PORT, e.g. {example}")
    return text


def parse_tap_ports(value: Any) -> dict[int, int]:
    """"INGRESS_PORT,EGRESS_PORT" (or a pair, or a {port: tap} map) as {switch port: tap}."""
    from ..telemetry import constants as C

    if isinstance(value, dict):
        return {int(k): int(v) for k, v in value.items()}
    items = str(value).split(",") if isinstance(value, str | int) else list(value)
    try:
        ports = [int(str(x).strip()) for x in items]
    except ValueError:
        ports = []
    if len(ports) != 2 or ports[0] == ports[1] or min(ports) < 0:
        raise ValueError(f"tap ports {value!r}: expected INGRESS_PORT,EGRESS_PORT, two different switch "
                         "ports, e.g. 1,2 (the ports the ingress and the egress tap enter)")
    return {ports[0]: C.TAP_INGRESS, ports[1]: C.TAP_EGRESS}


def _prefix_text(value: Any, default: str) -> list[str]:
    """Prefixes as the views take them, checked now (one line naming the bad one)."""
    from ..telemetry.view import parse_prefixes

    return [str(n) for n in parse_prefixes(value if value else default)]


class P4Switch:
    """The P4 telemetry switch of the hardware plant (module docstring)."""

    def __init__(self, telemetry: str, *, pipeline: str | None = None, thrift: str | None = None,
                 tap_ports: Any = "1,2", p4info: str | None = None, dtn_prefixes: Any = None,
                 remote_prefixes: Any = None, install: bool = True, options: dict[str, Any] | None = None) -> None:
        from ..telemetry import constants as C
        from ..telemetry.p4.p4runtime import pipeline_files

        address = telemetry[len("p4:"):] if telemetry.startswith("p4:") else telemetry
        self.address = _host_port(address, "telemetry address (p4:HOST:PORT)", "10.0.0.5:9559, or ebpf:LAN_IF,WAN_IF")
        self.files = pipeline_files(pipeline) if pipeline is not None else None
        if self.files is not None and p4info is not None:
            raise ValueError("--p4-pipeline brings its P4Info; do not give p4info= as well")
        self.p4info = str(self.files[1]) if self.files is not None else p4info
        self.thrift = _host_port(thrift, "--p4-thrift", "10.0.0.5:9090") if thrift is not None else None
        self.taps = parse_tap_ports(tap_ports)
        self.dtn = _prefix_text(dtn_prefixes, C.DEFAULT_DTN_PREFIX)
        self.remote = _prefix_text(remote_prefixes, C.DEFAULT_REMOTE_PREFIX)
        self.install = bool(install)
        self.options = dict(options or {})
        self.view: Any = None
        self._claim: Any = None
        self._installed = False

    def open(self) -> Any:
        """Connect, claim, load, install (module docstring); returns the view. Nothing is left open
        on failure."""
        self.view = self._connect()
        try:
            if self.install or self.files is not None:
                self._take()
            if self.files is not None:
                self.view.load_pipeline(self.files[0])
            if self.install:
                self._installed = True  # before the write: a half-done batch is removed on close
                self.view.install(self.dtn, self.remote, tap_ports=self.taps)
        except BaseException as exc:
            self.close()
            if isinstance(exc, ValueError | KeyboardInterrupt | SystemExit):
                raise
            raise RuntimeError(f"setting up the telemetry switch at {self.address} failed: {_one_line(exc)}") from None
        return self.view

    def _connect(self) -> Any:
        try:
            from ..telemetry.p4.p4runtime import P4RuntimeView
        except ImportError as exc:
            raise RuntimeError(f"the P4Runtime telemetry adapter is not available: {exc}") from None
        kw = dict(self.options)
        if self.p4info is not None:
            kw["p4info"] = self.p4info
        if self.thrift is not None:  # probed (BMv2's answer) before anything changes
            kw.update(registers="thrift", thrift_address=self.thrift)
        try:
            return P4RuntimeView(self.address, **kw)
        except (ValueError, FileNotFoundError):
            raise
        except ConnectionError as exc:  # no answer, no arbitration, not primary, no Thrift server
            raise ValueError(f"the telemetry switch does not answer: {_one_line(exc)}") from None
        except Exception as exc:  # grpc and the adapter raise several types for "not there"
            raise RuntimeError(f"cannot use the P4Runtime switch at {self.address}: {_one_line(exc)}") from None

    def _take(self) -> None:
        """The switch's owner record; a dead owner's entries go, others' are refused."""
        from ..actuators.owner import claim

        self._claim = claim(f"p4-{self.address}", f"the telemetry entries on the switch at {self.address}")
        left = self.view.installed_entries()
        if left and self._claim.reclaimed is None:
            raise ValueError(f"the switch at {self.address} already has {len(left)} telemetry entries that no "
                             "live or dead scidmz record accounts for (another controller, or entries made by "
                             "hand); remove them, restart the switch, or run with --plant-opt install=false")
        if self._claim.reclaimed is not None:
            self.view.remove_installed(left)

    def close(self) -> None:
        """Remove the entries this instance installed, disconnect, give up the owner record."""
        view, self.view = self.view, None
        try:
            if view is not None and self._installed:
                try:
                    view.remove_installed()
                except Exception:  # a switch gone away took its entries with it
                    pass
        finally:
            try:
                if view is not None:
                    view.close()
            finally:
                if self._claim is not None:
                    self._claim.release()
                    self._claim = None


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")

