"""``pi``: the MLC without its model — the anti-windup PI of Fig. 5 around the trivial rate.

The MLC (Vega et al., eq. 1 and Fig. 5; ``mlc.py``) feeds the inverse ANN's
estimate u_hat into an anti-windup PI whose output a +-Delta_u(t) saturator
bounds. ``PIPolicy`` is the same loop (``antiwindup.AntiWindupRatePolicy``: the
same ``AntiWindupPI``, band or slew-rate limiter, fallback and ``Gains``) with
u_hat = B_max - R*_DTN(t), the administrator's trivial rate (section 3.7). It is
the control experiment for the ANN: ``pi`` differs from ``mlc`` only
by the inverse model, and its gains are tuned by the same GA (``scidmz tune
SCENARIO --policy pi``) and refined on the testbed the same way
(``--refine-plant netns``). Ours, not in the paper.

Shipped gains: ``pi_gains.json`` beside the MLC model of a scenario
(``scidmz.datasets.shipped_pi_gains``); ``pi_gains_file`` picks given gains or those.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...state import History
from ..registry import register_policy
from .antiwindup import AntiWindupRatePolicy, Gains

__all__ = ["PIPolicy", "pi_gains_file"]


class PIPolicy(AntiWindupRatePolicy):
    """The anti-windup PI of Fig. 5 with u_hat = B_max - R*_DTN (name "pi"); see the module docstring.

    ``gains``: one ``Gains`` or one per batch instance; ``delta_u`` (fraction of
    B_max) overrides the gains' own band.
    """

    name = "pi"
    _fallback_what = "pi: the measured DTN rate"

    def __init__(self, gains: Gains | Sequence[Gains], delta_u: float | None = None) -> None:
        super().__init__(gains, delta_u)

    @classmethod
    def from_gains(cls, gains: Any, delta_u: float | None = None) -> PIPolicy:
        """The registry's factory: ``gains`` a gains JSON (as ``scidmz tune`` writes) or a ``Gains``."""
        if isinstance(gains, str | os.PathLike):
            gains = Gains.load(gains)
        return cls(gains, delta_u=delta_u)

    def u_hat(self, history: History, target: np.ndarray) -> np.ndarray:
        """The trivial rate B_max - R*_DTN (unclipped, as y_d's campus entry that ``mlc`` feeds its ANN)."""
        return self._need().capacity - target


def pi_gains_file(scenario: Any, gains: str | os.PathLike[str] | None) -> str:
    """The gains file ``pi`` runs with on ``scenario``: ``gains`` if given, else the one shipped.

    The shipped one (``scidmz.datasets.shipped_pi_gains``) is named on stderr; with none,
    a one-line ``ValueError`` listing what ships.
    """
    if gains:
        return str(gains)
    from ...datasets import shipped_pi_gains, shipped_pi_gains_names

    found = shipped_pi_gains(scenario)
    if found is None:
        have = ", ".join(shipped_pi_gains_names()) or "none"
        raise ValueError(f"policy pi needs a gains file (--gains FILE; no pi gains ship for '{scenario.name}' "
                         f"with DTN {scenario.dtn.cca}; shipped: {have})")
    import sys

    print(f"scidmz: policy pi: using the gains shipped for '{scenario.name}' ({found})", file=sys.stderr)
    return str(found)


def pi_trained_files(scenario: Any, *, gains: str | None = None) -> dict[str, str]:
    """The registry's resolver of pi's gains file (``pi_gains_file``), checked (one line if missing or bad)."""
    from .mlc import check_trained_files

    g = pi_gains_file(scenario, gains)
    check_trained_files(gains=g)
    return {"gains": g}


register_policy("pi", "rate", PIPolicy.from_gains, files=pi_trained_files)
