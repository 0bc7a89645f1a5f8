"""The operating regime a model was trained in, and the warning when it is used in another.

An inverse model (MLC paper, section 3.5) learns the static and dynamic map of
*one* network: its bottleneck buffer decides whether the trivial TBF already
fills the DTN's target (deep buffers) or leaves it short (the paper's shallow
regime, ``benchmarks/buffer_regime.py``), and its DTN congestion control
decides how the DTN answers u. ``fingerprint`` condenses a scenario into what
must match; training stores it in the model's metadata and the MLC warns,
naming both, when a model meets a scenario of another regime or CCA.
"""

from __future__ import annotations

from typing import Any

__all__ = ["fingerprint", "mismatch", "SHALLOW_MAX_BDP"]

#: Below this many BDPs of the DTN path a bottleneck buffer is "shallow": in the
#: buffer sweep the trivial TBF's fill stays under 0.99 of target up to 0.1 BDP and
#: reaches it by 0.25 BDP on real kernel CUBIC and on the fluid plant (ours, from
#: reports/mlc/regime).
SHALLOW_MAX_BDP = 0.25


def _get(d: Any, *keys: str, default: Any = None) -> Any:
    for k in keys:
        d = getattr(d, k, None) if not isinstance(d, dict) else d.get(k)
        if d is None:
            return default
    return d


def fingerprint(scenario: Any) -> dict[str, Any]:
    """Regime-defining fields of a ``Scenario`` or of its ``to_dict()`` form (SI units)."""
    cap = float(_get(scenario, "link", "capacity", default=0.0) or 0.0)
    rtt = float(_get(scenario, "dtn", "rtt", default=0.0) or 0.0)
    buf = _get(scenario, "link", "buffer")
    bdp_bytes = cap * rtt / 8.0
    if buf is not None and bdp_bytes > 0:
        bdp = float(buf) / bdp_bytes
    else:
        bdp = float(_get(scenario, "link", "buffer_bdp", default=1.0))
    return {
        "regime": "shallow" if bdp < SHALLOW_MAX_BDP else "deep",
        "buffer_bdp": round(bdp, 6),
        "capacity": cap,
        "dtn_cca": _get(scenario, "dtn", "cca"),
        "campus_cca": _get(scenario, "campus", "cca"),
        "campus_traffic": _get(scenario, "campus", "traffic"),
        "scenario": _get(scenario, "name"),
    }


def mismatch(stored: dict[str, Any] | None, scenario: Any, what: str = "model") -> str | None:
    """A one-line warning when ``stored`` (a fingerprint) and ``scenario`` differ in regime or CCA."""
    if not stored:
        return None
    now = fingerprint(scenario)
    diffs = [k for k in ("regime", "dtn_cca") if stored.get(k) is not None and stored.get(k) != now.get(k)]
    if not diffs:
        return None
    def desc(f: dict[str, Any]) -> str:
        return (f"'{f.get('scenario')}' ({f.get('regime')} buffer, {f.get('buffer_bdp')} BDP, "
                f"DTN {f.get('dtn_cca')})")
    return (f"{what} was trained on {desc(stored)} but is used on {desc(now)}: "
            f"its map of u to the DTN rate does not carry over ({', '.join(diffs)} differ)")
