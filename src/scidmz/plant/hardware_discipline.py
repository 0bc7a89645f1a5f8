"""The discipline place of the hardware plant: ABC or FFS in a P4 switch at the bottleneck (BMv2).

``control run --plant hardware --policy abc|ffs --discipline p4:HOST:PORT``:
the ABC and FFS papers' own deployment, their discipline in the switch that
forwards the bottleneck traffic (not a tap). The program is
``disciplines/<name>/p4/<name>_bottleneck.p4`` (compiled with p4c on first
use and cached, or p4c's output folder given as ``discipline_pipeline``):
frames entering port IN leave by OUT through the discipline, frames entering
OUT leave by IN untouched (``discipline_ports="IN,OUT"``, default ``0,1``);
the DTN's prefixes are aggregate / ingress 0, every other IPv4 source 1.
IPv6 frames pass undisciplined (the programs parse IPv4 only).

Built in two steps so that bad input never changes the switch:

* ``DisciplineSwitch(...)`` checks the address, the pipeline folder (p4c's
  BMv2 JSON and P4Info), the ports and the prefixes; ``open()`` (when the
  plant is built) connects -- a switch that does not answer is one line --,
  reads what it runs and takes the owner record (``actuators.owner``): the
  entries of a dead scidmz are removed; a live owner, a foreign program or
  entries no record accounts for are refused with one line.
* ``load(config)`` (the runner's ``set_discipline``, before the first period)
  loads the program and installs its tables: the ports, the prefixes, the
  weights and last the parameters that arm it. ``set_weights(w)`` (every
  period) rewrites the per-aggregate weight entries in one P4Runtime write.

``close()`` disarms the program and deletes every entry it installed; the
switch is left a wire (frames cross between paired ports 0-1, 2-3 with no
discipline), never a black hole. Weights (ours, as the NFQUEUE stage's
deciders): ABC's aggregates' reference rates R_r = the weights (section 3.2);
FFS's fairness-matrix column = the weights rescaled to its capacity.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["DisciplineSwitch", "DisciplinePlace", "DisciplinePrinter", "with_discipline_place", "program_files",
           "weight_updates", "parse_ports"]

_N_AGG = 16  # the programs' N_AGG / N_ING


def _bottlenecks() -> dict[str, Any]:
    """Every registered discipline with a bottleneck program: name -> its control plane."""
    from ..disciplines.registry import names

    out = {}
    for n in names():
        try:
            out[n] = _spec(n)
        except ValueError:
            continue
    return out


def parse_ports(value: Any) -> tuple[int, int]:
    """``"IN,OUT"`` (or a pair) as two different switch ports; one-line ``ValueError``."""
    items = str(value).split(",") if isinstance(value, str | int) else list(value)
    try:
        ports = [int(str(x).strip()) for x in items]
    except ValueError:
        ports = []
    if len(ports) != 2 or ports[0] == ports[1] or not all(0 <= p < 511 for p in ports):
        raise ValueError(f"discipline_ports {value!r}: expected IN,OUT, two different switch ports, e.g. 0,1 "
                         "(frames entering IN cross the discipline to OUT)")
    return ports[0], ports[1]


def _address(text: str) -> str:
    address = text[len("p4:"):] if text.startswith("p4:") else text
    host, sep, port = address.rpartition(":")
    if not text.startswith("p4:") or not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--discipline {text!r}: expected p4:HOST:PORT, the P4Runtime address of the switch "
                         "at the bottleneck, e.g. p4:10.0.0.6:9559")
    return address


def _ipv4_prefixes(value: Any) -> list[tuple[int, int]]:
    import ipaddress

    from ..telemetry import constants as C
    from ..telemetry.view import parse_prefixes

    out = []
    for net in parse_prefixes(value if value else C.DEFAULT_DTN_PREFIX):
        n = ipaddress.ip_network(str(net))
        if n.version != 4:
            raise ValueError(f"DTN prefix {n}: the discipline programs match IPv4 sources only")
        out.append((int(n.network_address), n.prefixlen))
    return out


def program_files(name: str, pipeline: str | None = None) -> tuple[Path, Path]:
    """(BMv2 JSON, P4Info) of discipline ``name``: p4c's output folder ``pipeline`` if given (checked to be
    that discipline's program), else ``<name>_bottleneck.p4`` compiled once and cached by its text."""
    from ..telemetry.p4.p4info import P4InfoIndex
    from ..telemetry.p4.p4runtime import pipeline_files

    spec = _spec(name)  # one line for a discipline without a bottleneck program
    files = pipeline_files(pipeline) if pipeline is not None else _compiled(name, spec.PROGRAM)
    info = P4InfoIndex.from_file(files[1])
    for t in ("port_fwd", "params", spec.CLASS[0], spec.WEIGHT[0]):
        try:
            info.table(t)
        except ValueError:
            raise ValueError(f"pipeline {files[1].parent}: not the {name} bottleneck program (no table {t}); "
                             f"compile disciplines/{name}/p4/{spec.PROGRAM}") from None
    return files


def _compiled(name: str, program: str) -> tuple[Path, Path]:
    src = Path(__file__).resolve().parents[1] / "disciplines" / name / "p4"
    prog = src / program
    text = prog.read_bytes() + b"".join(p.read_bytes() for p in sorted((src / "include").glob("*.p4")))
    p4c = shutil.which("p4c")
    if p4c is None:
        from ..disciplines.p4check import toolchain_bin

        p4c = str(toolchain_bin() / "p4c")
    key = hashlib.sha256(text + p4c.encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "scidmz" / "p4disc" / f"{name}-{key}"
    json_, info = cache / f"{prog.stem}.json", cache / f"{prog.stem}.p4info.txtpb"
    if json_.is_file() and info.is_file():
        return json_, info
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=cache.parent))  # renamed whole: nothing half-written
    try:
        out = subprocess.run([p4c, "--target", "bmv2", "--arch", "v1model", "--p4runtime-files", str(tmp / info.name),
                              "-o", str(tmp), str(prog)], capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RuntimeError(f"cannot compile {prog.name}: {exc} (put p4c on PATH: scripts/install_p4tc.sh)") from None
    if out.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        first = (out.stderr.strip().splitlines() or [str(out.returncode)])[0]
        raise RuntimeError(f"p4c failed on {prog.name}: {first}")
    try:
        tmp.rename(cache)
    except OSError:  # another process cached it first
        shutil.rmtree(tmp, ignore_errors=True)
    return json_, info


def _spec(name: str) -> Any:
    """The discipline's bottleneck-program control plane (``disciplines/<name>/p4/bottleneck.py``)."""
    from ..disciplines.registry import get

    return get(name).p4_bottleneck()


def weight_updates(name: str, config: Any, w: np.ndarray) -> list[int]:
    """The weight entries' action parameter per aggregate for weights ``w`` (bit/s, finite, > 0), as
    the discipline's ``p4/bottleneck.py`` encodes them (Q8, two's complement in 32 bits)."""
    w = np.asarray(w, dtype=np.float64).ravel()
    if w.size < 1 or w.size > _N_AGG or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise ValueError(f"discipline weights must be 1..{_N_AGG} finite rates > 0, got {w.tolist()}")
    return [v & 0xFFFFFFFF for v in _spec(name).weight_values(config, w)]


class _Tables:
    """P4Runtime updates of one program by name (its P4Info)."""

    def __init__(self, client: Any, info: Any) -> None:
        self.client, self.info, self.p = client, info, client.p

    def update(self, kind: str, table: str, keys: dict[str, tuple[int, ...]] | None, action: str | None,
               params: dict[str, int] | None = None) -> Any:
        from ..telemetry.p4.p4info import encode_uint

        p = self.p
        t = self.info.table(table)
        u = p.Update()
        u.type = p.enum_value("p4.v1.Update.Type", kind)
        te = u.entity.table_entry
        te.table_id = t.id
        if keys is None:
            te.is_default_action = True
        for kname, val in (keys or {}).items():
            fid, width, mtype = t.match_fields[kname]
            fm = te.match.add()
            fm.field_id = fid
            if mtype == "EXACT":
                fm.exact.value = encode_uint(val[0], width)
            else:
                fm.lpm.value = encode_uint(val[0], width)
                fm.lpm.prefix_len = int(val[1])
        if action is not None:
            aid = self.info.action_id(action)
            te.action.action.action_id = aid
            spec = next(a for a in self.info.p4info.actions if a.preamble.id == aid)
            for prm in spec.params:
                pp = te.action.action.params.add()
                pp.param_id = prm.id
                pp.value = encode_uint((params or {})[prm.name], prm.bitwidth)
        return u

    def entries(self, names: tuple[str, ...]) -> list[Any]:
        out = []
        for name in names:
            e = self.p.Entity()
            e.table_entry.table_id = self.info.table(name).id
            out += [x for x in self.client.read([e]) if x.table_entry.table_id == e.table_entry.table_id]
        return out

    def delete(self, entries: list[Any]) -> None:
        ups = []
        for ent in entries:
            u = self.p.Update()
            u.type = self.p.enum_value("p4.v1.Update.Type", "DELETE")
            u.entity.table_entry.CopyFrom(ent.table_entry)
            ups.append(u)
        self.client.write(ups)

    def disarm(self) -> None:
        self.client.write([self.update("MODIFY", "params", None, "NoAction")])


def _ours(info: Any) -> tuple[str, ...] | None:
    """The tables scidmz writes in a running P4Info, if it is one of the discipline programs (None: another)."""
    names = {n.rpartition(".")[2] for n in info.tables}
    if "port_fwd" not in names or "params" not in names:
        return None
    return next((("port_fwd", s.CLASS[0], s.WEIGHT[0]) for s in _bottlenecks().values()
                 if s.WEIGHT[0] in names and s.CLASS[0] in names), None)


class DisciplineSwitch:
    """The P4 switch at the bottleneck running ABC or FFS (module docstring)."""

    applies = True

    def __init__(self, discipline: str, *, pipeline: str | None = None, ports: Any = "0,1",
                 dtn_prefixes: Any = None, timeout: float = 5.0) -> None:
        from ..telemetry.p4.p4runtime import pipeline_files

        self.address = _address(str(discipline))
        self.pipeline = pipeline
        if pipeline is not None:
            pipeline_files(pipeline)  # one line if the folder lacks the JSON or the P4Info
        self.ports = parse_ports(ports)
        self.prefixes = _ipv4_prefixes(dtn_prefixes)
        self.timeout = float(timeout)
        self.name: str | None = None
        self.config: Any = None
        self.client: Any = None
        self._tables: _Tables | None = None
        self._weights: list[Any] = []
        self._claim: Any = None
        self._installed = False

    # -- when the plant is built ----------------------------------------------------------------
    def open(self) -> DisciplineSwitch:
        """Connect, read what the switch runs, take the owner record; one line if any of it is refused."""
        from ..telemetry.p4.p4runtime import P4RuntimeClient

        client = P4RuntimeClient(self.address, timeout=self.timeout)
        try:
            client.connect()
        except ConnectionError as exc:
            raise ValueError(f"the discipline switch at {self.address} does not answer: {exc}") from None
        self.client = client
        try:
            self._take()
        except BaseException:
            self.close()
            raise
        return self

    def _running(self) -> _Tables | None:
        from ..telemetry.p4.p4info import P4InfoIndex

        try:
            cfg = self.client.get_pipeline()
        except RuntimeError:  # no pipeline yet (BMv2 started with --no-p4)
            return None
        if not cfg.p4info.tables:
            return None
        info = P4InfoIndex.from_message(cfg.p4info)
        if _ours(info) is None:
            raise ValueError(f"the switch at {self.address} runs another P4 program (tables "
                             f"{', '.join(sorted(info.tables)[:3])}...); scidmz loads its discipline only on a "
                             "switch that runs none or a scidmz discipline program")
        return _Tables(self.client, info)

    def _take(self) -> None:
        from ..actuators.owner import claim

        running = self._running()
        left: list[Any] = []
        if running is not None:
            left = running.entries(_ours(running.info) or ())
        self._claim = claim(f"p4disc-{self.address}", f"the discipline entries on the switch at {self.address}")
        if left and self._claim.reclaimed is None:
            raise ValueError(f"the switch at {self.address} already has {len(left)} discipline entries that no "
                             "live or dead scidmz record accounts for (another controller, or entries made by "
                             "hand); remove them or restart the switch")
        if running is not None and self._claim.reclaimed is not None:
            running.disarm()
            running.delete(left)  # a dead scidmz's: its record said they were ours

    # -- the runner's set_discipline ------------------------------------------------------------
    def load(self, config: Any) -> None:
        """Load the program of ``config``'s discipline and install its tables (armed last)."""
        from ..disciplines.registry import for_config
        from ..fileio import read_bytes_input
        from ..telemetry.p4.p4info import P4InfoIndex

        if config is None:
            raise ValueError("the P4 discipline place needs a discipline (--policy abc or ffs)")
        name = for_config(config).name
        spec = _spec(name)
        spec.check(config)
        json_, p4info = program_files(name, self.pipeline)  # compiled before the switch changes
        info = P4InfoIndex.from_file(p4info)
        self._tables = tables = _Tables(self.client, info)
        self.name, self.config = name, config
        self._installed = True  # before the writes: a half-done install is removed on close
        self.client.set_pipeline(info.p4info, read_bytes_input(json_, "BMv2 JSON file"))
        a, b = self.ports
        ups = [tables.update("INSERT", "port_fwd", {"sm.ingress_port": (a,)}, "fwd", {"port": b, "disc": 1}),
               tables.update("INSERT", "port_fwd", {"sm.ingress_port": (b,)}, "fwd", {"port": a, "disc": 0})]
        table, key, action, param = spec.CLASS
        ups += [tables.update("INSERT", table, {key: (net, plen)}, action, {param: 0}) for net, plen in self.prefixes]
        table, key, action, param = spec.WEIGHT
        self._weights = [tables.update("INSERT", table, {key: (i,)}, action, {param: v})
                         for i, v in enumerate(weight_updates(name, config, spec.initial_weights(config)))]
        tables.client.write(ups + self._weights)
        modify = self.client.p.enum_value("p4.v1.Update.Type", "MODIFY")
        for u in self._weights:
            u.type = modify  # from now on only their values change
        tables.client.write([tables.update("MODIFY", "params", None, "set_params", spec.params(config))])

    def set_weights(self, w: np.ndarray) -> None:
        """The per-aggregate weights (bit/s) for the next period: one P4Runtime write."""
        from ..telemetry.p4.p4info import encode_uint

        if self._tables is None:
            raise RuntimeError("the P4 discipline place has no discipline loaded")
        vals = weight_updates(str(self.name), self.config, w)
        if len(vals) != len(self._weights):
            raise ValueError(f"{len(vals)} weights for {len(self._weights)} aggregates")
        for u, v in zip(self._weights, vals, strict=True):
            u.entity.table_entry.action.action.params[0].value = encode_uint(v, 32)
        self._tables.client.write(self._weights)

    def close(self) -> None:
        """Disarm the program, delete every entry it installed, disconnect, give up the owner record."""
        client, self.client = self.client, None
        try:
            if client is not None and self._installed and self._tables is not None:
                try:
                    self._tables.disarm()
                    self._tables.delete(self._tables.entries(_ours(self._tables.info) or ()))
                except Exception as exc:  # a switch gone away took its entries with it
                    print(f"scidmz control: removing the discipline entries at {self.address} failed: {exc}",
                          file=sys.stderr)
        finally:
            try:
                if client is not None:
                    client.close()
            finally:
                if self._claim is not None:
                    self._claim.release()
                    self._claim = None


class DisciplinePrinter:
    """Shadow mode's discipline place: checks the discipline and prints each period's weights; touches nothing."""

    applies = False

    def __init__(self, address: str) -> None:
        self.address = address
        self.name: str | None = None

    def open(self) -> DisciplinePrinter:
        return self

    def load(self, config: Any) -> None:
        from ..disciplines.registry import for_config

        self.name = for_config(config).name
        _spec(self.name).check(config)

    def set_weights(self, w: np.ndarray) -> None:
        vals = ", ".join(f"{x / 1e6:.3f}" for x in np.asarray(w, dtype=np.float64).ravel())
        print(f"scidmz control: SHADOW {self.address}: {self.name} weights [{vals}] Mbit/s", file=sys.stderr,
              flush=True)

    def close(self) -> None:
        """Nothing was made."""


class DisciplinePlace:
    """The discipline place as a mixin over a ``HardwarePlant`` (``DisciplinePlant``)."""

    discipline: Any

    def set_discipline(self, config: Any) -> None:
        self._check_open()  # type: ignore[attr-defined]
        self.discipline.load(config)

    def set_discipline_weights(self, weights: np.ndarray) -> None:
        w = np.asarray(weights, dtype=np.float64)
        if w.ndim == 2 and w.shape[0] != 1:
            raise ValueError(f"got weights for {w.shape[0]} instances for a batch of 1")
        self.discipline.set_weights(w.reshape(-1))

    def close(self) -> None:
        """Close the plant (shaper, telemetry, other places), then the discipline's entries."""
        try:
            super().close()  # type: ignore[misc]
        finally:
            self.discipline.close()


@functools.cache
def _with_place(base: type) -> type:
    return type(f"{base.__name__.removesuffix('Plant')}DisciplinePlant", (DisciplinePlace, base), {})


def with_discipline_place(plant: Any, place: Any) -> Any:
    """``plant`` with ``DisciplinePlace`` mixed in over ``place`` (an opened ``DisciplineSwitch`` or the
    printer): the built plant gains the place in place (its other places are open already)."""
    plant.__class__ = _with_place(type(plant))
    plant.discipline = place
    return plant
