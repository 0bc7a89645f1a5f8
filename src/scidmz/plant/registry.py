"""Every plant by name: ``register_plant(name, cls, ...)``, ``make_plant(name, scenario, ...)``, ``PlantSpec``.

A plant module registers its backend with one line at its end, declaring what the
rest of the package may know about it: whether it runs in real time (one instance,
its trials one after another), the command-line plant flags it takes, the version
of a simulated plant's model and what its numbers depend on beyond the scenario.
Its options are its constructor's keyword parameters (signature inspection). No
other module keeps a list of plants or branches on a plant's name.

A ``PlantSpec`` is a plant name with its options, checked once (``plant_spec``),
as Mininet's ``customClass`` turns a name into a factory once; ``make_plant``
builds it. The built-ins are listed as module paths, so this module imports
nothing beyond the standard library (``scidmz --help`` stays instant).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..scenario import Scenario

#: What ``make_plant`` returns: a ``plant.base.Plant`` (not imported here: base imports this module).
Plant = Any

__all__ = ["register_plant", "make_plant", "plant_spec", "PlantSpec", "plant_entry", "plant_names",
           "check_plant_options", "check_batch_flows", "PLANT_KINDS", "DEFAULT_PLANT"]

#: The plant a command runs without --plant: the batched flow-level simulator.
DEFAULT_PLANT = "fluid"


@dataclass(frozen=True)
class _Backend:
    """A plant's registry entry: what the rest of the package may know about it, declared once."""

    cls: Callable[..., Any]
    max_batch: int | None
    cli: tuple[str, ...] = ()
    model_version: Callable[[], str] | None = None
    fingerprint: Callable[[Scenario], dict[str, str]] | None = None
    replays: bool = True

    @property
    def realtime(self) -> bool:
        """Runs in real time (one instance at a time, its trials one after another)."""
        return self.max_batch is not None

    def options(self) -> tuple[str, ...]:
        """The constructor's keyword options (beyond ``scenario`` and ``batch``), by signature inspection."""
        import inspect

        sig = inspect.signature(self.cls)
        return tuple(n for n, p in sig.parameters.items()
                     if n not in ("scenario", "batch") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))


_REGISTRY: dict[str, _Backend] = {}

#: Where each built-in backend lives; importing the module registers it. This
#: table names modules, not classes, so ``scidmz --help`` imports no backend.
_BUILTIN_MODULES = {
    "fluid": "scidmz.plant.fluid.plant",
    "netns": "scidmz.plant.netns.plant",
    "hardware": "scidmz.plant.hardware",
}
PLANT_KINDS = tuple(_BUILTIN_MODULES)
#: What a built-in declares beyond its registration line, as the policy registry's built-in table does
#: (a registration that says otherwise wins). The hardware plant serves a live network: it plays no
#: scenario, so no trial of it can be repeated for another policy. (Ours, declared here rather than in
#: ``plant/hardware.py``'s registration line only because that file was being changed elsewhere; the line
#: can move there, ``register_plant(..., replays=False)``.)


def register_plant(name: str, cls: Callable[..., Any], max_batch: int | None = None, *, realtime: bool = False,
                   cli: Sequence[str] = (), model_version: Callable[[], str] | None = None,
                   fingerprint: Callable[[Scenario], dict[str, str]] | None = None,
                   replays: bool | None = None) -> None:
    """Make ``cls(scenario, [batch=B,] **options)`` available as ``make_plant(name, ...)``: the plant's one
    registry line, declaring everything the commands and the evaluation ask of a plant.

    ``realtime``: the plant runs in real time, one instance (``max_batch`` 1 unless given); its
    constructor takes no ``batch``, and its trials run one after another. ``cli``: the command-line
    plant flags it takes (``--telemetry``, ``--dev``, ...: their option names; ``--plant-opt`` reaches
    every option). ``model_version()``: the version of a simulated plant's model, recorded with its
    results. ``fingerprint(scenario)``: what its numbers depend on beyond the scenario (a resumed
    leaderboard refuses to mix two); default ``{name: model_version()}``, or none (then the kernel release).
    ``replays``: the plant plays the scenario's traffic from its seed, so trial i can be run again for
    every policy (paired trials: the leaderboard's); default True, False for a plant on a live network.
    """
    if realtime and max_batch is None:
        max_batch = 1
    if fingerprint is None and model_version is not None:
        fingerprint = _version_fingerprint(name, model_version)
    if replays is None:
        replays = True
    _REGISTRY[name] = _Backend(cls, max_batch, tuple(cli), model_version, fingerprint, bool(replays))


def _version_fingerprint(name: str, version: Callable[[], str]) -> Callable[[Scenario], dict[str, str]]:
    def fingerprint(_scenario: Scenario) -> dict[str, str]:
        return {name: version()}

    return fingerprint


def plant_names() -> tuple[str, ...]:
    """Built-in and registered plant names (built-ins first); imports no backend."""
    return tuple(dict.fromkeys([*_BUILTIN_MODULES, *_REGISTRY]))


def plant_entry(name: str | PlantSpec) -> _Backend:
    """The registry entry of plant ``name`` (imports a built-in's module); one-line ValueError if unknown."""
    import importlib

    name = str(name)
    if name not in _REGISTRY and name in _BUILTIN_MODULES:
        importlib.import_module(_BUILTIN_MODULES[name])
    backend = _REGISTRY.get(name)
    if backend is None:
        raise ValueError(f"unknown plant '{name}' (choose from {', '.join(plant_names())})")
    return backend


@dataclass(frozen=True)
class PlantSpec:
    """A plant by name with its options, checked when made (the name, and the options by signature
    inspection): what ``--plant`` and its flags become, once, as Mininet's ``customClass`` turns a name
    into a factory once. ``make`` builds the plant; one-line ``ValueError`` for a bad name or option."""

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", dict(self.options))
        check_plant_options(self.name, 1, self.options)

    def __str__(self) -> str:
        return self.name

    @property
    def entry(self) -> _Backend:
        return plant_entry(self.name)

    @property
    def realtime(self) -> bool:
        return self.entry.realtime

    @property
    def max_batch(self) -> int | None:
        return self.entry.max_batch

    @property
    def replays(self) -> bool:
        return self.entry.replays

    def make(self, scenario: Scenario, batch: int = 1) -> Plant:
        """Build the plant for ``scenario`` with ``batch`` instances (one-line error beyond ``max_batch``)."""
        backend = self.entry
        if backend.max_batch is None:
            check_batch_flows(scenario, batch)
            return backend.cls(scenario, batch=batch, **self.options)
        if batch > backend.max_batch:
            raise ValueError(f"the {self.name} plant runs in real time and supports batch<={backend.max_batch} only")
        return backend.cls(scenario, **self.options)


def plant_spec(plant: str | PlantSpec, options: Mapping[str, Any] | None = None) -> PlantSpec:
    """A plant name (or spec) with ``options`` (on top of a spec's) as a ``PlantSpec``; a spec without
    new options comes back as it is (it was checked when made)."""
    if isinstance(plant, PlantSpec):
        return PlantSpec(plant.name, {**plant.options, **options}) if options else plant
    return PlantSpec(str(plant), dict(options or {}))


def make_plant(kind: str | PlantSpec, scenario: Scenario, batch: int = 1, **kwargs: Any) -> Plant:
    """Build a plant backend by name (or ``PlantSpec``, whose options ``kwargs`` extend); a backend module is
    imported only when asked for.

    Unknown names and unknown options are one-line ``ValueError`` s, never a
    ``TypeError`` from deep inside a constructor.
    """
    return plant_spec(kind, kwargs).make(scenario, batch)


def check_batch_flows(scenario: Scenario, batch: int) -> None:
    """Refuse a batched plant larger than ``limits.MAX_BATCH_FLOWS`` flow-instances, before it allocates
    (``--trials 1000000000`` once reached 15 GB in 30 s before anything refused it)."""
    from ..limits import MAX_BATCH_FLOWS

    n = int(batch) * max(1, scenario.flow_count)
    if n > MAX_BATCH_FLOWS:
        raise ValueError(f"{batch} plant instances x {scenario.flow_count} flows of scenario '{scenario.name}' = "
                         f"{n:,} flows in one batched plant; at most {MAX_BATCH_FLOWS:,} (fewer trials, population "
                         "or episodes)")


def check_plant_options(kind: str | PlantSpec, batch: int = 1, options: Mapping[str, Any] | None = None) -> _Backend:
    """Everything ``make_plant`` checks before building: the name, the batch, the options
    (by signature inspection). One-line ``ValueError``; imports the backend's module."""
    if isinstance(kind, PlantSpec):
        options = {**kind.options, **(options or {})}
    backend = plant_entry(kind)
    if backend.max_batch is not None and batch > backend.max_batch:
        raise ValueError(f"the {kind} plant runs in real time and supports batch<={backend.max_batch} only")
    opts = backend.options()
    unknown = [k for k in (options or {}) if k not in opts]
    if unknown:
        raise ValueError(f"plant '{kind}' has no option '{unknown[0]}' (options: {', '.join(opts)})")
    return backend
