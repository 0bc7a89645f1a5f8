"""The bottleneck disciplines by name: one line per discipline, its package imported only when used.

Every discipline is one package, ``scidmz.disciplines.<name>``, with the same files:

- ``config.py``  its configuration dataclass (a :class:`~scidmz.disciplines.base.BottleneckDiscipline`
  whose ``kind`` is the name) and the layout of its core's arrays;
- ``core.py``    the per-packet numba decision core every realisation calls;
- ``fluid.py``   the fluid plant's hook (:mod:`scidmz.disciplines.base` documents the contract):
  ``FLUID_ID``, ``layout``, ``init``, ``set_weights``, ``state`` and the numba ``admit``;
- ``stage.py``   ``Decider``, the NFQUEUE data-path stage's per-packet verdicts;
- ``p4/``        its P4 program and table generator, ``p4check.py`` its BMv2 cross-check (if it has one);
  ``p4/bottleneck.py`` the control plane of its program for a switch at the bottleneck (if it has one).

The fluid id is the number the fluid kernel dispatches on: numba calls only
functions it sees when it compiles, so ``plant/fluid/kernel.py``'s
``_discipline_admit`` holds one ``if`` per discipline on these ids. Adding a
discipline: its package, one line here, that ``if`` (and its import) in the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class DisciplineEntry:
    """One registered discipline: its name (= its config's ``kind``), fluid id and config class name."""

    name: str
    fluid_id: int
    config: str

    @property
    def package(self) -> str:
        return f"scidmz.disciplines.{self.name}"

    def config_class(self) -> type:
        """The configuration dataclass (imports ``config.py`` only: no numba)."""
        return getattr(import_module(f"{self.package}.config"), self.config)

    def fluid(self) -> ModuleType:
        """The fluid plant's hook module (imports numba)."""
        return import_module(f"{self.package}.fluid")

    def decider(self) -> type:
        """The NFQUEUE stage's decider class."""
        return import_module(f"{self.package}.stage").Decider

    def p4_bottleneck(self) -> ModuleType:
        """The control plane of its P4 program for a switch at the bottleneck (``p4/bottleneck.py``:
        ``PROGRAM``, ``CLASS``, ``WEIGHT``, ``check``, ``weight_values``, ``initial_weights``, ``params``);
        a one-line ValueError for a discipline without one."""
        try:
            return import_module(f"{self.package}.p4.bottleneck")
        except ModuleNotFoundError:
            raise ValueError(f"discipline {self.name!r} has no P4 bottleneck program") from None


_ENTRIES = (
    DisciplineEntry("droptail", 0, "DropTailConfig"),
    DisciplineEntry("abc", 1, "ABCConfig"),
    DisciplineEntry("ffs", 2, "FFSConfig"),
)
DISCIPLINES: dict[str, DisciplineEntry] = {e.name: e for e in _ENTRIES}


def names() -> tuple[str, ...]:
    """The registered disciplines' names."""
    return tuple(DISCIPLINES)


def get(name: str) -> DisciplineEntry:
    """The discipline called ``name`` (ValueError naming the known ones otherwise)."""
    try:
        return DISCIPLINES[name]
    except KeyError:
        raise ValueError(f"unknown bottleneck discipline {name!r} (choose from {', '.join(DISCIPLINES)})") from None


def for_config(config: Any) -> DisciplineEntry:
    """The discipline a configuration object belongs to (by its ``kind``; one-line ValueError otherwise)."""
    kind = getattr(config, "kind", None)
    entry = DISCIPLINES.get(kind) if isinstance(kind, str) else None
    if entry is None or not isinstance(config, entry.config_class()):
        known = ", ".join(e.config for e in _ENTRIES)
        raise ValueError(f"unknown bottleneck discipline {config!r}: give one of {known}")
    return entry


def fluid_id(name: str) -> int:
    """The fluid kernel's id of discipline ``name``."""
    return get(name).fluid_id


#: A package's files that the fluid kernel does not compile in.
_NOT_FLUID = ("stage.py", "p4check.py")


def fluid_sources() -> list[Path]:
    """The files the fluid kernel compiles in: this registry (the ids) and every registered package's
    modules but its stage and P4 check. The kernel's numba cache and the fluid model's fingerprint
    hash them, so an edited core recompiles the kernel and changes the model's version."""
    here = Path(__file__).resolve().parent
    out = [here / "registry.py"]
    for name in DISCIPLINES:
        out += sorted(f for f in (here / name).glob("*.py") if f.name not in _NOT_FLUID)
    return out
