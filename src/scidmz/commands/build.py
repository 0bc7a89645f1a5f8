"""The one assembly: command-line strings -> (scenario, policy, plant, target), checked before any work.

``build_run`` is what ``scidmz simulate`` and ``scidmz control run`` turn their
arguments into: the scenario (a name or a .toml file, with ``--set`` overrides,
duration and seed), the policy object (``--policy`` with its ``--set
policy.KEY=VALUE`` options; for the MLC its model and gains, from
``--model``/``--gains``, a registry reference ``models:/...`` or the model
shipped for the scenario; for ``pi`` its gains, ``--gains`` or those shipped), the plant by name with its options (checked against
the backend's signature, built later by ``Run.make_plant``) and the DTN target.
Every problem is one ``ValueError`` line (exit 2) before a plant exists.

``build_policies`` is the same assembly for the commands that compare several
policies (``scidmz evaluate``, ``scidmz leaderboard``): names from the registry,
each with its trained files (``policy_files``: the MLC's model and gains, pi's
gains; given, or shipped for the scenario) and ``--set policy.KEY=VALUE``
options; a policy without files needs nothing beyond its name.

``plant_choice`` is the other half every command that takes a plant shares:
the plant flags (``--plant``, ``--telemetry``, ``--dev``/``--ovs-port``...,
``--plant-opt``) as one ``PlantChoice``, the name with its options, which
``build_run`` and the evaluation and identification pass on to ``make_plant``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..kinds import Policy
from ..plant.base import Plant
from ..scenario import Scenario

__all__ = ["Run", "build_run", "build_policies", "policy_files", "resolve_model_ref", "plant_choice", "ARTIFACTS",
           "DEFAULT_TARGET_FRACTION", "HARDWARE_FLAGS"]

#: Policies that run from trained files: name -> the factory options that name them
#: (``policy_files`` resolves them). Every other policy is built from its name alone.
ARTIFACTS: dict[str, tuple[str, ...]] = {"mlc": ("model", "gains"), "pi": ("gains",)}

#: The target without --target, as a fraction of the scenario's bottleneck capacity B_max
#: (ours: half of B_max, a target every scenario can reach).
DEFAULT_TARGET_FRACTION = 0.5


#: The hardware plant's flags (``build_hardware_plant``'s options of the same names).
HARDWARE_FLAGS = ("dev", "netns", "ovs_port", "ovs_db", "ovs_mode")


def plant_choice(plant: str, *, telemetry: str | None = None, extra: list[str] | tuple[str, ...] = (),
                 **hardware: Any) -> Any:
    """The plant flags as a ``PlantChoice`` (the name with its options); one-line ``ValueError``.

    ``telemetry``: the netns plant's source (``auto | dataplane | kernel | ebpf``) or the hardware
    plant's (``HOST:PORT`` of a P4Runtime switch, or ``ebpf:LAN_IF[,LAN_IF...],WAN_IF``); the fluid
    plant has none. ``hardware``: ``HARDWARE_FLAGS`` (None = not given), the hardware plant's only.
    ``extra``: ``--plant-opt KEY=VALUE`` items, any plant's options (checked when the plant is).
    """
    from ..plant.base import PlantChoice
    from ..scenario import parse_override

    unknown = [k for k in hardware if k not in HARDWARE_FLAGS]
    if unknown:
        raise TypeError(f"plant_choice() got an unexpected flag {unknown[0]!r}")
    given = {k: v for k, v in hardware.items() if v is not None}
    opts: dict[str, Any] = {}
    if plant == "hardware":
        opts = {**given, "telemetry": telemetry}
    elif given:
        flags = ", ".join("--" + k.replace("_", "-") for k in given)
        raise ValueError(f"{flags}: for --plant hardware only")
    elif telemetry is not None:
        if plant != "netns":
            raise ValueError(f"--telemetry: the {plant} plant has no telemetry to choose (netns and hardware do)")
        opts["telemetry"] = telemetry
    for item in extra:
        if "=" not in item:
            raise ValueError(f"--plant-opt {item!r}: expected KEY=VALUE")
        key, value = parse_override(item)
        opts[key] = value
    return PlantChoice(plant, opts)


@dataclass(frozen=True)
class Run:
    """What a command runs: a scenario, a policy object, a plant by name and its options, a target (bit/s)."""

    scenario: Scenario
    policy: Policy
    plant: str
    target: float
    plant_options: Mapping[str, Any] = field(default_factory=dict)

    def make_plant(self, batch: int = 1) -> Plant:
        """Build the plant (``plant.base.make_plant``) for this run's scenario."""
        from ..plant.base import make_plant

        return make_plant(self.plant, self.scenario, batch=batch, **self.plant_options)


def build_run(
    scenario: str | Scenario,
    *,
    overrides: list[str] | None = None,
    policy: str = "trivial",
    plant: str = "fluid",
    plant_options: Mapping[str, Any] | None = None,
    target: str | float | None = None,
    duration: str | float | None = None,
    seed: int | None = None,
    model: str | None = None,
    gains: str | None = None,
    tracking_uri: str | None = None,
) -> Run:
    """CLI strings -> ``Run``; one-line ``ValueError`` for anything wrong, before any plant is built.

    ``overrides``: ``--set KEY=VALUE`` items; ``policy.KEY=VALUE`` ones configure
    the policy (its registry factory's options), the rest the scenario.
    ``target``: a rate (``"600M"``) or bit/s; None = ``DEFAULT_TARGET_FRACTION``
    of B_max. ``model``/``gains``/``tracking_uri``: the MLC's files (a
    ``models:/NAME/VERSION`` reference is fetched from the mlflow registry); ``gains``
    alone for ``pi``.
    """
    from ..plant.base import check_plant_options
    from ..policies.configuration import parse_configuration
    from ..runner import check_places
    from ..scenario import parse_override, resolve_scenario
    from ..units import parse_rate

    members = parse_configuration(policy)  # a bad policy is one line before the scenario is read
    items = [o.strip() for o in overrides or []]
    scen_over = [o for o in items if not o.startswith("policy.")]
    options = dict(parse_override(o[len("policy."):]) for o in items if o.startswith("policy."))
    # Trained files may come as --set policy.model=/policy.gains= (or policy.MEMBER.gains=) too.
    for key in [k for k in options if k.rpartition(".")[2] in ("model", "gains")
                and k.rpartition(".")[0] in ("", *members)]:
        given = options.pop(key)
        model, gains = (model or given, gains) if key.endswith("model") else (model, gains or given)
    sc = resolve_scenario(scenario, scen_over, duration, seed)
    bps = DEFAULT_TARGET_FRACTION * sc.capacity if target is None else parse_rate(target, what="--target")
    tgt = sc.check_target(bps)
    plant_options = {**getattr(plant, "options", {}), **(plant_options or {})}
    plant = str(plant)
    backend = check_plant_options(plant, 1, plant_options)
    built, _ = build_policies([policy], sc, files={policy: {"model": model, "gains": gains}},
                              options={policy: options}, tracking_uri=tracking_uri)
    pol = next(iter(built.values()))
    if isinstance(backend.cls, type):  # a plant class: every place checked before it is built (a factory
        check_places(backend.cls, pol)  # composes its actuators; the runner checks what it built)
    return Run(sc, pol, plant, tgt, dict(plant_options or {}))


def policy_files(name: str, scenario: Scenario, *, model: str | None = None, gains: str | None = None,
                 tracking_uri: str | None = None) -> dict[str, str]:
    """The trained files policy ``name`` runs with on ``scenario`` (``ARTIFACTS``), as factory options.

    ``mlc``: ``model`` (a directory or a ``models:/...`` reference) and ``gains``; ``pi``:
    ``gains``. Given ones win; with none, those shipped for the scenario (named on
    stderr); otherwise, and for a missing or unreadable file, one ``ValueError`` /
    ``FileNotFoundError`` line. A policy without files: ``{}``, and files given to it
    are refused.
    """
    if name == "mlc":
        from ..policies.rate.mlc import mlc_files

        model, gains, _ = resolve_model_ref(model, gains, tracking_uri)
        m, g = mlc_files(scenario, model, gains)
        _check_model_files(m, g)
        return {"model": m, "gains": g}
    if model:
        raise ValueError(f"policy {name} takes no --model (only mlc runs an inverse model)")
    if name == "pi":
        # The MLC without its model: gains only (policies/rate/pi.py resolves the shipped ones).
        from ..policies.rate.pi import pi_gains_file

        g = pi_gains_file(scenario, gains)
        _check_model_files(None, g)
        return {"gains": g}
    if gains:
        raise ValueError(f"policy {name} takes no --gains (only mlc and pi run from tuned gains)")
    return {}


def _check_model_files(model: str | None, gains: str) -> None:
    """One line for a missing model directory or gains file, or unreadable gains, before any plant."""
    from pathlib import Path

    from ..policies.rate.mlc import Gains

    if model is not None:
        mp = Path(model)
        if not mp.exists():
            raise FileNotFoundError(f"model directory not found: {mp}")
        if not mp.is_dir():
            raise ValueError(f"--model must be a model directory (from `scidmz train`), got a file: {mp}")
    if not Path(gains).exists():
        raise FileNotFoundError(f"gains file not found: {gains}")
    Gains.load(gains)  # a bad gains file is one line here, even when the model is also wrong


def build_policies(
    names: list[str],
    scenario: Scenario,
    *,
    files: Mapping[str, Mapping[str, str | None]] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    tracking_uri: str | None = None,
) -> tuple[dict[str, Policy], dict[str, dict[str, str]]]:
    """Policy objects by canonical name, in ``names``' order, and the trained files each runs with.

    A name is a policy or a configuration of several (``pacing+pi``;
    ``policies.configuration.parse_configuration`` is the one parse of a policy
    string); both results are keyed by the canonical name. ``files``: per policy
    (member) name, its given files (``{"mlc": {"model": ..., "gains": ...},
    "pi": {"gains": ...}}``; None or missing: the shipped ones, ``policy_files``);
    files given under a configuration's own name go to its member that runs from
    files. ``options``: per name, its ``--set policy.KEY=VALUE`` options
    (``configuration.split_member_options``). Unknown names, options and files
    are one line each, before any policy is built.
    """
    from ..policies.configuration import SEPARATOR, build_configuration, parse_configuration

    members = {n: parse_configuration(n) for n in names}  # every bad name is one line before any file
    given = files or {}
    per_member: dict[str, dict[str, dict[str, str]]] = {}
    for n, ms in members.items():
        whole = {k: v for k, v in (given.get(n) or {}).items() if v} if n not in ms else {}
        holder = next((m for m in ms if m in ARTIFACTS), ms[0])
        per_member[n] = {m: policy_files(m, scenario, tracking_uri=tracking_uri,
                                         **{k: v for k, v in (given.get(m) or {}).items() if v},
                                         **(whole if m == holder else {}))
                         for m in ms}
    opts = options or {}
    built = {SEPARATOR.join(ms): build_configuration(n, opts.get(n), per_member[n].__getitem__)
             for n, ms in members.items()}
    found = {SEPARATOR.join(ms): {k: v for f in per_member[n].values() for k, v in f.items()}
             for n, ms in members.items()}
    return built, found


def resolve_model_ref(model: str | None, gains: str | None,
                      tracking_uri: str | None = None) -> tuple[str | None, str | None, str | None]:
    """A ``models:/...`` ``--model`` -> (local model directory, gains, the reference).

    Without ``gains``, the gains ``scidmz tune`` attached to that model version are
    used. A plain path comes back as given, with reference None.
    """
    from ..tracking import is_model_uri, resolve_model

    if not is_model_uri(model):
        return model, gains, None
    local, attached = resolve_model(str(model), tracking_uri)
    return local, gains if gains is not None else attached, str(model)
