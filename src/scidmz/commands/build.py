"""The one assembly: command-line strings -> (scenario, policy, plant, target), checked before any work.

``build_run`` is what ``scidmz simulate`` and ``scidmz control run`` turn their
arguments into: the scenario (a name or a .toml file, with ``--set`` overrides,
duration and seed), the policy object (``--policy`` with its ``--set
policy.KEY=VALUE`` options; for the MLC its model and gains, from
``--model``/``--gains``, a registry reference ``models:/...`` or the model
shipped for the scenario; for ``pi`` its gains, ``--gains`` or those shipped), the plant by name with its options (checked against
the backend's signature, built later by ``Run.make_plant``) and the DTN target.
Every problem is one ``ValueError`` line (exit 2) before a plant exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..kinds import Policy
from ..plant.base import Plant
from ..scenario import Scenario

__all__ = ["Run", "build_run", "resolve_model_ref", "DEFAULT_TARGET_FRACTION"]

#: The target without --target, as a fraction of the scenario's bottleneck capacity B_max
#: (ours: half of B_max, a target every scenario can reach).
DEFAULT_TARGET_FRACTION = 0.5


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
    from ..policies.registry import make_policy, split_policy_overrides
    from ..scenario import resolve_scenario
    from ..units import parse_rate

    scen_over, options = split_policy_overrides(policy, overrides)
    sc = resolve_scenario(scenario, scen_over, duration, seed)
    bps = DEFAULT_TARGET_FRACTION * sc.capacity if target is None else parse_rate(target, what="--target")
    tgt = sc.check_target(bps)
    check_plant_options(plant, 1, plant_options)
    if policy == "mlc":
        # The one policy with trained files: given ones, a registry reference, or the shipped ones.
        from ..policies.rate.mlc import mlc_files

        model, gains, _ = resolve_model_ref(model or options.pop("model", None), gains or options.pop("gains", None),
                                            tracking_uri)
        options["model"], options["gains"] = mlc_files(sc, model, gains)
    elif policy == "pi":
        # The MLC without its model: gains only (given, or shipped for the scenario).
        from ..policies.rate.pi import pi_gains_file

        if model or "model" in options:
            raise ValueError("policy pi takes no --model (it is the MLC's anti-windup PI without the inverse model)")
        options["gains"] = pi_gains_file(sc, gains or options.pop("gains", None))
    return Run(sc, make_policy(policy, **options), plant, tgt, dict(plant_options or {}))


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
