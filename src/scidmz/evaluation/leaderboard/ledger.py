"""``ledger.jsonl``: one line per finished trial, appended and fsynced, so a run resumes where it stopped.

The first line is the header: what the trials depend on. ``--resume`` compares it
with this run's and refuses (one line, exit 2) a ledger whose scenario, plant, plant
model, code, plan or policies differ, naming the first difference::

    {"kind": "header", "format_version": 1,
     "scenario": {"name", "fingerprint" (regime.fingerprint), "sha256" (of its full to_dict())},
     "plant": "fluid", "plant_model": {...}   (fluid: the model fingerprint; netns: kernel
                                                release + the testbed description's hash),
     "code": {"tree": git tree of src/ at HEAD, "dirty": bool, "sha256": the package's sources},
     "plan": LeaderboardPlan.to_dict(),
     "targets": {unit: [sha256 (16 hex digits) of trial i's target signal, ...]}
                (trialunits.target_hashes; never allowed to drift: a trial that tracks another
                target is another trial),
     "policies": {name: {"kind": ..., "files": {option: sha256}}}}

Then one line per finished unit (trial kind, policy, trial, re-run)::

    {"kind": "unit", "unit": "mrae"|"fct"|"short", "policy", "trial", "seed", "metrics": {...},
     "starved_periods", "starved_by": {symptom: periods}, "periods", "wall_s", "finished_at",
     "rerun": n, "validity": {signal: value}}

``rerun`` (absent: 0) counts the runs of an invalid trial (``validity``): a re-run is
appended, never written over the first, so the ledger keeps every run; ``validity``
holds the unit's machine signals where the plant records them (a real-time plant).
Ledgers written before either field read as they always did.

A resume onto a ledger whose code or kernel build differs is refused like any other
difference, unless ``allow_drift`` (``--allow-drift``, ours): a run of many hours spans
sessions, and the machine's kernel build or our code may change between them. Then a drift
line records what the later trials ran on, before the first of them::

    {"kind": "drift", "code": {...}, "kernel": release, "was": {"code", "kernel"},
     "units_before": n, "at": time}

Nothing else may drift (scenario, plan, policies, the testbed's description), and
``results.json`` lists every drift, so a reader sees that the trials span them.

The header is written with the first finished unit. Each line is written with ONE ``os.write`` on an ``O_APPEND`` descriptor followed by
``os.fsync``: a crash leaves at most one partial last line, which a resume cuts off
(and counts). A unit is written only once it finished: an interrupted trial leaves
no line.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import time
from collections.abc import Container, Mapping
from pathlib import Path
from typing import Any

__all__ = ["Ledger", "Unit", "parse_ledger", "parse_ledger_lines", "LEDGER_NAME", "LEDGER_FORMAT", "code_identity", "files_sha256",
           "first_difference"]

LEDGER_NAME = "ledger.jsonl"
LEDGER_FORMAT = 1
#: Header keys compared on --resume, in the order a difference is named.
_COMPARED = ("format_version", "scenario", "plant", "plant_model", "code", "plan", "targets", "policies")
#: What ``allow_drift`` lets a resume cross (module docstring): the code and the kernel build.
_DRIFTS = ("code", "kernel")
#: The package's source files that make up "the code" (compiled caches are not code).
_CODE_SUFFIXES = (".py", ".toml", ".j2", ".p4", ".c", ".h")


def files_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file, or of a directory's files (relative names and contents, sorted)."""
    p = Path(path)
    h = hashlib.sha256()
    if p.is_dir():
        for f in sorted(q for q in p.rglob("*") if q.is_file() and "__pycache__" not in q.parts):
            h.update(f.relative_to(p).as_posix().encode() + b"\0")
            h.update(hashlib.sha256(f.read_bytes()).digest())
    else:
        h.update(p.read_bytes())
    return h.hexdigest()


def code_identity() -> dict[str, Any]:
    """The code a run used: git's tree of src/ at HEAD, whether src/ has uncommitted changes, and
    the SHA-256 of the installed package's sources (which also catches uncommitted edits)."""
    pkg = Path(__file__).resolve().parents[2]  # .../scidmz
    h = hashlib.sha256()
    for f in sorted(q for q in pkg.rglob("*") if q.suffix in _CODE_SUFFIXES and "__pycache__" not in q.parts):
        h.update(f.relative_to(pkg).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())
    tree, dirty = "unknown", None
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD:src"], capture_output=True, text=True, timeout=5, cwd=pkg)
        if out.returncode == 0:
            tree = out.stdout.strip()
            st = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", str(pkg.parent)],
                                capture_output=True, text=True, timeout=5, cwd=pkg)
            dirty = bool(st.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return {"tree": tree, "dirty": dirty, "sha256": h.hexdigest()}


def first_difference(old: Any, new: Any, path: str = "") -> str | None:
    """The first place two JSON values differ, as ``key.sub: A in the ledger, B now``; None if equal."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for k in [*old, *(k for k in new if k not in old)]:
            d = first_difference(old.get(k), new.get(k), f"{path}.{k}" if path else str(k))
            if d is not None:
                return d
        return None
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            d = first_difference(a, b, f"{path}[{i}]")
            if d is not None:
                return d
        return None
    if old == new or (isinstance(old, float) and isinstance(new, float) and math.isclose(old, new, rel_tol=1e-12)):
        return None
    return f"{path}: {json.dumps(old)} in the ledger, {json.dumps(new)} now"


def _jsonable(header: Mapping[str, Any]) -> dict[str, Any]:
    # One JSON round trip, so an in-memory header compares equal to the one read back.
    from ..results import clean

    return json.loads(json.dumps(clean(dict(header))))


def _split(header: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A header's parts a drift may change (code, kernel build) and the rest of what it compares."""
    rest = {k: header.get(k) for k in _COMPARED if k != "code"}
    model = dict(rest.get("plant_model") or {})
    drift = {"code": header.get("code"), "kernel": model.pop("kernel", None)}
    rest["plant_model"] = model
    return drift, rest


def _drift_check(old: Mapping[str, Any], drifts: list[dict[str, Any]], head: Mapping[str, Any], path: Path,
                 allow_drift: bool) -> dict[str, Any] | None:
    """None if ``head`` is the ledger's run as it last ran; the drift line to record if only the
    code or kernel differ and ``allow_drift``; else a one-line ValueError naming the difference."""
    was, rest_old = _split(old)
    if drifts:
        was = {k: drifts[-1].get(k) for k in _DRIFTS}
    now, rest_new = _split(head)
    diff = first_difference(rest_old, rest_new)
    if diff is not None:
        raise ValueError(f"--resume: {path} is from another run ({diff}); use another --out")
    diff = first_difference(was, now)
    if diff is None:
        return None
    if not allow_drift:
        raise ValueError(f"--resume: {path} is from another run ({diff}); use another --out, or --allow-drift "
                         "to resume across a code or kernel change (recorded in the ledger and results)")
    return {"kind": "drift", **now, "was": was}


Unit = tuple[str, str, int]


def parse_ledger(data: bytes, where: str, planned: Container[Unit] | None = None,
                 ) -> tuple[dict[str, Any], dict[Unit, dict[str, Any]], list[dict[str, Any]]]:
    """(header, finished units by (unit, policy, trial): each one's latest run, drift lines) of a
    ledger's bytes (``parse_ledger_lines``)."""
    head, lines, drifts = parse_ledger_lines(data, where, planned)
    return head, _latest(lines), drifts


def _latest(lines: list[dict[str, Any]]) -> dict[Unit, dict[str, Any]]:
    """Each (unit, policy, trial)'s line of its highest re-run counter."""
    done: dict[Unit, dict[str, Any]] = {}
    for r in lines:
        key = _unit_key(r)
        assert key is not None  # checked when parsed
        if key not in done or _rerun(r) >= _rerun(done[key]):
            done[key] = r
    return done


def _rerun(r: Mapping[str, Any]) -> int:
    v = r.get("rerun", 0)
    return v if isinstance(v, int) and not isinstance(v, bool) else -1


def parse_ledger_lines(data: bytes, where: str, planned: Container[Unit] | None = None,
                       ) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """(header, every unit line in order, re-runs included, drift lines) of a ledger's bytes; a partial
    last line (a crash mid-write) is not a finished unit and is skipped. One-line ``ValueError``
    starting with ``where`` when the bytes are not a ledger, and when a unit line repeats a unit and
    re-run or (given ``planned``, the units this run's plan names) names one outside the plan: two runs
    writing one ledger leave such lines, and summing them would report wrong numbers."""
    from ...fileio import parse_json

    lines = data[: data.rfind(b"\n") + 1].decode("utf-8", errors="replace").splitlines()
    if not lines:
        raise ValueError(f"{where} holds no header line; remove it and start again")
    recs = []
    for i, s in enumerate(lines, start=1):
        try:
            recs.append(parse_json(s, f"line {i}"))
        except ValueError as exc:
            raise ValueError(f"{where} {exc}; the ledger is damaged") from None
    if not isinstance(recs[0], dict) or recs[0].get("kind") != "header":
        raise ValueError(f"{where} does not start with a leaderboard header line")
    lines: list[dict[str, Any]] = []
    first: dict[tuple[str, str, int, int], int] = {}
    drifts: list[dict[str, Any]] = []
    for i, r in enumerate(recs[1:], start=2):
        if isinstance(r, dict) and r.get("kind") == "drift" and set(_DRIFTS) <= set(r):
            drifts.append(r)
            continue
        key = _unit_key(r)
        if key is None or _rerun(r) < 0:
            raise ValueError(f"{where} line {i} is not a unit line")
        run = (*key, _rerun(r))
        if run in first:
            raise ValueError(f"{where} line {i} repeats {_name(key, run[3])} (first on line {first[run]}); "
                             "two runs wrote this ledger, and a unit is never counted twice: use another --out")
        if planned is not None and key not in planned:
            raise ValueError(f"{where} line {i} holds {_name(key)}, which this run's plan does not name; "
                             "use another --out")
        first[run] = i
        lines.append(r)
    return recs[0], lines, drifts


def _unit_key(r: Any) -> Unit | None:
    if not isinstance(r, dict) or r.get("kind") != "unit" or not {"unit", "policy", "trial"} <= set(r):
        return None
    t = r["trial"]
    if isinstance(t, bool) or not isinstance(t, int) or t < 0:
        return None
    return str(r["unit"]), str(r["policy"]), t


def _name(key: Unit, rerun: int = 0) -> str:
    return f"{key[0]} trial {key[2]} of {key[1]}" + (f" (re-run {rerun})" if rerun else "")


class Ledger:
    """An open ``ledger.jsonl``: its header, the finished units, and ``append`` for new ones.

    ``Ledger.open(out_dir, header, resume)``: a new ledger (refused if one exists and
    ``resume`` is false), or an existing one resumed (refused if missing or foreign).
    """

    def __init__(self, path: Path, header: dict[str, Any], done: dict[tuple[str, str, int], dict[str, Any]],
                 cut: int, drifts: list[dict[str, Any]] | None = None, pending: dict[str, Any] | None = None,
                 lines: list[dict[str, Any]] | None = None) -> None:
        self.path = path
        self.header = header
        #: each (unit, policy, trial)'s latest run
        self.done = done
        #: every unit line in the ledger's order, re-runs included (what the results judge)
        self.lines = list(lines if lines is not None else done.values())
        #: bytes of a partial last line (a crash mid-write) cut off when resuming; 0 if none
        self.cut = cut
        #: the drift lines in the ledger (module docstring), oldest first
        self.drifts = list(drifts or [])
        # a drift this resume crosses, written before its first unit (a run that fails before
        # any trial leaves the ledger as it was)
        self._pending = pending
        self._fd: int | None = None

    @classmethod
    def open(cls, out_dir: str | os.PathLike[str], header: Mapping[str, Any], resume: bool,
             allow_drift: bool = False, planned: Container[Unit] | None = None) -> Ledger:
        """Start or resume the ledger in ``out_dir`` (module docstring); one-line ValueError otherwise.
        ``allow_drift``: a resume may cross a change of code or kernel build, recorded as a drift line.
        ``planned``: the units this run's plan names; a resumed ledger holding any other is refused.

        The ledger is opened without following a link and must be a regular file of its own
        (``fileio.open_member``); it is read and checked whole before its partial last line is cut,
        so a refused resume changes nothing."""
        from ...fileio import check_member

        path = Path(out_dir) / LEDGER_NAME
        head = _jsonable({"kind": "header", "format_version": LEDGER_FORMAT, **header})
        st = check_member(path, "--out: ledger")
        if not resume:
            if st is not None:
                raise ValueError(f"{path} exists: pass --resume to continue that run, or give another --out")
            return cls(path, head, {}, 0)
        if st is None:
            raise ValueError(f"--resume: no ledger in {Path(out_dir)} (no {LEDGER_NAME}); run without --resume first")
        fd, old, lines, end, cut, drifts = cls._read(path, planned)
        done = _latest(lines)
        try:
            pending = _drift_check(old, drifts, head, path, allow_drift)
            if cut:
                # A crash mid-write left a partial last line: not a finished unit. Cut only now,
                # with the ledger checked, through the descriptor the checks were made on.
                os.ftruncate(fd, end)
        except BaseException:
            os.close(fd)
            raise
        if pending is not None:
            pending["units_before"] = len(done)
        led = cls(path, old, done, cut, drifts, pending, lines)
        led._fd = fd
        return led

    @staticmethod
    def _read(path: Path, planned: Container[Unit] | None,
              ) -> tuple[int, dict[str, Any], list[dict[str, Any]], int, int, list[dict[str, Any]]]:
        """(open descriptor, header, unit lines, end of the last whole line, bytes after it, drifts)."""
        from ...fileio import open_member, read_fd
        from ...limits import MAX_LEDGER_BYTES

        fd = open_member(path, os.O_RDWR | os.O_APPEND, "--resume: ledger")
        try:
            data = read_fd(fd, MAX_LEDGER_BYTES, f"--resume: {path}")
            end = data.rfind(b"\n") + 1
            head, lines, drifts = parse_ledger_lines(data, f"--resume: {path}", planned)
        except BaseException:
            os.close(fd)
            raise
        return fd, head, lines, end, len(data) - end, drifts

    def _write_line(self, record: Mapping[str, Any]) -> str:
        from ...fileio import open_member
        from ..results import clean

        line = (json.dumps(clean(dict(record)), separators=(",", ":"), allow_nan=False) + "\n").encode()
        if self._fd is None:
            # A new ledger: created here (O_EXCL: one planted meanwhile is refused, not appended to),
            # never through a link (O_NOFOLLOW).
            self._fd = open_member(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, "ledger")
        # One write of the whole line, then fsync: the line is on disk before the next trial starts.
        n = os.write(self._fd, line)
        if n != len(line):
            raise OSError(f"{self.path}: short write ({n} of {len(line)} bytes)")
        os.fsync(self._fd)
        return line.decode()

    def append(self, unit: str, policy: str, trial: int, record: Mapping[str, Any], rerun: int = 0) -> dict[str, Any]:
        """Record one finished unit (``record``: seed, metrics, starved_periods, periods, wall_s, validity);
        ``rerun``: its trial's re-run counter (0: the first run, written without the field as before)."""
        rec = {"kind": "unit", "unit": unit, "policy": policy, "trial": int(trial), **record,
               **({"rerun": int(rerun)} if rerun else {}),
               "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        if self._fd is None:
            # A new ledger's header goes with its first trial (a resumed one is open already): a run
            # that fails before any trial finished (no root, a testbed that does not build) leaves
            # no ledger to refuse.
            self._write_line(self.header)
        if self._pending is not None:
            drift = {**self._pending, "at": rec["finished_at"]}
            self._write_line(drift)
            self.drifts.append(drift)
            self._pending = None
        line = self._write_line(rec)
        self.done[(unit, policy, int(trial))] = json.loads(line)
        self.lines.append(self.done[(unit, policy, int(trial))])
        return self.done[(unit, policy, int(trial))]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
