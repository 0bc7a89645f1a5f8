"""Build a daemon from a scenario, a policy object and a plant by name, and run it.

The strings are the command's business (``scidmz.commands.build.build_run``);
here the daemon's own settings are checked (API and metrics addresses, token
file) before the plant is built, and the plant is closed if the daemon cannot
be made.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from ..kinds import Policy
from ..scenario import Scenario
from .serve import ControlDaemon
from .tokenfile import DEFAULT_API, TokenFile, parse_api_address, parse_listen_address

__all__ = ["run_daemon", "build_daemon"]


def build_daemon(
    *,
    scenario: Scenario,
    policy: Policy,
    target: float,
    plant: str = "fluid",
    plant_options: Mapping[str, Any] | None = None,
    api: str | None = DEFAULT_API,
    metrics_addr: str | None = None,
    token_file: str | None = None,
    log_path: str | None = None,
    duration: float | None = None,
    seed: int | None = None,
    shadow: bool = False,
) -> ControlDaemon:
    """Check the daemon's settings up front (one-line ValueError), then build the plant and the daemon.

    ``shadow``: the plant gets ``RecordingActuator`` as its actuator (nothing is applied) and the
    loop reports the u it would apply (``loop.ControlLoop``); a plant without an actuator option
    (the fluid simulator: no shaper to leave alone) is refused."""
    from ..plant.base import make_plant

    if api is not None:
        parse_api_address(api)  # fail on a bad address before building a testbed
        TokenFile(token_file, "").check_writable()  # and on a token file we could never write
    if metrics_addr is not None:
        parse_listen_address(metrics_addr, "metrics address")
    options = dict(plant_options or {})
    if shadow:
        options = _shadow_options(plant, options)
    plant_obj = make_plant(plant, scenario, **options)
    try:
        return ControlDaemon(plant_obj, policy, target, api=api, metrics_addr=metrics_addr, token_file=token_file,
                             log=log_path if log_path not in (None, "-") else sys.stdout,
                             duration=duration, seed=seed, shadow=shadow)
    except BaseException:
        plant_obj.close()
        raise


def _shadow_options(plant: str, options: dict[str, Any]) -> dict[str, Any]:
    """The plant's options with the recording actuator in place of its shaper."""
    import inspect

    from ..actuators.recording import RecordingActuator
    from ..plant.base import check_plant_options

    backend = check_plant_options(plant, 1, options)
    if "actuator" not in inspect.signature(backend.cls).parameters:
        raise ValueError(f"--shadow: the {plant} plant has no shaper to leave alone (shadow mode watches a real "
                         "network: --plant netns or hardware)")
    if options.get("actuator") is not None:
        raise ValueError("--shadow replaces the plant's actuator; do not give one (--plant-opt actuator=...)")
    # A plant with a host place paces nothing in shadow mode either (its agents are asked, never set).
    host = {"host_shadow": True} if "host_shadow" in inspect.signature(backend.cls).parameters else {}
    return {**options, "actuator": RecordingActuator, **host}


def run_daemon(*, on_start: Callable[[ControlDaemon], None] | None = None, **kwargs: Any) -> dict[str, Any]:
    """``build_daemon(**kwargs)``, then ``on_start(daemon)`` (e.g. install signal handlers), then run it."""
    d = build_daemon(**kwargs)
    if on_start is not None:
        on_start(d)
    return d.run()
