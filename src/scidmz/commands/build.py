"""The one assembly: command-line strings -> (scenario, policy, plant, target), checked before any work.

``build_run`` is what ``scidmz simulate`` and ``scidmz control run`` turn their
arguments into: the scenario (a name or a .toml file, with ``--set`` overrides,
duration and seed), the policy object (``--policy`` with its ``--set
policy.KEY=VALUE`` options and, for a policy that runs from trained files, those
files: given, a registry reference ``models:/...`` for a model, or the ones shipped
for the scenario), the plant spec (``plant.base.PlantSpec``: the name with its
options, checked once) and the DTN target. Every problem is one ``ValueError``
line (exit 2) before a plant exists; ``Run.make_plant`` then builds the plant.

``build_policies`` is the same assembly for the commands that compare several
policies (``scidmz evaluate``, ``scidmz leaderboard``): names from the registry,
each with its trained files (``trained_files``, read from the policy's registry
entry) and ``--set policy.KEY=VALUE`` options; a policy without files needs
nothing beyond its name. A policy name is parsed in one place, ``_policy_name``.

``plant_choice`` is the other half every command that takes a plant shares:
the plant flags (``--plant``, ``--telemetry``, ``--dev``/``--ovs-port``...,
``--plant-opt``) as one ``PlantSpec``; which flags a plant takes is its registry
entry's (``register_plant(cli=...)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..kinds import Policy
from ..plant.base import Plant
from ..plant.registry import PlantSpec
from ..scenario import Scenario

__all__ = ["Run", "build_run", "build_policies", "trained_files", "resolve_model_ref", "plant_choice",
           "DEFAULT_TARGET_FRACTION", "PLANT_FLAGS"]

#: The target without --target, as a fraction of the scenario's bottleneck capacity B_max
#: (ours: half of B_max, a target every scenario can reach).
DEFAULT_TARGET_FRACTION = 0.5


#: The plant flags beyond ``--telemetry`` (the hardware plant's rate actuator target, its host actuator,
#: the DTN agents, its queue device and its discipline switch); a plant takes those its registry entry names
#: (``register_plant(cli=...)``).
PLANT_FLAGS = ("dev", "netns", "ovs_port", "ovs_db", "ovs_mode", "dtn_agent", "dtn_agent_token", "queues_dev",
               "discipline")


def plant_choice(plant: str, *, telemetry: str | None = None, extra: list[str] | tuple[str, ...] = (),
                 **flags: Any) -> PlantSpec:
    """The plant flags as a checked ``PlantSpec`` (the name with its options); one-line ``ValueError``.

    ``telemetry`` and ``flags`` (``PLANT_FLAGS``; None = not given): the plant's own command-line
    flags, each allowed only for a plant whose registry entry declares it (``cli``). ``extra``:
    ``--plant-opt KEY=VALUE`` items, any option of the plant. The options are checked here, once.
    """
    from ..plant.registry import plant_entry, plant_names, plant_spec
    from ..scenario import parse_override

    unknown = [k for k in flags if k not in PLANT_FLAGS]
    if unknown:
        raise TypeError(f"plant_choice() got an unexpected flag {unknown[0]!r}")
    given = {k: v for k, v in {"telemetry": telemetry, **flags}.items() if v is not None and v != []}
    entry = plant_entry(plant)
    refused = [k for k in given if k not in entry.cli]
    if refused:
        takers = [n for n in plant_names() if all(k in plant_entry(n).cli for k in refused)]
        names = ", ".join("--" + k.replace("_", "-") for k in refused)
        raise ValueError(f"{names}: for --plant {' or '.join(takers) or '(none)'} only")
    opts = dict(given)
    for item in extra:
        if "=" not in item:
            raise ValueError(f"--plant-opt {item!r}: expected KEY=VALUE")
        key, value = parse_override(item)
        opts[key] = value
    return plant_spec(plant, opts)


@dataclass(frozen=True)
class Run:
    """What a command runs: a scenario, a policy object, a plant spec (name and options), a target (bit/s)."""

    scenario: Scenario
    policy: Policy
    plant: PlantSpec
    target: float

    def make_plant(self, batch: int = 1) -> Plant:
        """Build the plant for this run's scenario."""
        return self.plant.make(self.scenario, batch=batch)


def build_run(
    scenario: str | Scenario,
    *,
    overrides: list[str] | None = None,
    policy: str = "trivial",
    plant: str | PlantSpec = "fluid",
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
    of B_max. ``plant``: a name or a ``PlantSpec`` (``plant_choice``), checked here.
    ``model``/``gains``/``tracking_uri``: the policy's trained files of those names (a
    ``models:/NAME/VERSION`` model is fetched from the mlflow registry).
    """
    from ..kinds import policy_places
    from ..plant.registry import plant_spec
    from ..policies.configuration import parse_configuration
    from ..policies.registry import policy_files
    from ..runner import check_places
    from ..scenario import parse_override, resolve_scenario
    from ..units import parse_rate

    name = _policy_name(policy)  # a bad policy is one line before the scenario is read
    members = parse_configuration(name)
    items = [o.strip() for o in overrides or []]
    scen_over = [o for o in items if not o.startswith("policy.")]
    options = dict(parse_override(o[len("policy."):]) for o in items if o.startswith("policy."))
    # Trained files may come as --set policy.FILE= (or policy.MEMBER.FILE=) too; the flags win.
    file_names = {f for m in members for f in policy_files(m)}
    given = {k.rpartition(".")[2]: options.pop(k) for k in list(options)
             if k.rpartition(".")[2] in file_names and k.rpartition(".")[0] in ("", *members)}
    given.update((k, v) for k, v in (("model", model), ("gains", gains)) if v)
    sc = resolve_scenario(scenario, scen_over, duration, seed)
    bps = DEFAULT_TARGET_FRACTION * sc.capacity if target is None else parse_rate(target, what="--target")
    tgt = sc.check_target(bps)
    spec = plant_spec(plant)
    built, _ = build_policies([name], sc, files={name: given}, options={name: options}, tracking_uri=tracking_uri)
    pol = built[name]
    for member in policy_places(pol).values():  # a queue count that does not fit the link: one line, now
        check_link = getattr(member, "check_link", None)
        if callable(check_link):
            check_link(sc.capacity)
    if isinstance(spec.entry.cls, type):  # a plant class: every place checked before it is built (a factory
        check_places(spec.entry.cls, pol)  # composes its actuators; the runner checks what it built)
    return Run(sc, pol, spec, tgt)


def _policy_name(policy: str) -> str:
    """The policy or configuration (``pacing+pi``) a command line names, in canonical form, each member
    checked against the registry (one line if bad): the one place a ``--policy`` string is parsed."""
    from ..policies.configuration import canonical_name

    return canonical_name(policy)


def trained_files(name: str, scenario: Scenario, *, tracking_uri: str | None = None,
                  **given: str | None) -> dict[str, str]:
    """The trained files policy ``name`` runs with on ``scenario``, as factory options, by its registry
    entry (``policies.registry.resolve_policy_files``): given ones win (a ``models:/...`` model is
    fetched first, with the gains attached to it unless gains are given), else those shipped for
    the scenario. A policy without files: ``{}``, and files given to it are refused (one line).
    """
    from ..policies.registry import policy_files, resolve_policy_files

    if given.get("model") and "model" in policy_files(name):
        given["model"], given["gains"], _ = resolve_model_ref(given["model"], given.get("gains"), tracking_uri)
    return resolve_policy_files(name, scenario, **given)


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
    (member) name, its given files (e.g. ``{"pi": {"gains": ...}}``; None or missing:
    the shipped ones, ``trained_files``); files given under a configuration's own
    name go to its first member that runs from files. ``options``: per name, its
    ``--set policy.KEY=VALUE`` options (``configuration.split_member_options``).
    Unknown names, options and files are one line each, before any policy is built.
    """
    from ..policies.configuration import SEPARATOR, build_configuration, parse_configuration
    from ..policies.registry import policy_files

    members = {n: parse_configuration(n) for n in names}  # every bad name is one line before any file
    given = files or {}
    per_member: dict[str, dict[str, dict[str, str]]] = {}
    for n, ms in members.items():
        whole = {k: v for k, v in (given.get(n) or {}).items() if v} if n not in ms else {}
        holder = next((m for m in ms if policy_files(m)), ms[0])
        per_member[n] = {m: trained_files(m, scenario, tracking_uri=tracking_uri,
                                          **{**(whole if m == holder else {}),
                                             **{k: v for k, v in (given.get(m) or {}).items() if v}})
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
