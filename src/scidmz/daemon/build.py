"""Build a daemon from CLI-style strings (scenario name, plant kind, policy name) and run it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from ..units import parse_rate
from .loop import ControlDaemon
from .tokenfile import DEFAULT_API, parse_api_address, parse_listen_address

__all__ = ["run_daemon", "build_daemon"]


def build_daemon(
    *,
    scenario: str,
    overrides: list[str] | None = None,
    plant: str = "fluid",
    policy: str = "trivial",
    target: str = "600M",
    model: str | None = None,
    gains: str | None = None,
    api: str | None = DEFAULT_API,
    metrics_addr: str | None = None,
    token_file: str | None = None,
    log_path: str | None = None,
    duration: str | None = None,
    seed: int | None = None,
    plant_kwargs: dict[str, Any] | None = None,
) -> ControlDaemon:
    """Validate everything up front (one-line ValueError), then build the plant and the daemon."""
    from ..plant.base import PLANT_KINDS, make_plant
    from ..policies import make_policy, split_policy_overrides
    from ..scenario import load_scenario
    from ..units import parse_time
    from .tokenfile import TokenFile

    scen_over, pol_opts = split_policy_overrides(policy, overrides)
    sc = load_scenario(scenario)
    if scen_over:
        sc = sc.with_overrides(scen_over)
    tgt = sc.check_target(parse_rate(target, "target"))
    dur = parse_time(duration, "duration") if duration is not None else None
    if plant not in PLANT_KINDS:
        raise ValueError(f"unknown plant '{plant}' (choose from {', '.join(PLANT_KINDS)})")
    if policy == "mlc":
        from ..policies.rate.mlc import mlc_files

        model, gains = mlc_files(sc, model, gains)
        pol = make_policy("mlc", model=model, gains=gains)
    else:
        pol = make_policy(policy, **pol_opts)
    if api is not None:
        parse_api_address(api)  # fail on a bad address before building a testbed
        TokenFile(token_file, "").check_writable()  # and on a token file we could never write
    if metrics_addr is not None:
        parse_listen_address(metrics_addr, "metrics address")
    plant_obj = make_plant(plant, sc, **(plant_kwargs or {}))
    try:
        return ControlDaemon(plant_obj, pol, tgt, api=api, metrics_addr=metrics_addr, token_file=token_file,
                             log=log_path if log_path not in (None, "-") else sys.stdout,
                             duration=dur, seed=seed)
    except BaseException:
        plant_obj.close()
        raise


def run_daemon(*, on_start: Callable[[ControlDaemon], None] | None = None, **kwargs: Any) -> dict[str, Any]:
    """``build_daemon(**kwargs)``, then ``on_start(daemon)`` (e.g. install signal handlers), then run it."""
    d = build_daemon(**kwargs)
    if on_start is not None:
        on_start(d)
    return d.run()
