"""Self-describing results files: every ``results.json`` that ``scidmz.evaluation`` writes.

A results file is strict JSON (NaN and infinities written as ``null``) holding
a study's numbers and, under ``"meta"``, what made them, so a file found on its
own says which code, machine and model it came from (Flent's idea: the data
file is the record, plots and reports are separate passes over it).

Format (``FORMAT_VERSION`` = 1), the ``"meta"`` object:

=================  ==========================================================
``format_version``  1; bumped when a reader of the old layout would misread
``scidmz_version``  the package version (``scidmz.__version__``)
``git_commit``      HEAD's short hash, ``"<hash> + uncommitted changes in
                    src/"`` when the run used edits not in the commit, or
                    ``"unknown"`` outside a git checkout
``generated``       UTC time the run started, ``"YYYY-MM-DD HH:MM:SS UTC"``
``command``         the command line that made the file
``machine``         ``{"cpus": N, "arch": "x86_64", "python": "3.11.2"}``
``load_avg``        the 1, 5 and 15 min load averages when the run started
                    (a loaded machine slows the real-time testbed; null where
                    the OS has none)
``scenarios``       ``{name: regime.fingerprint(scenario)}`` of every scenario
                    the run's plants were built from
``plant_models``    ``{plant kind: model version}`` where a simulated plant
                    ran (``fluid``: ``plant.fluid.plant.model_fingerprint``);
                    absent for real networks only
=================  ==========================================================

Each study adds its own fields beside ``"meta"`` (the MLC study's
``"sections"``, the Jenks tests' ``"test1"`` ..., a comparison's per-policy
``"summaries"``); its report template documents them. A file written before
this format (no ``"meta"``/``format_version``) is still read by
``read_results``; its provenance is then simply missing.

Use::

    with provenance("scidmz reproduce jenks") as prov:   # records scenarios run inside
        res = run_the_study()
    write_results_json({**res, "meta": prov.meta()}, out / "results.json")
"""

from __future__ import annotations

import os
import platform
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..strictjson import clean, dumps

# ``clean`` is re-exported only for the study modules that import it from here (evaluation/mlc,
# evaluation/leaderboard); the one cleaner is scidmz.strictjson.clean.
__all__ = [
    "FORMAT_VERSION",
    "Provenance",
    "provenance",
    "note_run",
    "current_meta",
    "git_commit",
    "clean",
    "write_json",
    "write_csv",
    "read_results",
]

FORMAT_VERSION = 1

_CURRENT: ContextVar[Provenance | None] = ContextVar("scidmz_results_provenance", default=None)


def git_commit() -> str:
    """HEAD's short hash, flagged when src/ has uncommitted changes (the run used them)."""
    here = Path(__file__).resolve().parent
    src = here.parent
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=5, cwd=here)
        head = out.stdout.strip() or "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", str(src)],
                               capture_output=True, text=True, timeout=5, cwd=here).stdout.strip()
        return f"{head} + uncommitted changes in src/" if dirty else head
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _load_avg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


@dataclass
class Provenance:
    """What made a results file: started by :func:`provenance`, filled by :func:`note_run`."""

    command: str
    generated: str = field(default_factory=lambda: time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    git_commit: str = field(default_factory=git_commit)
    load_avg: list[float] | None = field(default_factory=_load_avg)
    scenarios: dict[str, dict[str, Any]] = field(default_factory=dict)
    plant_models: dict[str, str] = field(default_factory=dict)

    def note(self, scenario: Any, plant: str, model: str | None = None) -> None:
        """Record one scenario a plant of kind ``plant`` was built from (and the simulator's model)."""
        from ..regime import fingerprint

        self.scenarios.setdefault(str(scenario.name), fingerprint(scenario))
        if model is not None:
            self.plant_models[plant] = str(model)

    def meta(self, **extra: Any) -> dict[str, Any]:
        """The ``"meta"`` object of the format (module docstring), plus the study's ``extra`` fields."""
        from .._version import __version__

        out: dict[str, Any] = {
            "format_version": FORMAT_VERSION,
            "scidmz_version": __version__,
            "git_commit": self.git_commit,
            "generated": self.generated,
            "command": self.command,
            "machine": {"cpus": os.cpu_count(), "arch": platform.machine(), "python": platform.python_version()},
            "load_avg": self.load_avg,
            "scenarios": dict(self.scenarios),
        }
        if self.plant_models:
            out["plant_models"] = dict(self.plant_models)
        out.update(extra)
        return out


@contextmanager
def provenance(command: str) -> Iterator[Provenance]:
    """Start recording a run: every :func:`note_run` inside the block lands in the yielded record.

    Inside an active record (a command that calls a study that calls this) the outer record
    is yielded and ``command`` ignored: one run, one record.
    """
    outer = _CURRENT.get()
    if outer is not None:
        yield outer
        return
    prov = Provenance(command)
    token = _CURRENT.set(prov)
    try:
        yield prov
    finally:
        _CURRENT.reset(token)


def current_meta(**extra: Any) -> dict[str, Any]:
    """The active record's ``meta()`` or, outside any, a record of this moment (no scenarios)."""
    prov = _CURRENT.get() or Provenance("python (no command recorded)")
    return prov.meta(**extra)


def note_run(scenario: Any, plant: str, plant_obj: Any = None) -> None:
    """Tell the current :func:`provenance` (if any) that a ``plant`` plant ran ``scenario``.

    ``plant_obj``: the plant itself, whose ``model_version`` (the fluid plant's) is recorded;
    without it a ``fluid`` plant records ``model_fingerprint()``. The trial runners
    (``evaluation.trials``) call this; a study calls it only for plants it builds itself.
    """
    prov = _CURRENT.get()
    if prov is None:
        return
    model = getattr(plant_obj, "model_version", None)
    if model is None:
        from ..plant.base import plant_entry

        version = plant_entry(plant).model_version
        model = None if version is None else version()
    prov.note(scenario, plant, model)


def _atomic_write(path: Path, write: Callable[[str], None]) -> Path:
    from ..fileio import atomic_path

    with atomic_path(path) as tmp:
        write(str(tmp))
    return Path(path)


def write_json(payload: Any, path: str | os.PathLike[str], indent: int = 2) -> Path:
    """Write ``payload`` as strict JSON (``strictjson``), atomically: never half a file."""
    from ..state import json_default

    text = dumps(payload, indent=indent, default=json_default)
    return _atomic_write(Path(path), lambda tmp: Path(tmp).write_text(text + "\n"))


def write_csv(df: Any, path: str | os.PathLike[str]) -> Path:
    """A pandas DataFrame as CSV (no index), atomically."""
    return _atomic_write(Path(path), lambda tmp: df.to_csv(tmp, index=False))


def read_results(path: str | os.PathLike[str], what: str = "results.json") -> dict[str, Any]:
    """Read a results file; one-line errors for a missing or unreadable file or a newer format.

    ``what`` names the writer in the messages (e.g. ``"scidmz reproduce jenks"``).
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no results file {p}: run `{what}` first")
    from ..fileio import read_json_input

    try:
        doc = read_json_input(p, "results file")  # bounded size and depth, one line naming the file
    except ValueError as exc:
        why = str(exc).removeprefix(f"results file {p}: ")
        raise ValueError(f"{p}: not a readable results file ({why})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{p}: not a results file written by `{what}` (not a JSON object)")
    ver = (doc.get("meta") or {}).get("format_version", FORMAT_VERSION) if isinstance(doc.get("meta"), dict) else 1
    if not isinstance(ver, int) or ver > FORMAT_VERSION:
        raise ValueError(f"{p}: results format version {ver!r} is newer than this scidmz reads "
                         f"({FORMAT_VERSION}); upgrade scidmz")
    return doc

