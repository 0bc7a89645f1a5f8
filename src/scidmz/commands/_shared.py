"""What every command module shares: the common arguments and the ``--json`` output line.

One helper per argument that several commands take (``--json``, ``--seed``,
``--model``/``--gains``, ``--tracking-uri``, ``--policy``, the scenario and
its ``--set``, the plant and its options), so a flag means the same everywhere.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..guard.jsonout import json_line
from ..guard.options import Needs

if TYPE_CHECKING:
    from ..plant.registry import PlantSpec

__all__ = ["add_scenario_args", "add_set_arg", "add_json_arg", "add_seed_arg", "add_model_args", "add_tracking_arg",
           "add_policy_arg", "add_plant_args", "plant_arg", "emit", "resolve_model_args", "MODEL_HELP",
           "add_policy_file_args", "policy_file_args", "policy_file_rules"]

#: --model help: a directory or a registry reference.
MODEL_HELP = ("inverse-model directory (from `scidmz train`) or a registry reference models:/NAME/VERSION "
              "or models:/NAME@ALIAS (then --gains defaults to the gains `tune` attached to it)")


def emit(result: dict[str, Any], as_json: bool, human: str | None = None) -> None:
    """Print the human summary, and with ``--json`` one strict JSON object as stdout's last line."""
    if human and not as_json:
        print(human)
    if as_json:
        from ..state import json_default_lenient  # numpy: only when there is JSON to write

        if human:
            print(human, file=sys.stderr)
        print(json_line(result, default=json_default_lenient))


def add_scenario_args(p: argparse.ArgumentParser, policy: bool = False) -> None:
    """The positional scenario and the repeatable ``--set KEY=VALUE`` override (``policy``: the
    command runs a ``--policy``, which ``--set policy.KEY=VALUE`` configures)."""
    p.add_argument("scenario", help="built-in scenario name (see `scidmz scenarios`) or a .toml file")
    add_set_arg(p, policy)


def add_set_arg(p: argparse.ArgumentParser, policy: bool = False) -> None:
    """The repeatable ``--set KEY=VALUE``."""
    note = "; policy.KEY=VALUE configures the policy, e.g. --set policy.queues=2 for jenks" if policy else ""
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help=f"override a scenario key, e.g. --set dtn.cca=bbr2 --set link.capacity=100M{note}")


def add_json_arg(p: argparse.ArgumentParser, what: str = "a JSON summary") -> None:
    """``--json``: ``what`` as one JSON object, the last line of stdout (ARCHITECTURE.md conventions)."""
    p.add_argument("--json", action="store_true", help=f"print {what} as the last line")


def add_seed_arg(p: argparse.ArgumentParser, default: int | None = 0, what: str = "random seed") -> None:
    """``--seed N``; ``default`` None means the scenario's own seed."""
    shown = "the scenario's" if default is None else str(default)
    p.add_argument("--seed", type=int, default=default, help=f"{what} (default: {shown})")


def add_model_args(p: argparse.ArgumentParser, gains_help: str | None = "gains JSON file (policy mlc or pi)",
                   required: bool = False, model_note: str = " (policy mlc)") -> None:
    """``--model`` (a directory or a registry reference) and, unless ``gains_help`` is None, ``--gains``."""
    p.add_argument("--model", default=None, required=required, help=MODEL_HELP + model_note)
    if gains_help is not None:
        p.add_argument("--gains", default=None, help=gains_help)


def add_tracking_arg(p: argparse.ArgumentParser) -> None:
    """``--tracking-uri``: the mlflow store."""
    p.add_argument("--tracking-uri", default=None, help="mlflow store (default ./mlruns or $MLFLOW_TRACKING_URI)")


def add_policy_arg(p: argparse.ArgumentParser, note: str = "") -> None:
    """``--policy NAME``, the choices read from the policy registry (no policy module is imported)."""
    from ..policies.registry import policy_names

    p.add_argument("--policy", default="trivial",
                   help=f"{' | '.join(policy_names())}, or a configuration of several, at most one per place "
                        f"(NAME+NAME, e.g. pacing+pi) (default trivial){note}")


def add_policy_file_args(p: argparse.ArgumentParser) -> None:
    """``--NAME-FILE`` for every trained file of every registered policy (``--mlc-model``, ``--mlc-gains``,
    ``--pi-gains``, ...), read from the policy registry (no policy module is imported)."""
    from ..policies.registry import policy_file_flags, policy_files

    for dest, (name, file) in policy_file_flags().items():
        what = "model directory or models:/ reference" if file == "model" else f"{file} file"
        attached = file == "gains" and "model" in policy_files(name)  # tune attaches gains to a model version
        p.add_argument("--" + dest.replace("_", "-"), dest=dest, default=None, metavar=file.upper(),
                       help=f"policy {name}'s {what} (default: the one shipped for the scenario"
                            + (", or attached to a models:/ reference)" if attached else ")"))


def policy_file_rules(names_of: Callable[[argparse.Namespace], Sequence[str]], among: str = "--policies",
                      ) -> dict[str, tuple[Needs, ...]]:
    """``guard.options`` rules for the ``--NAME-FILE`` flags: each goes with a run of policy NAME
    (``names_of(args)``: the policies the command runs). ``--pi-gains`` in a run without pi
    used to be ignored without a word."""
    from ..policies.registry import policy_file_flags

    def runs(name: str) -> Callable[[argparse.Namespace], bool]:
        def test(a: argparse.Namespace) -> bool:
            try:
                return name in names_of(a)
            except ValueError:  # a bad policy list is the command's own one-line refusal, later
                return True
        return test

    return {dest: (Needs(runs(name), f"goes with {among} including {name} only"),)
            for dest, (name, _) in policy_file_flags().items()}


def policy_file_args(a: argparse.Namespace, names: list[str]) -> dict[str, dict[str, str | None]]:
    """The ``--NAME-FILE`` values of policies ``names`` (a configuration's members each):
    {policy: {file: path or None}}."""
    from ..policies.configuration import parse_configuration
    from ..policies.registry import policy_file_flags

    files: dict[str, dict[str, str | None]] = {m: {} for n in names for m in parse_configuration(n)}
    for dest, (name, file) in policy_file_flags().items():
        if name in files:
            files[name][file] = getattr(a, dest, None)
    return files


def resolve_model_args(a: argparse.Namespace) -> str | None:
    """Turn a ``models:/...`` ``--model`` into a local directory (and ``--gains`` when not given).

    Returns the registry reference (None for a plain path); for the commands that
    hand the paths on themselves (``evaluate``, ``tune``). ``simulate`` and
    ``control run`` resolve through ``build.build_run``.
    """
    from .build import resolve_model_ref

    a.model, gains, ref = resolve_model_ref(getattr(a, "model", None), getattr(a, "gains", None),
                                            getattr(a, "tracking_uri", None))
    if hasattr(a, "gains"):
        a.gains = gains
    return ref


def add_plant_args(p: argparse.ArgumentParser, realtime_note: str = "") -> None:
    """``--plant`` and its options (``--telemetry``, the hardware plant's actuator target, ``--plant-opt``),
    which ``plant_arg`` turns into the ``PlantSpec`` the command passes on."""
    from ..plant.registry import DEFAULT_PLANT, plant_names

    g = p.add_argument_group("plant")
    g.add_argument("--plant", default=DEFAULT_PLANT, help=" | ".join(
        n + (f" (default{realtime_note})" if n == DEFAULT_PLANT else "") for n in plant_names()))
    g.add_argument("--telemetry", default=None, metavar="SOURCE",
                   help="netns plant: auto (default) | dataplane | kernel | ebpf (the eBPF programs on BR1); "
                        "hardware plant: HOST:PORT of the P4Runtime telemetry switch, e.g. 10.0.0.5:9559, or "
                        "ebpf:LAN_IF[,LAN_IF...],WAN_IF for the eBPF programs on this router's interfaces")
    g.add_argument("--dev", default=None, help="hardware plant: interface whose egress TBF is the actuator")
    g.add_argument("--netns", default=None,
                   help="hardware plant: network namespace of --dev (and of the ebpf: interfaces)")
    g.add_argument("--ovs-port", default=None, help="hardware plant: OVS port to shape instead of --dev")
    g.add_argument("--ovs-db", default=None, help="hardware plant: OVSDB remote (default the system's db.sock)")
    g.add_argument("--ovs-mode", default=None, help="hardware plant: htb | meter | policing (default htb)")
    g.add_argument("--dtn-agent", action="append", default=None, metavar="URL",
                   help="hardware plant: a DTN's `scidmz agent`, e.g. http://192.0.2.7:8643, the host place "
                        "(pacing policies); repeatable: the DTNs' target is split among them on what each delivers")
    g.add_argument("--dtn-agent-token", action="append", default=None, metavar="FILE",
                   help="hardware plant: a copy of the agent's token file; once for every --dtn-agent, or once "
                        "per --dtn-agent in the same order")
    g.add_argument("--queues-dev", default=None, metavar="IFACE",
                   help="hardware plant: the router's WAN interface that holds a queue policy's K queues "
                        "(HTB leaves, bfifo, u32 rules), e.g. for --policy jenks")
    g.add_argument("--discipline", default=None, metavar="p4:HOST:PORT",
                   help="hardware plant: the P4Runtime address of the switch (BMv2) that forwards the bottleneck "
                        "traffic, for --policy abc|ffs: it loads disciplines/<name>/p4 and sets the weights every "
                        "period (--plant-opt discipline_pipeline=DIR: p4c's output instead of compiling; "
                        "discipline_ports=IN,OUT, default 0,1)")
    g.add_argument("--plant-opt", action="append", default=[], metavar="KEY=VALUE",
                   help="any other keyword option of the plant, e.g. egress_hook=tc (repeatable)")


def plant_arg(a: argparse.Namespace) -> PlantSpec:
    """The plant flags of ``add_plant_args`` as a checked ``PlantSpec`` (one-line ValueError)."""
    from .build import PLANT_FLAGS, plant_choice

    return plant_choice(a.plant, telemetry=a.telemetry, extra=a.plant_opt or [],
                        **{k: getattr(a, k) for k in PLANT_FLAGS})
